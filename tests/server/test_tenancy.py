"""Multi-tenancy and token rotation: one tenant never sees another's sessions.

A tenant asking for another tenant's session gets NOT_FOUND, exactly as for a
session that does not exist (never PERMISSION_DENIED, which would reveal it).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.server import auth
from sidecar.server.auth import parse_tokens
from tests.server.harness import address, running
from tests.server.test_api import WINDOW, turn

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

ACME = (("authorization", "Bearer acme-token"),)
GLOBEX = (("authorization", "Bearer globex-token"),)


@asynccontextmanager
async def tenants(tmp_path: Path) -> AsyncIterator[Stub]:
    tokens = tmp_path / "tokens"
    tokens.write_text("# two tenants\nacme acme-token\nglobex globex-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            yield pb_grpc.CompactionServiceStub(channel)


async def code_of(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_a_tenant_cannot_see_or_touch_another_tenants_session(tmp_path: Path) -> None:
    async with tenants(tmp_path) as stub:
        await stub.CreateSession(
            pb.CreateSessionRequest(session_id="s1", policy=WINDOW), metadata=ACME
        )
        for n in range(5):
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s1", events=turn(n)), metadata=ACME
            )
        # Every way of naming acme's s1 from globex finds nothing.
        not_found = grpc.StatusCode.NOT_FOUND
        assert (
            await code_of(stub.GetSession(pb.GetSessionRequest(session_id="s1"), metadata=GLOBEX))
            == not_found
        )
        assert (
            await code_of(stub.GetContext(pb.GetContextRequest(session_id="s1"), metadata=GLOBEX))
            == not_found
        )
        assert (
            await code_of(stub.ListEvents(pb.ListEventsRequest(session_id="s1"), metadata=GLOBEX))
            == not_found
        )
        assert (
            await code_of(
                stub.AppendEvents(
                    pb.AppendEventsRequest(session_id="s1", events=turn(9)), metadata=GLOBEX
                )
            )
            == not_found
        )
        assert (
            await code_of(
                stub.Compact(pb.CompactRequest(session_id="s1", force=True), metadata=GLOBEX)
            )
            == not_found
        )
        assert (
            await code_of(
                stub.DeleteSession(pb.DeleteSessionRequest(session_id="s1"), metadata=GLOBEX)
            )
            == not_found
        )
        assert (
            await code_of(
                stub.SearchEvents(
                    pb.SearchEventsRequest(query="invoices", session_id="s1"), metadata=GLOBEX
                )
            )
            == not_found
        )
        # Nor can it reach into the namespace by spelling it.
        assert (
            await code_of(
                stub.GetSession(pb.GetSessionRequest(session_id="acme#s1"), metadata=GLOBEX)
            )
            == grpc.StatusCode.INVALID_ARGUMENT
        )
        # Listing and search across sessions show globex nothing of acme's.
        listed = await stub.ListSessions(pb.ListSessionsRequest(), metadata=GLOBEX)
        assert list(listed.sessions) == []
        found = await stub.SearchEvents(pb.SearchEventsRequest(query="invoices"), metadata=GLOBEX)
        assert list(found.hits) == []
        # Globex may use the same name for a session of its own.
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s1", events=turn(0), create_if_missing=True),
            metadata=GLOBEX,
        )
        mine = await stub.GetContext(pb.GetContextRequest(session_id="s1"), metadata=GLOBEX)
        assert [e.id for e in mine.events] == ["u0", "a0"]
        # Acme sees its own, under its own names, untouched by globex.
        session = await stub.GetSession(pb.GetSessionRequest(session_id="s1"), metadata=ACME)
        assert session.session_id == "s1"
        assert session.total_event_count == 10
        listed = await stub.ListSessions(pb.ListSessionsRequest(), metadata=ACME)
        assert [s.session_id for s in listed.sessions] == ["s1"]
        found = await stub.SearchEvents(pb.SearchEventsRequest(query="invoices"), metadata=ACME)
        assert found.hits
        assert {h.session_id for h in found.hits} == {"s1"}


async def test_errors_and_streams_speak_the_tenants_own_ids(tmp_path: Path) -> None:
    async with tenants(tmp_path) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await stub.GetContext(pb.GetContextRequest(session_id="nope"), metadata=ACME)
        assert "nope" in (missing.value.details() or "")
        assert "acme" not in (missing.value.details() or "")

        async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
            yield pb.StreamEventsRequest(
                request_id="r1", session_id="st", create_if_missing=True, events=turn(0)
            )
            yield pb.StreamEventsRequest(
                request_id="r2", session_id="st", expected_version=99, events=turn(1)
            )

        answers = [a async for a in stub.StreamEvents(requests(), metadata=ACME)]
        assert [a.session_id for a in answers] == ["st", "st"]
        assert "acme" not in answers[1].error.message
        assert "'st'" in answers[1].error.message


async def test_a_rotated_token_file_takes_effect_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "CHECK_INTERVAL_S", 0.0)
    tokens = tmp_path / "tokens"
    tokens.write_text("old-token\n")
    old = (("authorization", "Bearer old-token"),)
    new = (("authorization", "Bearer new-token"),)
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s"), metadata=old)
            # Kubernetes updates a mounted Secret by swapping a symlink: a new inode.
            replacement = tmp_path / "tokens.new"
            replacement.write_text("new-token\n")
            os.replace(replacement, tokens)
            await asyncio.sleep(0.01)
            assert (
                await code_of(stub.GetSession(pb.GetSessionRequest(session_id="s"), metadata=old))
                == grpc.StatusCode.UNAUTHENTICATED
            )
            assert (
                await stub.GetSession(pb.GetSessionRequest(session_id="s"), metadata=new)
            ).version
            # A botched rotation (an empty file) keeps the tokens in force.
            tokens.write_text("")
            await asyncio.sleep(0.01)
            assert (
                await stub.GetSession(pb.GetSessionRequest(session_id="s"), metadata=new)
            ).version


def test_token_lines_and_their_errors() -> None:
    single = parse_tokens(["tok-1", "  ", "# comment", "tok-2"], "f")
    assert not single.multi_tenant
    assert single.tenant_of(b"tok-1") is None
    assert single.tenant_of(b"tok-3") is False
    multi = parse_tokens(["acme a-tok", "plain-tok"], "f")
    assert multi.multi_tenant
    assert multi.tenant_of(b"a-tok") == "acme"
    assert multi.tenant_of(b"plain-tok") == "default"
    with pytest.raises(ValueError, match="f:1"):
        parse_tokens(["bad tenant! tok"], "f")
    with pytest.raises(ValueError, match="two tenants"):
        parse_tokens(["acme same", "globex same"], "f")
    with pytest.raises(ValueError, match="no token"):
        parse_tokens(["# nothing"], "f")


async def test_health_and_reflection_need_no_token(tmp_path: Path) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    tokens = tmp_path / "tokens"
    tokens.write_text("acme acme-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="")
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = pb_grpc.CompactionServiceStub(channel)
            assert (
                await code_of(stub.GetSession(pb.GetSessionRequest(session_id="s")))
                == grpc.StatusCode.UNAUTHENTICATED
            )
            event = event_pb2.Event(id="e", role=event_pb2.ROLE_USER, text="x")
            assert (
                await code_of(
                    stub.AppendEvents(
                        pb.AppendEventsRequest(session_id="s", events=[event]),
                        metadata=(("authorization", "Bearer wrong"),),
                    )
                )
                == grpc.StatusCode.UNAUTHENTICATED
            )


async def test_label_updates_name_sessions_of_the_callers_own_tenant(tmp_path: Path) -> None:
    async with tenants(tmp_path) as stub:
        update = pb.LabelUpdate(session_id="shared", set={"who": "acme"})
        await stub.AppendEvents(
            pb.AppendEventsRequest(
                session_id="s1", events=turn(0), create_if_missing=True, label_updates=[update]
            ),
            metadata=ACME,
        )
        mine = await stub.GetSession(pb.GetSessionRequest(session_id="shared"), metadata=ACME)
        assert (mine.session_id, dict(mine.labels)) == ("shared", {"who": "acme"})
        assert (
            await code_of(
                stub.GetSession(pb.GetSessionRequest(session_id="shared"), metadata=GLOBEX)
            )
            == grpc.StatusCode.NOT_FOUND
        )


async def test_one_tenants_streams_leave_another_its_own_allowance_on_one_connection(
    tmp_path: Path,
) -> None:
    """Two tenants' calls on one connection (as every client of a Unix socket is one peer
    to grpc, and a proxy's calls are): each has ``max_streams_per_connection`` of its own."""
    tokens = tmp_path / "tokens"
    tokens.write_text("acme acme-token\nglobex globex-token\n")
    async with running(tmp_path, auth_token_file=str(tokens), max_streams_per_connection=1) as sc:
        async with grpc.aio.insecure_channel(address(sc)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            for tenant in (ACME, GLOBEX):
                await stub.CreateSession(pb.CreateSessionRequest(session_id="s"), metadata=tenant)
            acme = stub.WatchSession(pb.WatchSessionRequest(session_id="s"), metadata=ACME)
            await acme.initial_metadata()
            again = stub.WatchSession(pb.WatchSessionRequest(session_id="s"), metadata=ACME)
            assert await code_of(again.read()) == grpc.StatusCode.RESOURCE_EXHAUSTED
            globex = stub.WatchSession(pb.WatchSessionRequest(session_id="s"), metadata=GLOBEX)
            await globex.initial_metadata()  # refused here, by acme's stream, before
            with pytest.raises(TimeoutError):  # and it stays open
                await asyncio.wait_for(asyncio.shield(globex.code()), 0.3)
            acme.cancel()
            globex.cancel()


def test_a_token_file_that_disappears_keeps_the_tokens_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As an empty or malformed rotation does: warned once, not silently; the file
    written again is read again."""
    monkeypatch.setattr(auth, "CHECK_INTERVAL_S", 0.0)
    path = tmp_path / "tokens"
    path.write_text("tok-1\n")
    tokens = auth.TokenFile(str(path))
    path.unlink()
    with caplog.at_level(logging.WARNING, logger=auth.log.name):
        assert tokens.current().tenant_of(b"tok-1") is None  # still in force
        assert tokens.current().tenant_of(b"tok-1") is None
    gone = [r for r in caplog.records if "keeping the current tokens" in r.getMessage()]
    assert len(gone) == 1
    assert str(path) in gone[0].getMessage()
    path.write_text("tok-2\n")
    assert tokens.current().tenant_of(b"tok-1") is False
    assert tokens.current().tenant_of(b"tok-2") is None
