"""Domain errors to gRPC status codes: the one place where that mapping lives.

Bad input is never INTERNAL: INVALID_ARGUMENT carries a google.rpc.BadRequest
naming the field, RESOURCE_EXHAUSTED a QuotaFailure naming the limit, and
FAILED_PRECONDITION the session's current version.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from sidecar.errors import (
    CompactionNotFound,
    EventConflict,
    InvalidArgument,
    LimitExceeded,
    NoSummarizer,
    RestoreRefused,
    SchemaTooNew,
    SessionExists,
    SessionNotFound,
    SidecarError,
    StoreUnavailable,
    SummarizerTimeout,
    SummarizerUnavailable,
    VersionConflict,
)

DOMAIN = "compaction-sidecar"


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


def to_status(exc: BaseException) -> status_pb2.Status:
    """The google.rpc.Status for an error raised while serving a request."""
    status = status_pb2.Status(message=str(exc))
    match exc:
        case InvalidArgument():
            status.code = code_pb2.INVALID_ARGUMENT
            violation = error_details_pb2.BadRequest.FieldViolation(
                field=exc.field, description=exc.description
            )
            status.details.append(_pack(error_details_pb2.BadRequest(field_violations=[violation])))
        case LimitExceeded():
            status.code = code_pb2.RESOURCE_EXHAUSTED
            quota = error_details_pb2.QuotaFailure.Violation(
                subject=exc.limit, description=str(exc)
            )
            status.details.append(_pack(error_details_pb2.QuotaFailure(violations=[quota])))
        case SessionNotFound() | CompactionNotFound():
            status.code = code_pb2.NOT_FOUND
        case RestoreRefused():
            status.code = code_pb2.FAILED_PRECONDITION
            violation = error_details_pb2.PreconditionFailure.Violation(
                type="RESTORE_ORDER", subject=exc.first, description=str(exc)
            )
            status.details.append(
                _pack(error_details_pb2.PreconditionFailure(violations=[violation]))
            )
        case SessionExists() | EventConflict():
            status.code = code_pb2.ALREADY_EXISTS
        case VersionConflict():
            status.code = code_pb2.FAILED_PRECONDITION
            info = error_details_pb2.ErrorInfo(
                reason="VERSION_MISMATCH",
                domain=DOMAIN,
                metadata={"current_version": str(exc.current_version)},
            )
            status.details.append(_pack(info))
        case SummarizerTimeout():
            status.code = code_pb2.DEADLINE_EXCEEDED
        case SummarizerUnavailable() | StoreUnavailable():
            status.code = code_pb2.UNAVAILABLE
        case NoSummarizer():
            status.code = code_pb2.FAILED_PRECONDITION
            violation = error_details_pb2.PreconditionFailure.Violation(
                type="SUMMARIZER", subject=exc.field, description=str(exc)
            )
            status.details.append(
                _pack(error_details_pb2.PreconditionFailure(violations=[violation]))
            )
        case SchemaTooNew():
            status.code = code_pb2.FAILED_PRECONDITION
        case TimeoutError():
            status.code = code_pb2.DEADLINE_EXCEEDED
            status.message = "deadline exceeded"
        case SidecarError():
            status.code = code_pb2.INTERNAL
        case _:
            status.code = code_pb2.INTERNAL
            status.message = "internal error"
    return status


def grpc_code(status: status_pb2.Status) -> grpc.StatusCode:
    for code in grpc.StatusCode:
        if code.value[0] == status.code:
            return code
    return grpc.StatusCode.UNKNOWN
