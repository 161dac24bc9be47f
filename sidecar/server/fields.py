"""What handlers read off requests, and the status an error answers with.

Session ids are taken into the caller's namespace here (``tenancy``), and an
error's message is given back in the caller's own ids, so no handler sees or
shows another tenant's names.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import status_pb2
from grpc_status import rpc_status

from sidecar.errors import InvalidArgument
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import ModelUsage
from sidecar.server.status import to_status
from sidecar.server.tenancy import current_scope


def status_of(exc: BaseException) -> status_pb2.Status:
    """The error's status, its message in the caller's own session ids."""
    status = to_status(exc)
    status.message = current_scope.get().scrub(status.message)
    return status


async def abort(context: grpc.aio.ServicerContext[Any, Any], exc: BaseException) -> None:
    """End the call with the error's status; details travel in grpc-status-details-bin."""
    status = rpc_status.to_status(status_of(exc))
    await context.abort(status.code, status.details, status.trailing_metadata)


def optional_version(value: int, field: str = "expected_version") -> int | None:
    """A request's expected version (AIP-154): 0 (unset) is no check, a negative one is refused.

    No session is ever at a negative version, so one can only be a malformed request:
    INVALID_ARGUMENT naming ``field``, not the FAILED_PRECONDITION of a stale version.
    """
    if value < 0:
        raise InvalidArgument(field, "must not be negative (0 means no version check)")
    return value if value else None


def required(value: str, field: str) -> str:
    """``value``, which ``field`` must carry."""
    if not value:
        raise InvalidArgument(field, "is required")
    return value


def stored(session_id: str, field: str = "session_id") -> str:
    """The stored id of the session a request names, in the caller's namespace."""
    return current_scope.get().inside(required(session_id, field), field)


def page_size(value: int) -> int:
    """A listing's page size: 0 (unset) is the default, a negative one is refused (AIP-158)."""
    if value < 0:
        raise InvalidArgument("page_size", "must not be negative (0 means the default)")
    return value


def usage_in(request: pb.AppendEventsRequest | pb.StreamEventsRequest) -> ModelUsage | None:
    """The provider's usage report an append carries, if any."""
    if not request.HasField("usage"):
        return None
    return ModelUsage(request.usage.context_version, request.usage.prompt_tokens)
