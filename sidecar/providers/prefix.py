"""The window's stable prefix as a provider caches it, and the id that names those bytes.

A provider caches the request it was sent from its first byte: the system
instruction, then the messages. GetContext's ``cache_prefix_id`` must change
exactly when those bytes change for the window's stable prefix (its first
``stable_prefix_events`` events, as the last compaction, clearing or
restore left it), and three things change them:

- a compaction, clearing or restore, which sets a new prefix;
- a new system message, wherever it is appended: the latest one is the
  system instruction, rendered before everything (``conversation``);
- a result logged late for a call inside the prefix: it replaces that
  call's placeholder, right after the call.

So the id is a digest of what every rendering is made of: the system text
and the prefix's items (``conversation.Shaping``) with their answers as the
whole window has them, and the session's incarnation. Equal content gives
equal bytes in every format, so two states with the same prefix content get
the same id (a restore and the same compaction again, a pass that archived
only a superseded system message), and any change to it gives a new one.
An append past the prefix changes none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from hashlib import blake2b

from sidecar.model import Event, Role, Session
from sidecar.providers.conversation import Answers, Item, Orphans, Shaping

_DIGEST = 16


def item_digest(item: Item) -> bytes:
    """A digest of what the renderings take from ``item``.

    The fields go in as the ``repr`` of a tuple of strings, bytes and flags:
    a Python literal, so no two different tuples read alike, and built in C.
    """
    key: tuple[object, ...]
    if isinstance(item, Answers):
        key = ("answers", *[(a.call.id, a.call.name, a.content, a.is_error) for a in item.answers])
    elif isinstance(item, Orphans):
        key = ("orphans", *[(r.call_id, r.name, r.content, r.is_error) for r in item.results])
    else:
        key = (
            item.role.value,
            item.text,
            tuple([(p.mime_type, p.data, p.uri) for p in item.parts]) if item.parts else (),
            tuple([(r.text, r.signature, r.redacted, r.id) for r in item.reasoning])
            if item.reasoning
            else (),
            tuple([(c.id, c.name, c.arguments_json, c.signature) for c in item.tool_calls])
            if item.tool_calls
            else (),
        )
    return blake2b(repr(key).encode(errors="surrogatepass"), digest_size=_DIGEST).digest()


def incarnation(session: Session) -> str:
    """The session's id and create time: a session made again under its id gets new ids."""
    stamp = int(session.create_time.timestamp() * 1_000_000)
    return f"{session.session_id}\x00{stamp}"


class StablePrefix:
    """The stable prefix of a window, followed as events are appended to it.

    ``events`` is how many leading events make it up; ``tokens`` what
    ``token_count`` counts of it: the latest system message (rendered first
    wherever it stands) and the prefix's other events (a late result's
    tokens stay where it was logged), so never more than ``token_count``.
    """

    __slots__ = (
        "_digests",
        "_id",
        "_incarnation",
        "_items",
        "_own_estimated",
        "_own_tokens",
        "_shaping",
        "_system_tokens",
        "events",
    )

    def __init__(
        self,
        session: Session,
        window: Sequence[Event],
        digest: Callable[[Event], bytes] = item_digest,
    ) -> None:
        """``digest`` gives an event's ``item_digest``; a caller that reads the same Event
        objects again passes one that keeps them (``EventBlobs.digest``)."""
        self._incarnation = incarnation(session)
        self.events = min(session.stable_prefix_events, len(window))
        prefix = window[: self.events]
        self._shaping = Shaping()
        self._shaping.grow(prefix)
        self._items = len(self._shaping.items)
        self._digests = [
            digest(item) if isinstance(item, Event) else item_digest(item)
            for item in self._shaping.items
        ]
        self._own_tokens = sum(e.token_count for e in prefix if e.role is not Role.SYSTEM)
        self._own_estimated = any(e.token_bounds is not None for e in prefix)
        self._system_tokens = 0
        self._note_systems(prefix)
        self._id = ""
        self.grow(window[self.events :])

    def grow(self, events: Sequence[Event]) -> None:
        """Follow ``events`` appended to the window: a system message, or results answering
        the prefix's calls, change the prefix; anything else leaves it as it was."""
        if not events:
            return
        system = self._shaping.system
        first = self._shaping.grow(events)
        items = self._shaping.items
        for k in range(first, self._items):  # only the prefix's answers change in place
            if isinstance(items[k], Answers):
                digest = item_digest(items[k])
                if digest != self._digests[k]:
                    self._digests[k] = digest
                    self._id = ""
        if self._shaping.system != system:
            self._id = ""
        self._note_systems(events)

    def _note_systems(self, events: Sequence[Event]) -> None:
        for event in reversed(events):
            if event.role is Role.SYSTEM:
                self._system_tokens = event.token_count
                return

    @property
    def tokens(self) -> int:
        return self._own_tokens + self._system_tokens

    @property
    def tokens_estimated(self) -> bool:
        """Whether ``tokens`` includes estimates: an event of the prefix whose exact count
        had not landed when it was read (a system message is always counted)."""
        return self._own_estimated

    @property
    def id(self) -> str:
        """The opaque id of the prefix's bytes: 32 hex digits."""
        if not self._id:
            h = blake2b(
                repr((self._incarnation, self._shaping.system)).encode(), digest_size=_DIGEST
            )
            h.update(b"".join(self._digests))
            self._id = h.hexdigest()
        return self._id

    def charge(self) -> int:
        """An estimate of the memory it holds beside the events."""
        return self._shaping.charge() + 64 * len(self._digests) + 256
