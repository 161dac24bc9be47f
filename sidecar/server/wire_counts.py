"""A large request's fields counted on the wire, before protobuf parses it.

protobuf's parser holds the GIL, and so the event loop, for as long as it
parses, and what it costs is the number of fields, not the bytes: 16 MiB of
empty events (eight million of them) took 4-5 s to parse, during which the
server answered no one (a health check waited as long). The counts
``validation.check_shape`` checks come after the parse, too late to spare it.

So a request larger than ``SCAN_ABOVE`` is walked on the wire first: each
field's tag is read and its value skipped (a string or bytes value in one
step, however long), message fields are walked into, and the walk stops at
the first count past its bound: a repeated field past the limit that bounds
it (``max_events_per_append`` for ``events``, ``max_metadata_entries`` for an
event's ``metadata``, ...), or the request's fields in all past what the
limits allow one request to carry (``fields_budget``). Such a request is
refused before it is parsed, so what one request can make the loop wait is
bounded by what the largest request the limits admit costs (some tens of
milliseconds), whatever its size. A request at or below ``SCAN_ABOVE`` holds
at most ``SCAN_ABOVE / 2`` fields and is parsed at once (some 20 ms at worst,
32,768 empty events), so the common small appends pay nothing.

A message with no message fields of its own (a map entry, a timestamp, a
tool call) is counted as one field and not walked into: the walk costs more
there than the parse, which is bounded by its bytes (16 MiB of one string
field sent again and again parses in about 0.3 s). The walk judges counts
only: bytes that do not decode are left to the parser, which refuses them as
it always has (``decoding``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from sidecar.compaction.policy import MAX_TRIGGERS, too_many_triggers
from sidecar.engine.validation import MAX_LABEL_UPDATES, Limits
from sidecar.errors import LimitExceeded, SidecarError

SCAN_ABOVE = 64 << 10
"""Requests up to this many bytes are parsed without a walk: at two bytes a field, the
most they hold (32,768 fields) parses in some 20 ms."""

_FIELDS_PER_EVENT = 24
"""An event's own fields with room to spare (17 in ``Event``, a timestamp's two)."""


def fields_budget(limits: Limits) -> int:
    """The most fields a request may hold, counted as the walk counts them (a message that
    is not walked into is one): what the largest append the limits admit holds (every
    event at its metadata limit, every item the append may carry), its label updates at
    theirs, and some room for the request's own fields."""
    per_event = _FIELDS_PER_EVENT + limits.max_metadata_entries
    labels = MAX_LABEL_UPDATES * (8 + 2 * limits.max_labels)  # set entries, remove ids
    return 1024 + limits.max_events_per_append * per_event + limits.max_items_per_append + labels


@dataclass(frozen=True, slots=True)
class _Bound:
    """A repeated field's bound: the most entries one message may carry, and the limit's
    name for the error."""

    most: int
    limit: str
    item: bool = False
    """An item of the append: counted against ``max_items_per_append`` too, request-wide."""
    refusal: Callable[[str], SidecarError] | None = None
    """The error, given the path of the message holding the field, when it is not a
    limit's (a policy's trigger list is refused as the policy's own check does)."""


@dataclass(slots=True)
class _Field:
    name: str
    walk_into: _Plan | None  # a message field's plan; None: skipped
    bound: _Bound | None


_Plan = dict[int, _Field]


class _Over(Exception):
    """A count past its bound: the error to answer with."""

    def __init__(self, error: SidecarError) -> None:
        super().__init__(str(error))
        self.error = error


class _Malformed(Exception):
    """Bytes that do not decode: left to the parser to refuse."""


def _bounds(limits: Limits) -> dict[str, _Bound]:
    """The repeated fields the limits bound, by full name."""
    events = _Bound(limits.max_events_per_append, "max_events_per_append")
    parts = _Bound(limits.max_parts_per_event, "max_parts_per_event", item=True)
    labels = _Bound(limits.max_labels, "max_labels")
    return {
        "compaction.v1.AppendEventsRequest.events": events,
        "compaction.v1.StreamEventsRequest.events": events,
        "compaction.v1.AppendEventsRequest.label_updates": _Bound(
            MAX_LABEL_UPDATES, "max_label_updates"
        ),
        "compaction.v1.LabelUpdate.set": labels,
        "compaction.v1.LabelUpdate.remove": labels,
        "compaction.v1.CreateSessionRequest.labels": labels,
        "compaction.v1.Session.labels": labels,
        "compaction.v1.Event.tool_calls": _Bound(
            limits.max_tool_calls_per_event, "max_tool_calls_per_event", item=True
        ),
        "compaction.v1.Event.tool_results": _Bound(
            limits.max_tool_results_per_event, "max_tool_results_per_event", item=True
        ),
        "compaction.v1.Event.parts": parts,
        "compaction.v1.Event.reasoning": parts,
        "compaction.v1.Event.metadata": _Bound(limits.max_metadata_entries, "max_metadata_entries"),
        # A list of more than this takes the policy past MAX_TRIGGERS with its parent.
        "compaction.v1.TriggerList.triggers": _Bound(
            MAX_TRIGGERS - 1, "", refusal=lambda path: too_many_triggers(path.rstrip("."))
        ),
    }


class WireCounts:
    """Counts a request's fields on the wire against the limits (see the module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.budget = fields_budget(limits)
        self.max_items = limits.max_items_per_append
        self._bounds = _bounds(limits)
        self._plans: dict[str, _Plan] = {}

    def problem(self, raw: bytes, descriptor: Descriptor) -> SidecarError | None:
        """The count ``raw``, a ``descriptor`` message, is past, or None (parse it)."""
        if len(raw) <= SCAN_ABOVE:
            return None
        try:
            _walk(raw, 0, len(raw), self._plan(descriptor), [], self.budget, [self.max_items])
        except _Over as over:
            return over.error
        except _Malformed:
            return None
        return None

    def _plan(self, descriptor: Descriptor) -> _Plan:
        """Each field of ``descriptor`` by number: its name, its message's plan, its bound."""
        plan = self._plans.get(descriptor.full_name)
        if plan is not None:
            return plan
        plan = self._plans[descriptor.full_name] = {}  # before the fields: types may recurse
        for field in descriptor.fields:
            inner = field.message_type if field.type == FieldDescriptor.TYPE_MESSAGE else None
            plan[field.number] = _Field(
                field.name,
                self._plan(inner) if inner is not None and _has_messages(inner) else None,
                self._bounds.get(field.full_name),
            )
        return plan


def _has_messages(descriptor: Descriptor) -> bool:
    """Whether a ``descriptor`` message has message fields: one that has none (a map
    entry, a timestamp, a tool call) is not walked into. Parsing it costs what its
    scalars and strings do, bounded by its bytes (see the module docstring)."""
    return any(field.type == FieldDescriptor.TYPE_MESSAGE for field in descriptor.fields)


_ECHOED = ("request_id", "session_id")


def echoed_ids(raw: bytes, descriptor: Descriptor) -> dict[str, str]:
    """A refused request's ``request_id`` and ``session_id``, read off the wire, for its
    answer to echo (a stream's client matches answers by them): among its first fields,
    where every encoder puts them; those not found, or not UTF-8, are left out."""
    wanted = {
        field.number: field.name
        for field in descriptor.fields
        if field.name in _ECHOED and field.type == FieldDescriptor.TYPE_STRING
    }
    found: dict[str, str] = {}
    pos, end = 0, len(raw)
    try:
        for _ in range(16):
            if pos >= end or len(found) == len(wanted):
                break
            key, pos = _varint(raw, pos, end)
            if key & 7 != 2:  # not length-delimited: the ids come before any such field
                break
            length, pos = _varint(raw, pos, end)
            name = wanted.get(key >> 3)
            if name is not None:
                found[name] = raw[pos : pos + length].decode()
            pos += length
    except (_Malformed, UnicodeDecodeError):
        pass
    return found


def _varint(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos``, and the position after it."""
    value = shift = 0
    while pos < end:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise _Malformed


def _walk(
    raw: bytes,
    pos: int,
    end: int,
    plan: _Plan,
    trail: list[str],
    budget: int,
    items: list[int],
) -> int:
    """Count the fields of the message in ``raw[pos:end]`` and those of its messages
    against ``budget``, the fields the request may still hold; what is left of it.
    ``trail``: the fields walked into to reach this message, for an error's field path;
    ``items``: the items the request may still carry (one number, shared by the walk)."""
    counts: dict[int, int] = {}
    while pos < end:
        budget -= 1
        if budget < 0:
            raise _Over(_TOO_MANY_FIELDS)
        key = raw[pos]
        pos += 1
        if key >= 0x80:
            key, pos = _varint(raw, pos - 1, end)
        wire_type = key & 7
        if wire_type == 2:
            length = raw[pos] if pos < end else 0x80
            pos += 1
            if length >= 0x80:
                length, pos = _varint(raw, pos - 1, end)
            start, pos = pos, pos + length
            field = plan.get(key >> 3)
            if field is None:
                continue
            index = -1
            bound = field.bound
            if bound is not None:
                index = counts.get(key, 0)
                counts[key] = index + 1
                if index >= bound.most:
                    if bound.refusal is not None:
                        raise _Over(bound.refusal("".join(trail)))
                    raise _Over(
                        LimitExceeded(
                            bound.limit,
                            f"{''.join(trail)}{field.name} has more than {bound.most} entries,"
                            f" the limit is {bound.most}",
                        )
                    )
                if bound.item:
                    items[0] -= 1
                    if items[0] < 0:
                        raise _Over(
                            LimitExceeded(
                                "max_items_per_append",
                                f"{''.join(trail)}{field.name}: the request holds more tool"
                                " calls, tool results, parts and reasoning blocks in all than"
                                " the limit allows",
                            )
                        )
            if field.walk_into is not None and pos <= end:
                trail.append(f"{field.name}[{index}]." if index >= 0 else f"{field.name}.")
                budget = _walk(raw, start, pos, field.walk_into, trail, budget, items)
                trail.pop()
        elif wire_type == 0:
            while pos < end and raw[pos] >= 0x80:
                pos += 1
            pos += 1
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type not in (3, 4):  # groups: their fields are counted as they come
            raise _Malformed
    if pos > end:
        raise _Malformed
    return budget


_TOO_MANY_FIELDS = LimitExceeded(
    "request_fields",
    "the request holds more protobuf fields than the limits let one request carry"
    " (max_events_per_append, max_items_per_append, max_metadata_entries, max_labels)",
)
