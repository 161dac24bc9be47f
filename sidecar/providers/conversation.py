"""The provider-neutral shape of a window: its system text, then messages with every call answered.

Every provider checks the same pairing: a tool result must answer a call of
the assistant message just before it, and (Anthropic, OpenAI) every call
must be answered before anything else is said. An agent may log anything,
so the window is reshaped here, once, for all of them:

- the latest SYSTEM event's text is the system instruction (the one the
  token trigger counts); earlier SYSTEM events were superseded by it and
  are not rendered, wherever they stand;
- a result pairs with the latest earlier call of its id that no result has
  answered yet (call ids are unique in a window, as every provider makes
  them), and is rendered right after that call's assistant message, in the
  call's order, even when the agent logged it later (a slow tool that
  answered after the user spoke again);
- a call no result answers is answered by a placeholder (``NO_RESULT``,
  an error), so the request stays valid;
- a result with no call before it (an orphan, or a second answer to a call)
  is rendered as user text that says so (``orphan_text``), at its place;
- a TOOL event's own text and parts are user content at its place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.providers.fragments import Fragments
from sidecar.providers.wire import Block, Message

NO_RESULT = "[no result was recorded for this call]"
"""The placeholder result of a call that no result in the window answers."""

LEADING_USER_TEXT = "(continuing the conversation)"
"""The user message put first where a provider needs one (Gemini, Anthropic)
and the window starts with the assistant: after a cut inside a turn, or an
assistant preamble."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A call's answer, rendered right after it: a logged result, or the placeholder."""

    call: ToolCall
    content: str
    is_error: bool
    result: ToolResult | None  # None: the placeholder


@dataclass(frozen=True, slots=True)
class Answers:
    """The answers to the calls of the assistant event just before, one per call, in order."""

    answers: tuple[Answer, ...]


@dataclass(frozen=True, slots=True)
class Orphans:
    """Results with no call before them in the window: rendered as user text."""

    results: tuple[ToolResult, ...]


Item: TypeAlias = Event | Answers | Orphans
"""An event stands for its own content (text, parts, reasoning; calls if it is an
ASSISTANT event), said by the assistant if it is an ASSISTANT event, else by the
user: a TOOL event's own text and parts are user content."""


def orphan_text(result: ToolResult) -> str:
    """The user text an orphan result becomes: it says what it is, then its content."""
    kind = "error" if result.is_error else "result"
    name = result.name or "a tool"
    return (
        f"[{kind} of {name} for call {result.call_id}, whose call is not in this context]\n"
        f"{result.content}"
    )


class Shaping:
    """A window reshaped so far (``system``, ``items``), grown by the events appended to it.

    Appended events change the items in two places only: items of their own
    at the end, and the ``Answers`` of earlier calls that their results
    answer (a placeholder before), each right after its call's event. A
    result only looks back, so how earlier results paired stays as it was,
    and the calls still open are all a new result can answer. ``grow`` says
    where the first change is: a kept rendering is redone from there.
    """

    __slots__ = ("_answers_at", "_events", "_open", "items", "system")

    def __init__(self) -> None:
        self.system = ""
        self.items: list[Item] = []
        self._events = 0  # how many events are shaped
        # call id: the (event, call) places no result has answered yet, latest last
        self._open: dict[str, list[tuple[int, int]]] = {}
        self._answers_at: dict[int, int] = {}  # an assistant event with calls: its Answers item

    def grow(self, events: Sequence[Event]) -> int:
        """Shape ``events``, appended to the window; returns the index of the first item
        that changed (``len(items)`` before, when only new items were added)."""
        system_role, assistant_role = Role.SYSTEM, Role.ASSISTANT  # read once: this runs per read
        base, items, open_calls = self._events, self.items, self._open
        first = len(items)
        paired: dict[tuple[int, int], ToolResult] = {}
        orphans: dict[int, list[ToolResult]] = {}
        for i, event in enumerate(events, base):
            role = event.role
            if role is system_role:
                self.system = event.text
            elif role is assistant_role:
                for j, call in enumerate(event.tool_calls):
                    open_calls.setdefault(call.id, []).append((i, j))
            elif event.tool_results:
                for result in event.tool_results:
                    waiting = open_calls.get(result.call_id)
                    if waiting:
                        paired[waiting.pop()] = result
                    else:
                        orphans.setdefault(i, []).append(result)
        if paired:
            for i in sorted({i for i, _ in paired if i < base}):  # earlier calls answered now
                at = self._answers_at[i]
                before = items[at]
                assert isinstance(before, Answers)
                calls = [answer.call for answer in before.answers]
                items[at] = Answers(_answers(i, calls, paired, before.answers))
                first = min(first, at)
        for i, event in enumerate(events, base):
            role = event.role
            if role is system_role:
                continue
            if orphans and i in orphans:
                items.append(Orphans(tuple(orphans[i])))
            if role is assistant_role:
                items.append(event)
                if event.tool_calls:
                    self._answers_at[i] = len(items)
                    items.append(Answers(_answers(i, event.tool_calls, paired)))
            elif event.text or event.parts:
                items.append(event)
        self._events = base + len(events)
        return first

    def charge(self) -> int:
        """An estimate of the memory it holds beside the events: its items and pairing state."""
        return 96 * (len(self.items) + len(self._answers_at)) + 160 * len(self._open)


def messages(
    items: Sequence[Item],
    first: int,
    names: tuple[str, str, str],
    fragments: Fragments,
    assistant: Callable[[Event], list[Block]],
    user: Callable[[Event], list[Block]],
    answer: Callable[[Answer], list[Block]],
    orphan: Callable[[ToolResult], list[Block]],
) -> tuple[list[Message], list[int]]:
    """One ``(role, chunks)`` per item of ``items[first:]``, built by the provider's functions;
    empty ones left out. With them, the index of the item each came from.

    ``names`` is the provider's (format's) name, then what it calls the
    assistant and the user; answers and orphan results are said by the user.
    Chunks are kept in ``fragments`` under the format's name: an event's by
    the event, an answer's by its result (or its call).
    """
    tag, by_assistant, by_user = names
    assistant_role = Role.ASSISTANT  # read once: this runs per read
    out: list[Message] = []
    came_from: list[int] = []
    said_by_assistant, said_by_user, orphaned = tag + ":a", tag + ":u", tag + ":o"
    for k in range(first, len(items)):
        item = items[k]
        if isinstance(item, Event):  # the common case, kept short
            if item.role is assistant_role:
                said = fragments.chunk(item, said_by_assistant, assistant, item)
                if said.blocks:
                    out.append((by_assistant, [said]))
                    came_from.append(k)
            else:
                said = fragments.chunk(item, said_by_user, user, item)
                if said.blocks:
                    out.append((by_user, [said]))
                    came_from.append(k)
            continue
        if isinstance(item, Answers):
            chunks = [
                fragments.chunk(a.result or a.call, f"{tag}:r:{a.call.id}:{a.call.name}", answer, a)
                for a in item.answers
            ]
        else:
            chunks = [fragments.chunk(r, orphaned, orphan, r) for r in item.results]
        chunks = [c for c in chunks if c.blocks]
        if chunks:
            out.append((by_user, chunks))
            came_from.append(k)
    return out, came_from


def _answers(
    i: int,
    calls: Sequence[ToolCall],
    paired: dict[tuple[int, int], ToolResult],
    before: Sequence[Answer] = (),
) -> tuple[Answer, ...]:
    """The answers to the calls of event ``i``: ``paired`` ones, else ``before``'s, else none."""
    out = []
    for j, call in enumerate(calls):
        result = paired.get((i, j))
        if result is not None:
            out.append(Answer(call, result.content, result.is_error, result))
        elif before:
            out.append(before[j])
        else:
            out.append(Answer(call, NO_RESULT, True, None))
    return tuple(out)
