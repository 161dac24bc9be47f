"""A window rendered from where its appended events can change it, the rest kept from before.

A rendering is a pure function of the window, laid out in four steps:
``Shaping`` reshapes the events into items (``conversation``), each item
becomes a message (``messages``), the messages are laid out as the
request's top-level pieces (a Gemini content, an Anthropic message, an
OpenAI message or input item), and the pieces are framed with the system
text. An agent reads its context after every append, so the state after
the last step is kept (in ``Fragments``) and a window that extends the kept
one, event for event, is rendered by redoing only what the appended events
can change:

- items: ``Shaping.grow`` adds the new events' items and replaces the
  answers of earlier calls the new results answer (a placeholder before);
  it returns the first item changed. Messages of the items before it are
  as they were.
- pieces: the first redone message is moved back to the start of the piece
  that holds the last unchanged message, since a message may join the
  piece before it (Gemini and Anthropic merge a run of one role into one
  content or message). A format whose piece depends on what follows it
  (``Layout.open_ended``: OpenAI Responses drops reasoning that no
  assistant output follows; Gemini signs an unsigned call in the current
  turn only) is moved back further when a redone message settles them
  (``Layout.settles``: for Responses, any message that is not open-ended
  itself; for Gemini, one that opens a turn): to the first open-ended
  message that nothing settled before.
  Pieces that start before that point are kept as they are; the others
  are laid out again from the messages from there on.
- framing: the system text (the latest SYSTEM event's) and the joined
  pieces are framed anew on every read.

A window that is not the kept one grown (a compaction or a clearing
replaced events; another window began with the same event) is rendered
from scratch and kept in its place. Nothing else is assumed: the result is
byte for byte the rendering of the whole window.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sidecar.model import Event, ToolResult
from sidecar.providers.conversation import Answer, Shaping, messages
from sidecar.providers.fragments import Fragments
from sidecar.providers.wire import Block, Chunk, Message, chunk

Pieces = tuple[list[int], list[str]]
"""Pieces laid out: the index of the message each starts with, and their JSON texts."""

# What a kept window costs beside its pieces' text: per event, its reference and the
# events it pins (charged as their text again: the pieces are mostly their text).
EVENT_OVERHEAD = 24
WINDOW_OVERHEAD = 1024


@dataclass(frozen=True, slots=True)
class Layout:
    """What the incremental renderer needs to know of a request format.

    ``names``, ``assistant``, ``user``, ``answer``, ``orphan``: as
    ``messages`` takes them. ``lay(messages, start, opens)`` lays out
    ``messages``, the window's from index ``start`` on (``opens``: they
    open the conversation), as pieces; ``frame(system, body)`` is the
    request fragment from the system text and the pieces joined by commas.
    ``open_ended(message)``: whether a message's piece depends on what is
    laid out after it, up to the next message that ``settles(message)``
    (by default, the next that is not open-ended).
    """

    names: tuple[str, str, str]
    assistant: Callable[[Event], list[Block]]
    user: Callable[[Event], list[Block]]
    answer: Callable[[Answer], list[Block]]
    orphan: Callable[[ToolResult], list[Block]]
    lay: Callable[[Sequence[Message], int, bool], Pieces]
    frame: Callable[[str, str], str]
    open_ended: Callable[[Message], bool] | None = None
    settles: Callable[[Message], bool] | None = None


@dataclass(slots=True)
class _Kept:
    """A window's rendering, as it ended: what the next window, this one grown, starts from."""

    events: list[Event] = field(default_factory=list)
    shaping: Shaping = field(default_factory=Shaping)
    said_from: list[int] = field(default_factory=list)  # per message: the item it came from
    open_ends: list[bool] = field(default_factory=list)  # per message: Layout.open_ended
    settled: list[bool] = field(default_factory=list)  # per message: Layout.settles
    starts: list[int] = field(default_factory=list)  # per piece: the message it starts with
    pieces: list[str] = field(default_factory=list)
    piece_bytes: int = 0

    def charge(self) -> int:
        return (
            WINDOW_OVERHEAD
            + 2 * self.piece_bytes
            + EVENT_OVERHEAD * (len(self.events) + len(self.said_from) + len(self.pieces))
            + self.shaping.charge()
        )


def render(events: Sequence[Event], fragments: Fragments, layout: Layout) -> str:
    """The rendering of the window ``events`` (log order) in ``layout``'s format.

    The window's rendering is kept in ``fragments`` and grown on the next
    call, when that window is this one with events appended (see the module
    docstring).
    """
    tag = layout.names[0]
    first = events[0] if events else None
    kept = fragments.window(tag, first, _Kept) if first is not None else None
    if kept is None or not _extends(events, kept.events):
        kept = _Kept()
    try:
        text = _grow(kept, events[len(kept.events) :], fragments, layout)
    except BaseException:
        fragments.forget_window(tag, first)  # half grown
        raise
    if first is not None:
        fragments.keep_window(tag, first, kept, kept.charge())
    return text


def _extends(events: Sequence[Event], kept: list[Event]) -> bool:
    """Whether ``events`` begins with the events ``kept``: the same (or equal) ones."""
    n = len(kept)
    if len(events) < n:
        return False
    head = events[:n]
    return kept == (head if isinstance(head, list) else list(head))


def _grow(kept: _Kept, appended: Sequence[Event], fragments: Fragments, layout: Layout) -> str:
    kept.events += appended
    shaping = kept.shaping
    changed = shaping.grow(appended)
    said_from, open_ends, starts, pieces = kept.said_from, kept.open_ends, kept.starts, kept.pieces
    settled = kept.settled
    unchanged = bisect_left(said_from, changed)  # the messages of the items before ``changed``
    redo = _piece_start(starts, unchanged - 1) if unchanged else 0
    earliest, k = redo, redo - 1
    while k >= 0 and not settled[k]:  # the open-ended messages nothing settled yet
        if open_ends[k]:
            earliest = k
        k -= 1
    open_ended, settles = layout.open_ended, layout.settles

    def said_from_item(first: int) -> tuple[list[Message], list[int]]:
        return messages(
            shaping.items,
            first,
            layout.names,
            fragments,
            layout.assistant,
            layout.user,
            layout.answer,
            layout.orphan,
        )

    said, came_from = said_from_item(said_from[redo] if redo < unchanged else changed)
    made = [open_ended(m) for m in said] if open_ended else [False] * len(said)
    if earliest < redo:  # their pieces change only if what is new settles them
        new = range(unchanged - redo, len(said))
        if any(settles(said[i]) if settles else not made[i] for i in new):
            redo = _piece_start(starts, earliest)
            said, came_from = said_from_item(said_from[redo])
            made = [open_ended(m) for m in said] if open_ended else [False] * len(said)
    del said_from[redo:], open_ends[redo:], settled[redo:]
    said_from += came_from
    open_ends += made
    settled += [settles(m) for m in said] if settles else [not m for m in made]
    dropped = bisect_left(starts, redo)
    kept.piece_bytes -= sum(map(len, pieces[dropped:]))
    del starts[dropped:], pieces[dropped:]
    new_starts, new_pieces = layout.lay(said, redo, redo == 0)
    starts += new_starts
    pieces += new_pieces
    kept.piece_bytes += sum(map(len, new_pieces))
    return layout.frame(shaping.system, ",".join(pieces))


def _piece_start(starts: list[int], message: int) -> int:
    """The message the piece holding ``message`` starts with (0 when none holds it)."""
    at = bisect_right(starts, message) - 1
    return starts[at] if at >= 0 else 0


def flat(said: Sequence[Message], start: int, opens: bool) -> Pieces:
    """One piece per message: for formats that never merge messages (OpenAI Chat).

    Nothing opens the conversation here, so ``opens`` changes nothing.
    """
    starts: list[int] = []
    out: list[str] = []
    for k, (_, chunks) in enumerate(said, start):
        starts.append(k)
        out.append(chunks[0].json if len(chunks) == 1 else ",".join([c.json for c in chunks]))
    return starts, out


def merged(
    message: Callable[[str, list[Chunk]], str],
    user: str,
    lead: Block,
    alone: Callable[[Message], bool] | None = None,
) -> Callable[[Sequence[Message], int, bool], Pieces]:
    """A layout that merges each run of one role into one piece, ``message(role, chunks)``,
    with a user piece of ``lead`` first when the conversation opens with another role.
    A message that is ``alone`` is a piece of its own (Gemini's function responses).

    Gemini and Anthropic both require the roles to alternate and the
    conversation to open with the user.
    """

    def lay(said: Sequence[Message], start: int, opens: bool) -> Pieces:
        starts: list[int] = []
        runs: list[Message] = []
        last_alone = False
        for k, msg in enumerate(said, start):
            role, chunks = msg
            this_alone = alone is not None and alone(msg)
            if runs and runs[-1][0] == role and not this_alone and not last_alone:
                runs[-1][1].extend(chunks)
            else:
                starts.append(k)
                runs.append((role, list(chunks)))  # a list of its own: ``chunks`` may be kept
            last_alone = this_alone
        out = [message(role, chunks) for role, chunks in runs]
        if opens and runs and runs[0][0] != user:
            starts.insert(0, start)
            out.insert(0, message(user, [chunk([lead])]))
        return starts, out

    return lay
