"""The Python client of the compaction sidecar.

``AsyncClient`` (asyncio) and ``Client`` (blocking) speak the gRPC API and
return the domain's dataclasses (``sidecar.model``): ``Event``, ``Session``
(as ``SessionInfo``, with its model's ``ModelProfile``), ``CompactionResult``.
A session's log is reached through ``client.session(session_id)``. Failed
calls raise ``ClientError``.
"""

from __future__ import annotations

from sidecar.client.aio import AsyncClient, SessionHandle
from sidecar.client.channel import Tls
from sidecar.client.decode import session_policy
from sidecar.client.errors import (
    AlreadyExistsError,
    ClientError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    Precondition,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)
from sidecar.client.requests import KEEP, Batch, Keep, with_ids
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
from sidecar.client.retry import RetryPolicy
from sidecar.client.streams import EventStream, Watch
from sidecar.client.sync import Client, SyncSessionHandle
from sidecar.model import LabelUpdate, ModelUsage, Reasoning, TokenCalibration
from sidecar.providers.profiles import ModelProfile
from sidecar.providers.render import ContextFormat
from sidecar.store.protocol import CompactionRecord

__all__ = [
    "KEEP",
    "Ack",
    "AlreadyExistsError",
    "AppendResult",
    "AsyncClient",
    "BackgroundCompaction",
    "Batch",
    "Client",
    "ClientError",
    "CompactionRecord",
    "ContextFormat",
    "DeadlineExceededError",
    "EventStream",
    "FailedPreconditionError",
    "FieldViolation",
    "InvalidArgumentError",
    "Keep",
    "LabelUpdate",
    "Missed",
    "ModelProfile",
    "ModelUsage",
    "NotFoundError",
    "Precondition",
    "Reasoning",
    "RequestFailed",
    "ResourceExhaustedError",
    "RetryPolicy",
    "SearchHit",
    "SessionContext",
    "SessionHandle",
    "SessionInfo",
    "StreamMessage",
    "SyncSessionHandle",
    "Tls",
    "TokenCalibration",
    "UnauthenticatedError",
    "UnavailableError",
    "Watch",
    "session_policy",
    "with_ids",
]
