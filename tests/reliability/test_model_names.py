"""A model name with a NUL or another control character: refused alike on both stores.

A dated snapshot takes its family's profile by prefix, so ``gpt-4o-\\x00`` finds
one; PostgreSQL text cannot hold a NUL, and answered INTERNAL where SQLite
stored the name. Both now refuse it before any store sees it, naming ``model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import session_pb2
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

NAMES = ["gpt-4o-\x00", "gpt-4o-2024\x00-08-06", "claude-sonnet-4-5-\x01", "gpt-4o-\n"]


async def _refusal(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize("name", NAMES)
async def test_a_control_character_in_a_model_name_is_invalid_argument_on_both_stores(
    tmp_path: Path, store_url: str, name: str
) -> None:
    async with running(tmp_path, store=store_url) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            code, details = await _refusal(
                stub.CreateSession(pb.CreateSessionRequest(session_id="s", model=name))
            )
            assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "model")
            missing, _ = await _refusal(stub.GetSession(pb.GetSessionRequest(session_id="s")))
            assert missing == grpc.StatusCode.NOT_FOUND  # nothing stored
            created = await stub.CreateSession(
                pb.CreateSessionRequest(session_id="s", model="gpt-4o")
            )
            code, details = await _refusal(
                stub.UpdateSession(
                    pb.UpdateSessionRequest(
                        session=session_pb2.Session(session_id="s", model=name),
                        update_mask=FieldMask(paths=["model"]),
                    )
                )
            )
            assert (code, details.split(":")[0]) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                "session.model",
            )
            kept = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
            assert (kept.model, kept.version) == ("gpt-4o", created.version)
