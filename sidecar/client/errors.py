"""What a failed call raises: the gRPC status code with the server's google.rpc details.

The server names the offending field of bad input (google.rpc.BadRequest),
the session's current version on a version mismatch (google.rpc.ErrorInfo),
and the limit a request went over (google.rpc.QuotaFailure). A caller should
not have to parse a message to learn any of these, so ClientError carries
them as attributes, and its subclass says which status code it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

_CODES = {code.value[0]: code for code in grpc.StatusCode}


@dataclass(frozen=True, slots=True)
class Precondition:
    """A failed precondition other than the version (google.rpc.PreconditionFailure): its
    ``type`` (``RESTORE_ORDER``: restore ``subject``, the newer compaction, first)."""

    type: str
    subject: str
    description: str


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request, by its dotted path (``events[0].role``)."""

    field: str
    description: str


class ClientError(Exception):
    """A call failed with ``code``; the details the server attached are attributes.

    ``field_violations`` comes from google.rpc.BadRequest (INVALID_ARGUMENT),
    ``current_version`` and ``reason`` from google.rpc.ErrorInfo
    (FAILED_PRECONDITION on a version mismatch), ``preconditions`` from
    google.rpc.PreconditionFailure (FAILED_PRECONDITION otherwise: a restore out of
    order), ``limits`` from google.rpc.QuotaFailure (RESOURCE_EXHAUSTED).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        field_violations: tuple[FieldViolation, ...] = (),
        current_version: int | None = None,
        reason: str = "",
        limits: tuple[str, ...] = (),
        preconditions: tuple[Precondition, ...] = (),
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.field_violations = field_violations
        self.current_version = current_version
        self.reason = reason
        self.limits = limits
        self.preconditions = preconditions

    @property
    def field(self) -> str | None:
        """The first offending field, when the server named one."""
        return self.field_violations[0].field if self.field_violations else None


class InvalidArgumentError(ClientError):
    """Bad input; ``field_violations`` says which field and why."""


class NotFoundError(ClientError):
    """The session does not exist."""


class AlreadyExistsError(ClientError):
    """The session id is taken, or an event id is stored with a different payload."""


class FailedPreconditionError(ClientError):
    """The session is not at the expected version; ``current_version`` says where it is."""


class ResourceExhaustedError(ClientError):
    """The request is over a configured limit; ``limits`` names it."""


class UnauthenticatedError(ClientError):
    """The bearer token is missing or unknown."""


class UnavailableError(ClientError):
    """The server (or its store or summarizer) cannot be reached; retrying may help."""


class DeadlineExceededError(ClientError):
    """The call (or the summarizer behind it) did not finish in time."""


_BY_CODE: dict[grpc.StatusCode, type[ClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def status_code(value: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a numeric google.rpc code."""
    return _CODES.get(value, grpc.StatusCode.UNKNOWN)


def error_from_status(status: status_pb2.Status) -> ClientError:
    """The error for a google.rpc.Status: a stream's per-request error, or a call's trailer."""
    violations: list[FieldViolation] = []
    limits: list[str] = []
    preconditions: list[Precondition] = []
    current_version: int | None = None
    reason = ""
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
            if "current_version" in info.metadata:
                current_version = int(info.metadata["current_version"])
        elif detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            quota = error_details_pb2.QuotaFailure()
            detail.Unpack(quota)
            limits.extend(v.subject for v in quota.violations)
        elif detail.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
            failure = error_details_pb2.PreconditionFailure()
            detail.Unpack(failure)
            preconditions.extend(
                Precondition(v.type, v.subject, v.description) for v in failure.violations
            )
    code = status_code(status.code)
    return _BY_CODE.get(code, ClientError)(
        code,
        status.message,
        field_violations=tuple(violations),
        current_version=current_version,
        reason=reason,
        limits=tuple(limits),
        preconditions=tuple(preconditions),
    )


def rpc_code(exc: grpc.RpcError) -> grpc.StatusCode:
    """The status code of a failed call (sync or asyncio); UNKNOWN if it has none."""
    code = getattr(exc, "code", None)
    return code() if callable(code) else grpc.StatusCode.UNKNOWN


def error_from_rpc(exc: grpc.RpcError) -> ClientError:
    """The error for a failed call, with the details from its grpc-status-details-bin trailer."""
    call: Any = exc
    try:
        status = rpc_status.from_call(call)
    except (AttributeError, ValueError):  # no trailer, or one that disagrees with the call
        status = None
    if status is not None:
        return error_from_status(status)
    code = rpc_code(exc)
    details = call.details() if callable(getattr(call, "details", None)) else None
    return _BY_CODE.get(code, ClientError)(code, details or str(exc))
