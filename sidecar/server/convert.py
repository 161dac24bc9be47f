"""Conversion between the protobuf messages and the domain model, in both directions.

Events are converted by hand (the hot path); policies go through their
plain-data form so that the one parser in ``sidecar.compaction.policy`` checks
them and names the offending field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from sidecar.compaction.policy import (
    CompactionPolicy,
    check_policy_bytes,
    check_trigger_count,
    policy_from_dict,
)
from sidecar.engine.validation import Limits, check_shape
from sidecar.errors import InvalidArgument, InvalidConfig
from sidecar.gen.compaction.v1 import (
    event_pb2,
    policy_pb2,
    session_pb2,
)
from sidecar.model import (
    Cause,
    CompactionResult,
    Event,
    Part,
    Reasoning,
    Role,
    Session,
    ToolCall,
    ToolResult,
    int32,
    utcnow,
)
from sidecar.providers.profiles import ModelProfile
from sidecar.store.codec import to_micros
from sidecar.store.protocol import CompactionRecord

_ROLE_IN = {
    event_pb2.ROLE_USER: Role.USER,
    event_pb2.ROLE_ASSISTANT: Role.ASSISTANT,
    event_pb2.ROLE_SYSTEM: Role.SYSTEM,
    event_pb2.ROLE_TOOL: Role.TOOL,
}
_ROLE_OUT = {role: value for value, role in _ROLE_IN.items()}


def roles_in(values: Sequence[int], field: str) -> tuple[Role, ...]:
    """Each distinct role of a filter once: a filter repeating one role 300,000 times is
    the filter of that one role, not 300,000 SQL parameters (past SQLite's limit, an
    UNAVAILABLE that clients retry)."""
    distinct = dict.fromkeys(values)  # in C: a million repeats cost milliseconds
    if any(value not in _ROLE_IN for value in distinct):
        for index, value in enumerate(values):  # name the first that is no role
            role_in(value, f"{field}[{index}]")
    return tuple(_ROLE_IN[value] for value in distinct)  # type: ignore[index]


def role_in(value: int, field: str) -> Role:
    role: Role | None = _ROLE_IN.get(value)  # type: ignore[call-overload]
    if role is None:
        raise InvalidArgument(
            field, f"must be ROLE_USER, ROLE_ASSISTANT, ROLE_SYSTEM or ROLE_TOOL, got {value}"
        )
    return role


def role_out(role: Role) -> event_pb2.Role.ValueType:
    return _ROLE_OUT[role]


# The range a Timestamp may hold (google.protobuf.Timestamp's own), which is datetime's.
_MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def time_in(ts: Timestamp, field: str = "time") -> datetime:
    """A client's time; unset means now. Outside years 1-9999: InvalidArgument(field).

    Built from whole seconds and microseconds, never a float sum, so the last
    instant of 9999 does not round over into an impossible year.
    """
    if ts.seconds == 0 and ts.nanos == 0:
        return utcnow()
    if not (_MIN_SECONDS <= ts.seconds <= _MAX_SECONDS and 0 <= ts.nanos < 1_000_000_000):
        raise InvalidArgument(field, "must be a time between years 1 and 9999")
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def time_out(moment: datetime, into: Timestamp) -> None:
    """``moment`` to the microsecond, in whole numbers (a naive one taken as UTC).

    Through a float timestamp, a time far from 1970 lost microseconds (up to
    30 in year 9999) and the last microsecond of 9999 became year 10000.
    """
    seconds, micros = divmod(to_micros(moment), 1_000_000)
    into.seconds = seconds
    into.nanos = micros * 1000


def event_in(msg: event_pb2.Event, field: str) -> Event:
    """A client's event; output-only fields (position, flags, token count) are ignored.

    Once per appended event: a list or map the event leaves empty costs no
    generator and no copy.
    """
    calls, results, parts, thoughts = msg.tool_calls, msg.tool_results, msg.parts, msg.reasoning
    return Event(
        id=msg.id,
        role=role_in(msg.role, f"{field}.role"),
        text=msg.text,
        tool_calls=(
            tuple([ToolCall(c.id, c.name, c.arguments_json or "{}", c.signature) for c in calls])
            if calls
            else ()
        ),
        tool_results=(
            tuple([ToolResult(r.call_id, r.name, r.content, r.is_error) for r in results])
            if results
            else ()
        ),
        parts=tuple([Part(p.mime_type, p.data, p.uri) for p in parts]) if parts else (),
        author=msg.author,
        branch=msg.branch,
        metadata=dict(msg.metadata) if msg.metadata else {},
        create_time=time_in(msg.create_time, f"{field}.create_time"),
        reasoning=(
            tuple([Reasoning(r.text, r.signature, r.redacted, r.id) for r in thoughts])
            if thoughts
            else ()
        ),
    )


def events_in(
    msgs: Sequence[event_pb2.Event], limits: Limits, field: str = "events"
) -> list[Event]:
    """A client's events, their counts checked first (``check_shape``).

    Building the model costs microseconds per tool call, part and metadata
    entry, so a request of a million is refused from its counts, not built.
    """
    check_shape(msgs, limits, field)
    return [event_in(m, f"{field}[{i}]") for i, m in enumerate(msgs)]


def event_out(event: Event, into: event_pb2.Event) -> None:
    into.id = event.id
    into.position = event.position
    into.role = _ROLE_OUT[event.role]
    if event.text:
        into.text = event.text
    for block in event.reasoning:
        into.reasoning.add(
            text=block.text, signature=block.signature, redacted=block.redacted, id=block.id
        )
    for call in event.tool_calls:
        into.tool_calls.add(
            id=call.id, name=call.name, arguments_json=call.arguments_json, signature=call.signature
        )
    for result in event.tool_results:
        into.tool_results.add(
            call_id=result.call_id,
            name=result.name,
            content=result.content,
            is_error=result.is_error,
        )
    for part in event.parts:
        into.parts.add(mime_type=part.mime_type, data=part.data, uri=part.uri)
    if event.author:
        into.author = event.author
    if event.branch:
        into.branch = event.branch
    if event.metadata:
        into.metadata.update(event.metadata)
    time_out(event.create_time, into.create_time)
    into.synthetic = event.synthetic
    into.archived = event.archived
    into.token_count = int32(event.token_count)
    into.cleared = event.cleared
    if event.token_bounds is not None:
        into.token_count_estimated = True


def events_out(events: Iterable[Event], into: Any) -> None:
    """Append ``events`` to a repeated Event field."""
    for event in events:
        event_out(event, into.add())


def _triggers_in(trigger: Any) -> Any:
    """The proto's ``any_of: {triggers: [...]}`` as the policy document's ``any_of: [...]``."""
    if not isinstance(trigger, dict):
        return trigger
    return {
        key: [_triggers_in(t) for t in value.get("triggers", [])]
        if key in ("any_of", "all_of") and isinstance(value, dict)
        else value
        for key, value in trigger.items()
    }


def _triggers_out(trigger: Any) -> Any:
    """The policy document's ``any_of: [...]`` as the proto's ``any_of: {triggers: [...]}``."""
    if not isinstance(trigger, dict):
        return trigger
    return {
        key: {"triggers": [_triggers_out(t) for t in value]}
        if key in ("any_of", "all_of") and isinstance(value, list)
        else value
        for key, value in trigger.items()
    }


def _strategy_message(strategy: dict[str, Any]) -> dict[str, Any]:
    """A strategy document in the proto's JSON shape: ``BOUNDARY_`` enum names.

    A pipeline has no boundary of its own; each of its steps has one.
    """
    strategy = dict(strategy)
    if "pipeline" in strategy:
        steps = strategy["pipeline"].get("steps", [])
        strategy["pipeline"] = {"steps": [_strategy_message(step) for step in steps]}
        return strategy
    strategy["boundary"] = f"BOUNDARY_{strategy.get('boundary', 'TURN')}"
    return strategy


def _policy_message(data: dict[str, Any], into: policy_pb2.CompactionPolicy) -> None:
    """Fill ``into`` from a policy document (``CompactionPolicy.to_dict``'s shape)."""
    data = dict(data)
    data["strategy"] = _strategy_message(data["strategy"])
    if "trigger" in data:
        data["trigger"] = _triggers_out(data["trigger"])
    json_format.ParseDict(data, into)


def _nested_in_message(
    trigger: policy_pb2.Trigger,
) -> tuple[str, Sequence[policy_pb2.Trigger]] | None:
    kind = trigger.WhichOneof("kind")
    if kind == "any_of":
        return kind, trigger.any_of.triggers
    if kind == "all_of":
        return kind, trigger.all_of.triggers
    return None


def policy_in(
    msg: policy_pb2.CompactionPolicy, field: str = "policy", *, bounded: bool = True
) -> CompactionPolicy:
    """A policy message, checked; errors name the field under ``field``.

    Its trigger count and size are checked on the message itself: converting
    it to plain data costs microseconds per trigger, seconds for a million.
    (The message's size is close to its stored document's, which
    ``policy_from_dict`` then bounds exactly.) A client reading a policy the
    server stored passes ``bounded=False``: it was accepted when written.
    """
    try:
        if bounded:
            if msg.HasField("trigger"):
                check_trigger_count(msg.trigger, _nested_in_message)
            check_policy_bytes(msg.ByteSize())
        data = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        if "trigger" in data:
            data["trigger"] = _triggers_in(data["trigger"])
        return policy_from_dict(data, bounded=bounded)
    except InvalidConfig as exc:
        path = exc.field.removeprefix("policy").lstrip(".")
        raise InvalidConfig(f"{field}.{path}" if path else field, exc.description) from None


def policy_out(policy: CompactionPolicy, into: policy_pb2.CompactionPolicy) -> None:
    _policy_message(policy.to_dict(), into)


def policy_json_out(policy_json: str | None, into: policy_pb2.CompactionPolicy) -> None:
    if policy_json:
        _policy_message(json.loads(policy_json), into)


def session_out(
    session: Session, into: session_pb2.Session, profile: ModelProfile | None = None
) -> None:
    """``session`` into ``into``; ``profile`` is its model's (None: no model)."""
    into.session_id = session.session_id
    into.version = session.version
    policy_json_out(session.policy_json, into.policy)
    into.labels.update(session.labels)
    time_out(session.create_time, into.create_time)
    time_out(session.update_time, into.update_time)
    counters = session.counters
    into.active_event_count = counters.active_events
    into.turn_count = counters.turns
    into.active_tokens = int32(counters.tokens)
    into.active_tokens_estimated = not counters.tokens_exact
    into.total_event_count = session.total_events
    into.last_compaction_id = session.last_compaction_id
    into.model = session.model
    if profile is not None:
        into.model_profile.model = profile.model
        into.model_profile.provider = profile.provider
        into.model_profile.input_window_tokens = profile.input_window_tokens
        into.model_profile.max_output_tokens = profile.max_output_tokens
    into.calibration.factor = session.calibration.factor
    into.calibration.samples = session.calibration.samples
    into.auto_compaction_paused = session.auto_compaction_paused


def result_out(result: CompactionResult, into: session_pb2.CompactionResult) -> None:
    into.compacted = result.compacted
    if result.skipped_reason is not None:
        into.skipped_reason = str(result.skipped_reason)
    events_out(result.active_events, into.active_events)
    events_out(result.archived_events, into.archived_events)
    into.archived_event_count = result.archived_event_count
    into.tokens_estimated_saved = int32(result.tokens_estimated_saved)
    into.version = result.version
    into.compaction_id = result.compaction_id
    into.strategy = result.strategy
    into.error = result.error
    into.cleared_event_ids.extend(result.cleared_ids)
    into.restored_event_ids.extend(result.restored_ids)
    into.archived_events_omitted = result.archived_events_omitted
    into.active_events_omitted = result.active_events_omitted
    into.cleared_event_ids_omitted = result.cleared_ids_omitted
    into.restored_event_ids_omitted = result.restored_ids_omitted
    into.identifiers_dropped = result.identifiers_dropped
    into.dropped_identifiers.extend(result.dropped_identifiers)


_CAUSE_OUT = {
    Cause.UNKNOWN: session_pb2.COMPACTION_CAUSE_UNSPECIFIED,
    Cause.TRIGGER: session_pb2.COMPACTION_CAUSE_TRIGGER,
    Cause.FORCE: session_pb2.COMPACTION_CAUSE_FORCE,
    Cause.BACKGROUND: session_pb2.COMPACTION_CAUSE_BACKGROUND,
    Cause.RESTORE: session_pb2.COMPACTION_CAUSE_RESTORE,
}


def record_out(record: CompactionRecord, into: session_pb2.Compaction) -> None:
    """One entry of the compaction history."""
    into.compaction_id = record.compaction_id
    time_out(record.create_time, into.create_time)
    into.strategy = record.strategy
    into.cause = _CAUSE_OUT[record.cause]
    into.archived_event_ids.extend(record.archived_ids)
    into.cleared_event_ids.extend(record.cleared_ids)
    into.inserted_event_ids.extend(record.inserted_ids)
    into.tokens_saved = int32(record.tokens_saved)
    into.summary_input_tokens = record.summary_input_tokens
    into.summary_output_tokens = record.summary_output_tokens
    into.summarizer_latency_ms = record.summarizer_latency_ms
    into.version_before = record.version_before
    into.version_after = record.version_after
    into.restored_by = record.restored_by
    into.restores = record.restores
    into.identifiers_dropped = record.identifiers_dropped
    into.dropped_identifiers.extend(record.dropped_identifiers)
