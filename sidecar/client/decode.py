"""Protobuf responses to the domain model: the client's half of ``sidecar.server.convert``.

``convert`` reads events as a client sends them and so drops the output-only
fields (position, synthetic, archived, cleared, token count); read back from the
server, those fields are the point, so they are restored here. Everything
else is delegated to ``convert``, so that both ends agree on one mapping.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace

from sidecar.client.errors import error_from_status
from sidecar.client.results import (
    Ack,
    AppendResult,
    BackgroundCompaction,
    Missed,
    RequestFailed,
    SearchHit,
    SessionContext,
    SessionInfo,
    StreamMessage,
)
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from sidecar.model import (
    Cause,
    CompactionResult,
    Event,
    Session,
    SessionCounters,
    SkipReason,
    TokenCalibration,
)
from sidecar.providers.profiles import ModelProfile
from sidecar.providers.render import ContextFormat, render_json
from sidecar.server import convert
from sidecar.store.protocol import CompactionRecord

UNKNOWN_BOUNDS = (0, (1 << 31) - 1)
"""The bounds of an estimated count as the client knows them: none but what an int32 holds.

The server sends whether a count is an estimate, not its bounds, and may
send an event without its content (a window too big for one answer), so
the client does not make bounds up; it keeps ``token_count_estimated``."""


def event(msg: event_pb2.Event) -> Event:
    """An event as stored, output-only fields included; an estimated count is flagged
    (``token_count_estimated``), with ``UNKNOWN_BOUNDS``."""
    return replace(
        convert.event_in(msg, "event"),
        position=msg.position,
        synthetic=msg.synthetic,
        archived=msg.archived,
        token_count=msg.token_count,
        cleared=msg.cleared,
        token_bounds=UNKNOWN_BOUNDS if msg.token_count_estimated else None,
    )


def events(msgs: Iterable[event_pb2.Event]) -> tuple[Event, ...]:
    """A repeated Event field, in order."""
    return tuple(event(m) for m in msgs)


def policy(msg: policy_pb2.CompactionPolicy) -> CompactionPolicy:
    return convert.policy_in(msg, bounded=False)  # the server's, stored: read it as it is


def session(msg: session_pb2.Session) -> SessionInfo:
    """A session header, with its model, its model's profile and its token calibration.

    Only the counters the API exposes are filled (active events, turns,
    tokens); the engine's private ones are left at zero.
    """
    policy_json = None
    if msg.HasField("policy"):
        # The same compact form the engine stores.
        policy_json = json.dumps(policy(msg.policy).to_dict(), separators=(",", ":"))
    return SessionInfo(
        session_id=msg.session_id,
        version=msg.version,
        policy_json=policy_json,
        labels=dict(msg.labels),
        create_time=convert.time_in(msg.create_time),
        update_time=convert.time_in(msg.update_time),
        counters=SessionCounters(
            active_events=msg.active_event_count,
            turns=msg.turn_count,
            tokens=msg.active_tokens,
        ),
        total_events=msg.total_event_count,
        last_compaction_id=msg.last_compaction_id,
        model=msg.model,
        calibration=calibration(msg),
        auto_compaction_paused=msg.auto_compaction_paused,
        model_profile=model_profile(msg),
        active_tokens_estimated=msg.active_tokens_estimated,
    )


def model_profile(msg: session_pb2.Session) -> ModelProfile | None:
    if not msg.HasField("model_profile"):
        return None
    profile = msg.model_profile
    return ModelProfile(
        model=profile.model,
        provider=profile.provider,
        input_window_tokens=profile.input_window_tokens,
        max_output_tokens=profile.max_output_tokens,
    )


def calibration(msg: session_pb2.Session) -> TokenCalibration:
    """The session's calibration; none sent (an older server) is the uncalibrated one."""
    if not msg.HasField("calibration"):
        return TokenCalibration()
    return TokenCalibration(factor=msg.calibration.factor, samples=msg.calibration.samples)


def session_policy(header: Session) -> CompactionPolicy | None:
    """A session's policy, parsed; None when the session has none."""
    if not header.policy_json:
        return None
    return policy_from_dict(json.loads(header.policy_json), bounded=False)  # the server took it


def _skip_reason(value: str) -> SkipReason | None:
    try:
        return SkipReason(value) if value else None
    except ValueError:  # a reason added by a newer server
        return None


def compaction(msg: session_pb2.CompactionResult) -> CompactionResult:
    return CompactionResult(
        compacted=msg.compacted,
        strategy=msg.strategy,
        active_events=events(msg.active_events),
        archived_events=events(msg.archived_events),
        tokens_estimated_saved=msg.tokens_estimated_saved,
        skipped_reason=_skip_reason(msg.skipped_reason),
        version=msg.version,
        compaction_id=msg.compaction_id,
        error=msg.error,
        content_omitted=msg.content_omitted,
        cleared_ids=tuple(msg.cleared_event_ids),
        restored_ids=tuple(msg.restored_event_ids),
        archived_events_omitted=msg.archived_events_omitted,
        active_events_omitted=msg.active_events_omitted,
        cleared_ids_omitted=msg.cleared_event_ids_omitted,
        restored_ids_omitted=msg.restored_event_ids_omitted,
        archived_count=msg.archived_event_count if msg.archived_events_omitted else None,
        identifiers_dropped=msg.identifiers_dropped,
        dropped_identifiers=tuple(msg.dropped_identifiers),
    )


def append_result(msg: pb.AppendEventsResponse) -> AppendResult:
    return AppendResult(
        events=events(msg.events),
        version=msg.version,
        compaction=compaction(msg.compaction) if msg.HasField("compaction") else None,
        compaction_scheduled=msg.compaction_scheduled,
        content_omitted=msg.content_omitted,
        usage_ignored_reason=msg.usage_ignored_reason,
    )


def context(msg: pb.GetContextResponse) -> SessionContext:
    return SessionContext(
        events=events(msg.events),
        version=msg.version,
        token_count=msg.token_count,
        turn_count=msg.turn_count,
        rendered_json=msg.rendered_json,
        estimated_prompt_tokens=msg.estimated_prompt_tokens,
        cache_prefix_id=msg.cache_prefix_id,
        stable_prefix_tokens=msg.stable_prefix_tokens,
        stable_prefix_events=msg.stable_prefix_events,
        token_count_estimated=msg.token_count_estimated,
        stable_prefix_tokens_estimated=msg.stable_prefix_tokens_estimated,
    )


def read_in_parts(
    window: SessionContext, listed: tuple[Event, ...], format: ContextFormat | None
) -> SessionContext:
    """``window`` (answered without content) with the events read in pages, rendered here.

    The server renders only what it sends in one answer; the client renders
    the listed window with the server's own renderer (``sidecar.providers``),
    so ``rendered_json`` is the same either way.
    """
    rendered = render_json(listed, format) if format is not None else ""
    return replace(window, events=listed, rendered_json=rendered)


def hit(msg: pb.SearchHit) -> SearchHit:
    return SearchHit(
        session_id=msg.session_id,
        event=event(msg.event),
        rank=msg.rank,
        snippet=msg.snippet,
        archived_by=msg.archived_by,
    )


_CAUSES = {
    session_pb2.COMPACTION_CAUSE_TRIGGER: Cause.TRIGGER,
    session_pb2.COMPACTION_CAUSE_FORCE: Cause.FORCE,
    session_pb2.COMPACTION_CAUSE_BACKGROUND: Cause.BACKGROUND,
    session_pb2.COMPACTION_CAUSE_RESTORE: Cause.RESTORE,
}


def record(session_id: str, msg: session_pb2.Compaction) -> CompactionRecord:
    """One entry of a session's compaction history."""
    return CompactionRecord(
        compaction_id=msg.compaction_id,
        session_id=session_id,
        version_before=msg.version_before,
        version_after=msg.version_after,
        strategy=msg.strategy,
        archived_ids=tuple(msg.archived_event_ids),
        inserted_ids=tuple(msg.inserted_event_ids),
        tokens_saved=msg.tokens_saved,
        summarizer_latency_ms=msg.summarizer_latency_ms,
        summary_input_tokens=msg.summary_input_tokens,
        summary_output_tokens=msg.summary_output_tokens,
        create_time=convert.time_in(msg.create_time),
        cleared_ids=tuple(msg.cleared_event_ids),
        cause=_CAUSES.get(msg.cause, Cause.UNKNOWN),
        restored_by=msg.restored_by,
        restores=msg.restores,
        identifiers_dropped=msg.identifiers_dropped,
        dropped_identifiers=tuple(msg.dropped_identifiers),
    )


def ids_omitted(msg: session_pb2.Compaction) -> bool:
    """Whether a history record came with any of its id lists left out (too many ids)."""
    return (
        msg.archived_event_ids_omitted
        or msg.cleared_event_ids_omitted
        or msg.inserted_event_ids_omitted
    )


def with_ids(msg: session_pb2.Compaction, pages: Iterable[session_pb2.Compaction]) -> None:
    """``msg`` with its id lists whole again, from the pages of ListCompactions ``ids_of``."""
    for name in ("archived_event_ids", "cleared_event_ids", "inserted_event_ids"):
        msg.ClearField(name)
    for page in pages:
        msg.archived_event_ids.extend(page.archived_event_ids)
        msg.cleared_event_ids.extend(page.cleared_event_ids)
        msg.inserted_event_ids.extend(page.inserted_event_ids)
    msg.archived_event_ids_omitted = False
    msg.cleared_event_ids_omitted = False
    msg.inserted_event_ids_omitted = False


def watch_update(msg: pb.WatchSessionResponse) -> CompactionResult | Missed:
    if msg.WhichOneof("update") == "missed":
        return Missed(msg.missed)
    return compaction(msg.compaction)


def stream_message(msg: pb.StreamEventsResponse) -> StreamMessage:
    match msg.WhichOneof("result"):
        case "append":
            return Ack(msg.request_id, msg.session_id, append_result(msg.append))
        case "error":
            return RequestFailed(msg.request_id, msg.session_id, error_from_status(msg.error))
        case _:
            return BackgroundCompaction(msg.session_id, compaction(msg.compaction))
