"""What a refused call answered: its status code and the fields its ``BadRequest`` names."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


def bad_fields(status: status_pb2.Status) -> list[str]:
    """The fields a status's ``google.rpc.BadRequest`` names, in order (a call's status, or a
    stream's per-request ``error``)."""
    named: list[str] = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            named.extend(v.field for v in bad.field_violations)
    return named


async def refused_fields(call: object) -> tuple[grpc.StatusCode, list[str]]:
    """The code ``call`` ended with and the fields its ``BadRequest`` names (OK and none when
    it succeeded)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        return error.code(), bad_fields(status) if status is not None else []
    return grpc.StatusCode.OK, []
