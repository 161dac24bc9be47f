"""Answers that always fit: an answer is never refused for its size after its change landed.

An append's acknowledgement echoes the stored events, and an inline
compaction adds the new active window and what it archived; a forced
Compact and the results sent to watchers carry the same lists. Together they
can pass the message size limit although every request was within it, and
grpc would then fail the call (a stream would die) after the write was
committed. So an answer over the limit lists its events without their
content — ids, positions, roles and flags kept, ``content_omitted`` set —
archived events first, then the active window, then the echoed events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from google.protobuf.message import Message

from sidecar.engine.results import AppendResult
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, session_pb2
from sidecar.model import CompactionResult, Event
from sidecar.server import convert

# Room for what wraps an answer on a stream (request and session ids, the frame).
_MARGIN = 4096


def _strip(events: Iterable[event_pb2.Event]) -> None:
    """Drop each event's content, keeping what identifies it and its place."""
    for event in events:
        event.text = ""
        event.metadata.clear()
        for call in event.tool_calls:
            call.arguments_json = ""
            call.signature = b""
        for block in event.reasoning:
            block.text = ""
            block.signature = b""
        for result in event.tool_results:
            result.content = ""
        for part in event.parts:
            part.ClearField("data")
            part.uri = ""


def result_out(result: CompactionResult, into: session_pb2.CompactionResult, limit: int) -> None:
    """``result`` into ``into``, its event lists whose ids alone pass ``limit`` left out
    before they are converted (``fit_result`` then bounds the rest): a pass over a window of
    100,000 events never builds 100,000 messages to throw them away."""
    if not fits_size(least_bytes(result.archived_events), limit):
        result = replace(
            result,
            archived_events=(),
            archived_count=result.archived_event_count,
            archived_events_omitted=True,
        )
    if not fits_size(least_bytes(result.active_events), limit):
        result = replace(result, active_events=(), active_events_omitted=True)
    convert.result_out(result, into)


def result_in(
    result: CompactionResult, into: session_pb2.CompactionResult, outer: Message, limit: int
) -> None:
    """``result`` into ``into`` (``result_out``), then bounded while ``outer``, the message it
    travels in, passes ``limit`` (``fit_result``): a compaction's result as every answer
    carries it."""
    result_out(result, into, limit)
    fit_result(into, outer, limit)


def least_bytes(events: Sequence[Event]) -> int:
    """Fewer bytes than ``events`` take on the wire even without content: each one's id, its
    tag and length, and a role."""
    return sum([len(e.id) for e in events]) + 4 * len(events)


def fit_result(result: session_pb2.CompactionResult, outer: Message, limit: int) -> None:
    """``result`` within ``limit`` bytes while ``outer`` (the message it travels in) is not.

    First its events lose their content, archived first; then, when their
    ids alone are too many (a pass over a window of 100,000 events), its
    lists are left out whole, each with its ``*_omitted`` flag: archived
    events, cleared ids, restored ids, the active window. The counts stay.
    """
    for events in (result.archived_events, result.active_events):
        if fits(outer, limit):
            return
        _strip(events)
        result.content_omitted = True
    for name, flag in _RESULT_LISTS:
        if fits(outer, limit):
            return
        if len(getattr(result, name)):
            result.ClearField(name)  # type: ignore[arg-type]
            setattr(result, flag, True)


# A result's lists, in the order they are left out when even their ids do not fit.
_RESULT_LISTS = (
    ("archived_events", "archived_events_omitted"),
    ("cleared_event_ids", "cleared_event_ids_omitted"),
    ("restored_event_ids", "restored_event_ids_omitted"),
    ("active_events", "active_events_omitted"),
)

# A history record's lists, in the order they are left out (``fit_record``).
_RECORD_LISTS = (
    ("archived_event_ids", "archived_event_ids_omitted"),
    ("cleared_event_ids", "cleared_event_ids_omitted"),
    ("inserted_event_ids", "inserted_event_ids_omitted"),
)


def fit_record(record: session_pb2.Compaction, budget: int) -> None:
    """``record`` within ``budget`` bytes: its id lists left out whole, largest share first,
    each with its ``*_omitted`` flag (ListCompactions ``ids_of`` pages through them)."""
    for name, flag in _RECORD_LISTS:
        if record.ByteSize() <= budget:
            return
        if len(getattr(record, name)):
            record.ClearField(name)  # type: ignore[arg-type]
            setattr(record, flag, True)


def fit_ack(ack: pb.AppendEventsResponse, outer: Message, limit: int) -> None:
    """An append's acknowledgement within ``limit``: the compaction's events, then its own."""
    if ack.HasField("compaction"):
        fit_result(ack.compaction, outer, limit)
    if outer.ByteSize() + _MARGIN > limit:
        _strip(ack.events)
        ack.content_omitted = True


def fits(answer: Message, limit: int) -> bool:
    """True when ``answer`` goes out whole under the send limit ``limit``."""
    return fits_size(answer.ByteSize(), limit)


def fits_size(size: int, limit: int) -> bool:
    """True when an answer of ``size`` bytes goes out whole under the send limit ``limit``."""
    return size + _MARGIN <= limit


def fit_context(answer: pb.GetContextResponse, limit: int) -> pb.GetContextResponse:
    """``answer`` itself when it fits in ``limit`` bytes, else a copy without content.

    A window of twenty 0.9 MB images counts few tokens, so no token trigger
    fires and a forced compaction may not shrink it; such a session must still
    be readable. Its content is then read in parts with ListEvents, whose
    pages are bounded in bytes. A rendering (``rendered_json``) goes with the
    content: the client renders the events it reads in parts. When even the
    events without content pass the limit (very many of them), they are left
    out too (``events_omitted``) and the whole window is read in parts.
    """
    if fits(answer, limit):
        return answer
    stripped = pb.GetContextResponse()
    stripped.CopyFrom(answer)
    _strip(stripped.events)
    stripped.rendered_json = ""
    stripped.content_omitted = True
    if not fits(stripped, limit):
        del stripped.events[:]
        stripped.events_omitted = True
    return stripped


def stripped_frame(event: Event) -> bytes:
    """``event`` as one element of ``GetContextResponse.events`` on the wire, without its
    content (as ``fit_context`` leaves it)."""
    message = event_pb2.Event()
    convert.event_out(event, message)
    _strip((message,))
    body = message.SerializeToString()
    return _EVENTS_TAG + _varint(len(body)) + body


_EVENTS_TAG = b"\x0a"  # GetContextResponse.events: field 1, length-delimited


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def ack_out(
    result: AppendResult, out: pb.AppendEventsResponse, limit: int, outer: Message | None = None
) -> pb.AppendEventsResponse:
    """``out`` filled as the answer of the append that gave ``result``, within ``limit``
    bytes (``outer``: the message ``out`` travels in, when it is part of one)."""
    out.version = result.session.version
    out.compaction_scheduled = result.compaction_scheduled
    out.usage_ignored_reason = result.usage_ignored_reason
    convert.events_out(result.events, out.events)
    if result.compaction is not None:
        result_out(result.compaction, out.compaction, limit)
    fit_ack(out, outer if outer is not None else out, limit)
    return out


def split_ack(
    group: list[pb.StreamEventsRequest], combined: AppendResult, limit: int
) -> list[pb.StreamEventsResponse]:
    """Per-request acks for a folded append: each its own events; the compaction on the last."""
    acks = []
    start = 0
    for index, request in enumerate(group):
        out = pb.StreamEventsResponse(request_id=request.request_id, session_id=request.session_id)
        ack = out.append
        ack.version = combined.session.version
        convert.events_out(combined.events[start : start + len(request.events)], ack.events)
        start += len(request.events)
        if index == len(group) - 1:
            if combined.compaction is not None:
                result_out(combined.compaction, ack.compaction, limit)
            ack.compaction_scheduled = combined.compaction_scheduled
        fit_ack(ack, out, limit)
        acks.append(out)
    return acks
