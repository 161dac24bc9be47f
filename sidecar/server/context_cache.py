"""GetContext answers built from serialized pieces, and kept while the session is unchanged.

Every model call asks for the active window, so GetContext is the read that
matters. Two caches take the protobuf work off it:

- ``EventBlobs``: each event's wire bytes (framed as one element of
  ``GetContextResponse.events``), keyed by the identity of the Event object.
  Events are immutable and the SQLite store hands out the same object for a
  row that has not changed (``sidecar/store/event_cache.py``), so a window
  read after an append converts only the new events; the response is then
  one parse of the joined bytes, done in C, instead of a field-by-field copy
  of every event in Python (0.2 ms instead of 0.8 ms for 200 events).
  Beside them, each event's digest for the window's stable prefix
  (``sidecar.providers.prefix``), for the same reason.
- ``ContextResponses``: the last response per session, reused while the
  session's header shows the same incarnation and version (every write bumps
  the version, and a deleted and re-created session has a new create time),
  so a repeated read costs one header lookup. When this replica appends to
  the session, the new events' wire bytes are queued onto the kept response
  (an agent reads its context right after appending) and added on the next
  read; its other writes drop it, and writes by other replicas are caught by
  the version check.

Both are bounded by an estimate of the memory they hold (see
``ENTRY_OVERHEAD``); past the bound they start over or drop the least
recently used, which costs a rebuild, never a wrong answer. Both are used from the event
loop only. A session's answer and its events' bytes are kept from its second
read on (``ContextResponses.admits``, see ``sidecar.cache_admission``): an
answer read once is built and forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sidecar.cache_admission import SecondRead
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.model import Event, Session, SessionCounters, TokenCalibration, int32
from sidecar.providers.prefix import StablePrefix, item_digest
from sidecar.providers.render import ContextFormat
from sidecar.server import answers, convert

DEFAULT_MAX_BYTES = 16 << 20

# What entries are charged against the bounds: estimates of the memory they
# hold, measured with tracemalloc and RSS, not just their payload. An event's
# wire bytes pin the Event they came from (its text: about as many bytes
# again) and a dict entry; a parsed response takes about three times its wire
# size in upb's arena.
ENTRY_OVERHEAD = 512
RESPONSE_MEMORY = 3


def _blob_charge(blob: bytes) -> int:
    return 2 * len(blob) + ENTRY_OVERHEAD


_EVENTS_TAG = b"\x0a"  # GetContextResponse.events: field 1, length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def framed_event(event: Event) -> bytes:
    """``event`` as one element of ``GetContextResponse.events`` on the wire."""
    message = event_pb2.Event()
    convert.event_out(event, message)
    body = message.SerializeToString()
    return _EVENTS_TAG + _varint(len(body)) + body


class EventBlobs:
    """Framed wire bytes of Event objects, by object identity (see the module docstring).

    Each entry keeps its Event alive, so an identity is never reused while
    its entry stands.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._by_id: dict[int, tuple[Event, bytes]] = {}
        self._digests: dict[int, tuple[Event, bytes]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def framed(self, event: Event) -> bytes:
        known = self._by_id.get(id(event))
        if known is not None and known[0] is event:
            return known[1]
        blob = framed_event(event)
        charge = _blob_charge(blob)
        if charge > self.max_bytes:  # never kept (and a bound of 0 keeps nothing)
            return blob
        if self._bytes + charge > self.max_bytes:
            self.clear()
        self._by_id[id(event)] = (event, blob)
        self._bytes += charge
        return blob

    def digest(self, event: Event) -> bytes:
        """``event``'s digest for a stable prefix (``prefix.item_digest``), kept beside its
        wire bytes: a window read again digests only its new events."""
        known = self._digests.get(id(event))
        if known is not None and known[0] is event:
            return known[1]
        made = item_digest(event)
        if self.max_bytes < ENTRY_OVERHEAD:
            return made
        if self._bytes + ENTRY_OVERHEAD > self.max_bytes:
            self.clear()
        self._digests[id(event)] = (event, made)
        self._bytes += ENTRY_OVERHEAD
        return made

    def clear(self) -> None:
        self._by_id = {}
        self._digests = {}
        self._bytes = 0

    def response(
        self,
        session: Session,
        events: Sequence[Event],
        prefix: StablePrefix,
        limit: int | None = None,
        *,
        keep: bool = True,
    ) -> pb.GetContextResponse:
        """The GetContext answer for ``session`` and its active window ``events``, whose
        stable prefix is ``prefix``; ``keep=False`` keeps none of the events' bytes.

        With ``limit`` (the send limit), building stops once the answer would
        pass it: the answer is then the window without content
        (``content_omitted``), or, once that passes it too, without events
        (``events_omitted``), as ``answers.fit_context`` leaves one; a window
        of 100,000 events is never built whole to be thrown away.
        """
        head = pb.GetContextResponse(
            version=session.version,
            token_count=int32(session.counters.tokens),
            turn_count=session.counters.turns,
            estimated_prompt_tokens=session.calibration.scaled(session.counters.tokens),
            cache_prefix_id=prefix.id,
            stable_prefix_tokens=int32(prefix.tokens),
            stable_prefix_events=prefix.events,
            token_count_estimated=not session.counters.tokens_exact,
            stable_prefix_tokens_estimated=prefix.tokens_estimated,
        )
        framed = self.framed if keep else framed_event
        if limit is None:
            body = b"".join([framed(e) for e in events])
            return pb.GetContextResponse.FromString(head.SerializeToString() + body)
        if not answers.fits_size(answers.least_bytes(events), limit):  # not even their ids
            head.content_omitted = head.events_omitted = True
            return head
        blobs = _within(head, events, framed, limit)
        if blobs is not None:
            return pb.GetContextResponse.FromString(head.SerializeToString() + b"".join(blobs))
        head.content_omitted = True
        blobs = _within(head, events, answers.stripped_frame, limit)
        if blobs is None:
            head.events_omitted = True
            return head
        return pb.GetContextResponse.FromString(head.SerializeToString() + b"".join(blobs))


def _within(
    head: pb.GetContextResponse,
    events: Sequence[Event],
    frame: Callable[[Event], bytes],
    limit: int,
) -> list[bytes] | None:
    """``events`` framed, when they fit in ``limit`` behind ``head``; None as soon as they
    do not."""
    size = head.ByteSize()
    out = []
    for event in events:
        blob = frame(event)
        size += len(blob)
        if not answers.fits_size(size, limit):
            return None
        out.append(blob)
    return out


@dataclass(slots=True)
class _Kept:
    """A response, the state of the session it answers for, and events still to add to it.

    ``response`` may lag behind: ``pending`` holds the framed events this
    replica appended since it was built, and the header fields are those of
    the latest state. The response is brought up to date on the next read, so
    a stream of appends costs no copy of the window per append.
    """

    create_time: datetime
    version: int
    total_events: int  # every stored event's position is at most this
    counters: SessionCounters  # the session's, whose tokens and turns the header shows
    response: pb.GetContextResponse
    pending: list[bytes]
    size: int
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    """The session's: ``estimated_prompt_tokens`` is ``calibration.scaled(tokens)``."""
    window: list[Event] | None = None  # the events of the response, pending ones included
    prefix: StablePrefix | None = None  # its stable prefix, grown by the pending events
    rendered: dict[ContextFormat, tuple[pb.GetContextResponse, int]] = field(default_factory=dict)
    """The answer with ``rendered_json`` set and what it is charged, by format: for this
    very state (none pending)."""

    def built_from(self, session: Session) -> bool:
        """For this very state: the version, and the counters, which exact counts landing
        move without a write (issue 37), so that a landing is seen at once."""
        return (
            self.create_time == session.create_time
            and self.version == session.version
            and self.counters == session.counters
        )

    def current(self) -> pb.GetContextResponse:
        """The response with the pending events added (kept for the next read)."""
        if self.pending:
            extended = pb.GetContextResponse()
            extended.CopyFrom(self.response)
            extended.MergeFromString(b"".join(self.pending))  # appends to the repeated field
            extended.version = self.version
            c = self.counters
            extended.token_count = int32(c.tokens)
            extended.turn_count = c.turns
            extended.estimated_prompt_tokens = self.calibration.scaled(c.tokens)
            extended.token_count_estimated = not c.tokens_exact
            if self.prefix is not None:
                extended.cache_prefix_id = self.prefix.id
                extended.stable_prefix_tokens = int32(self.prefix.tokens)
                extended.stable_prefix_events = self.prefix.events
                extended.stable_prefix_tokens_estimated = self.prefix.tokens_estimated
            self.response, self.pending = extended, []
        return self.response


class ContextResponses:
    """The last GetContext response per stored session id, least recently used out first."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Kept] = OrderedDict()
        self._bytes = 0
        self._admission = SecondRead.for_bytes(max_bytes)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._entries

    def admits(self, session_id: str) -> bool:
        """Whether an answer built for the session now is worth keeping: from its second
        read among the sessions read lately on."""
        return self._admission.admits(session_id)

    def get(self, session_id: str, session: Session) -> pb.GetContextResponse | None:
        """The kept response, if it answers for this very state of the session."""
        kept = self._entries.get(session_id)
        if kept is None:
            return None
        if not kept.built_from(session):
            self.forget(session_id)
            return None
        self._entries.move_to_end(session_id)
        return kept.current()

    def put(
        self,
        session_id: str,
        session: Session,
        response: pb.GetContextResponse,
        window: Sequence[Event] | None = None,
        prefix: StablePrefix | None = None,
    ) -> None:
        """Keep ``response``; never mutate it afterwards (it is handed to every reader).

        ``window``, the events it was built from, is kept with it (they are
        pinned by the event blobs anyway) for a rendering asked later, and
        ``prefix``, its stable prefix, to follow the appends queued onto it
        (without it, an append drops the entry). An entry already kept for
        this very state stays, with its renderings.
        """
        kept = self._entries.get(session_id)
        if kept is not None and not kept.pending and kept.built_from(session):
            return
        self.forget(session_id)
        size = RESPONSE_MEMORY * response.ByteSize() + ENTRY_OVERHEAD
        size += 0 if prefix is None else prefix.charge()
        if self._make_room(size):
            self._entries[session_id] = _Kept(
                session.create_time,
                session.version,
                session.total_events,
                session.counters,
                response,
                [],
                size,
                session.calibration,
                None if window is None else list(window),
                prefix,
            )
            self._bytes += size

    def appended(
        self, session_id: str, session: Session, events: Sequence[Event], blobs: EventBlobs
    ) -> None:
        """Follow an append this replica made that stored events and compacted nothing.

        ``session`` is the header after it, ``events`` the batch as it
        returned them. That append bumped the version by one; so when the
        kept response is of the version just before, nothing else came in
        between, and the window now is the kept one plus the events the
        append stored (those past the old ``total_events``; the others were
        retries, already in the log). They are queued onto it instead of
        dropping it: the agent's next GetContext is a hit. Anything else
        drops it. The caller must not call this for an append that stored
        nothing (its version proves nothing) or compacted.
        """
        kept = self._entries.get(session_id)
        if kept is None:
            return
        stored = [e for e in events if e.position > kept.total_events]
        if (
            not stored
            or kept.prefix is None
            or kept.create_time != session.create_time
            or kept.version + 1 != session.version
            or not self._follows(kept.counters, stored, session.counters)
        ):
            self.forget(session_id)
            return
        new = [blobs.framed(e) for e in stored]
        grown = RESPONSE_MEMORY * sum(map(len, new))  # parsed into the answer on the next read
        self._bytes -= kept.size
        del self._entries[session_id]
        if not self._make_room(kept.size + grown):
            return
        kept.version = session.version
        kept.total_events = session.total_events
        kept.counters = session.counters
        kept.calibration = session.calibration
        kept.pending += new
        if kept.window is not None:
            kept.window += stored
        # A system message, or a result answering a call of the prefix, changes it.
        charge = kept.prefix.charge()
        kept.prefix.grow(stored)
        grown += kept.prefix.charge() - charge
        kept.size -= sum(charge for _, charge in kept.rendered.values())
        kept.rendered = {}  # of the window before the append
        kept.size += grown
        self._entries[session_id] = kept
        self._bytes += kept.size

    @staticmethod
    def _follows(kept: SessionCounters, stored: Sequence[Event], now: SessionCounters) -> bool:
        """Whether ``now`` is ``kept`` with ``stored`` appended: false once exact counts
        landed in between (which bumps no version), so that an answer never shows an event's
        estimate beside a total that has its exact count."""
        for event in stored:
            kept = kept.after_append(event)
        return kept == now

    def window(self, session_id: str) -> list[Event] | None:
        """The events of the kept response, for the state a ``get`` just found current."""
        kept = self._entries.get(session_id)
        return None if kept is None else kept.window

    def rendered(self, session_id: str, fmt: ContextFormat) -> pb.GetContextResponse | None:
        """The kept answer in ``fmt``, for the state a ``get`` just found current."""
        kept = self._entries.get(session_id)
        held = None if kept is None else kept.rendered.get(fmt)
        return None if held is None else held[0]

    def keep_rendered(
        self,
        session_id: str,
        session: Session,
        fmt: ContextFormat,
        answer: pb.GetContextResponse,
        rendering_bytes: int,
    ) -> None:
        """Keep ``answer``, the GetContext answer in ``fmt`` for ``session``, beside the plain one.

        Only while the kept response is of that very state; it goes with it.
        It is charged in full: it shares no memory with the plain answer.
        """
        kept = self._entries.get(session_id)
        if kept is None or kept.pending or not kept.built_from(session) or fmt in kept.rendered:
            return
        plain = kept.size - sum(charge for _, charge in kept.rendered.values())
        grown = plain + RESPONSE_MEMORY * rendering_bytes  # a copy of the plain one, and more
        self._bytes -= kept.size
        del self._entries[session_id]
        if self._make_room(kept.size + grown):
            kept.rendered[fmt] = (answer, grown)
            kept.size += grown
        elif not self._make_room(kept.size):
            return
        self._entries[session_id] = kept
        self._bytes += kept.size

    def _make_room(self, size: int) -> bool:
        """Drop the least recently used until ``size`` more bytes fit; False if they never can."""
        if size > self.max_bytes:
            return False
        while self._entries and self._bytes + size > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size
        return True

    def forget(self, session_id: str) -> None:
        kept = self._entries.pop(session_id, None)
        if kept is not None:
            self._bytes -= kept.size

    def clear(self) -> None:
        self._entries = OrderedDict()
        self._bytes = 0
        self._admission.clear()
