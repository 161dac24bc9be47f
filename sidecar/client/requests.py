"""The domain model to protobuf requests: one builder per call, shared by both clients.

Events are converted by ``sidecar.server.convert``, the same code the server
uses, so a field means the same thing at both ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from google.protobuf.field_mask_pb2 import FieldMask

from sidecar.compaction.policy import CompactionPolicy
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.model import Event, LabelUpdate, ModelUsage, Role
from sidecar.providers.render import ContextFormat
from sidecar.server import convert


class Keep(Enum):
    """Leave a session's field as it is, in ``update_session``."""

    KEEP = "keep"


KEEP = Keep.KEEP


FORMATS: Mapping[ContextFormat, pb.ContextFormat.ValueType] = {
    ContextFormat.GEMINI: pb.CONTEXT_FORMAT_GEMINI,
    ContextFormat.OPENAI_CHAT: pb.CONTEXT_FORMAT_OPENAI_CHAT,
    ContextFormat.OPENAI_RESPONSES: pb.CONTEXT_FORMAT_OPENAI_RESPONSES,
    ContextFormat.ANTHROPIC: pb.CONTEXT_FORMAT_ANTHROPIC,
}
"""Each provider format as GetContextRequest.format carries it."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One append of the blocking client's ``stream()``: events, and usage to report with them.

    ``usage`` is what the provider reported for the model call made with the
    context of ``usage.context_version``: Gemini's ``usageMetadata.promptTokenCount``,
    OpenAI's ``usage.prompt_tokens`` or ``input_tokens``, Anthropic's
    ``input_tokens`` plus its cache reads and writes.
    """

    events: Sequence[Event]
    usage: ModelUsage | None = None


def with_ids(events: Iterable[Event]) -> list[Event]:
    """The events, each with an id: a fresh uuid4 hex where the caller gave none.

    Done once, before the first attempt, so that a retried append re-sends the
    same ids and the server stores each event once.
    """
    return [e if e.id else replace(e, id=uuid.uuid4().hex) for e in events]


def _version(expected_version: int | None) -> int:
    # 0 is the wire's "no check".
    return expected_version or 0


def _usage_out(
    usage: ModelUsage | None, into: pb.AppendEventsRequest | pb.StreamEventsRequest
) -> None:
    if usage is not None:
        into.usage.context_version = usage.context_version
        into.usage.prompt_tokens = usage.prompt_tokens


def create_session(
    session_id: str,
    policy: CompactionPolicy | None,
    labels: Mapping[str, str] | None,
    model: str = "",
) -> pb.CreateSessionRequest:
    request = pb.CreateSessionRequest(session_id=session_id, labels=dict(labels or {}), model=model)
    if policy is not None:
        convert.policy_out(policy, request.policy)
    return request


def update_session(
    session_id: str,
    policy: CompactionPolicy | Keep | None,
    labels: Mapping[str, str] | Keep,
    expected_version: int | None,
    model: str | Keep = KEEP,
) -> pb.UpdateSessionRequest:
    """Names in the update mask exactly the fields the caller passed.

    ``policy=None`` removes the session's policy (it then never compacts on
    its own); ``labels`` replaces the whole label map; ``model=""`` removes
    the session's model.
    """
    paths: list[str] = []
    header = session_pb2.Session(session_id=session_id)
    if policy is not KEEP:
        paths.append("policy")
        if policy is not None:
            convert.policy_out(policy, header.policy)
    if labels is not KEEP:
        paths.append("labels")
        header.labels.update(labels)
    if model is not KEEP:
        paths.append("model")
        header.model = model
    if not paths:
        raise ValueError("update_session: pass policy, labels and/or model")
    return pb.UpdateSessionRequest(
        session=header,
        update_mask=FieldMask(paths=paths),
        expected_version=_version(expected_version),
    )


def append(
    session_id: str,
    events: Sequence[Event],
    expected_version: int | None,
    create_if_missing: bool,
    label_updates: Sequence[LabelUpdate] = (),
    usage: ModelUsage | None = None,
) -> pb.AppendEventsRequest:
    """An append of events that already carry their ids (see ``with_ids``)."""
    request = pb.AppendEventsRequest(
        session_id=session_id,
        expected_version=_version(expected_version),
        create_if_missing=create_if_missing,
    )
    convert.events_out(events, request.events)
    _usage_out(usage, request)
    for update in label_updates:
        request.label_updates.add(
            session_id=update.session_id,
            set=dict(update.set),
            remove=list(update.remove),
            expected_version=_version(update.expected_version),
        )
    return request


def stream_append(
    request_id: str,
    session_id: str,
    events: Sequence[Event],
    expected_version: int | None,
    create_if_missing: bool,
    usage: ModelUsage | None = None,
) -> pb.StreamEventsRequest:
    request = pb.StreamEventsRequest(
        request_id=request_id,
        session_id=session_id,
        expected_version=_version(expected_version),
        create_if_missing=create_if_missing,
    )
    convert.events_out(events, request.events)
    _usage_out(usage, request)
    return request


def context(session_id: str, format: ContextFormat | None) -> pb.GetContextRequest:
    """A GetContext, rendered in ``format`` when one is given."""
    request = pb.GetContextRequest(session_id=session_id)
    if format is not None:
        request.format = FORMATS[format]
    return request


def compact(
    session_id: str,
    policy: CompactionPolicy | None,
    force: bool,
    expected_version: int | None,
) -> pb.CompactRequest:
    request = pb.CompactRequest(
        session_id=session_id, force=force, expected_version=_version(expected_version)
    )
    if policy is not None:
        convert.policy_out(policy, request.policy)
    return request


def search(
    query: str,
    session_id: str | None,
    roles: Iterable[Role],
    include_active: bool,
    since: datetime | None,
    until: datetime | None,
    page_size: int,
) -> pb.SearchEventsRequest:
    """The first page's request; later pages copy it with the next page token."""
    request = pb.SearchEventsRequest(
        query=query,
        session_id=session_id or "",
        roles=[convert.role_out(r) for r in roles],
        include_active=include_active,
        page_size=page_size,
    )
    if since is not None:
        convert.time_out(since, request.since)
    if until is not None:
        convert.time_out(until, request.until)
    return request
