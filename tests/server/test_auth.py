"""Bearer tokens: what a token file may say, and one token lookup per call.

A file that names a tenant ``default`` beside tenant-less tokens is refused
(tenant-less tokens of a multi-tenant file are that tenant). A token file
reloaded while a call is being set up never answers UNKNOWN: the call is
served with the tokens of its one lookup, or refused as UNAUTHENTICATED.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.errors import InvalidConfig
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.server.app import Sidecar
from sidecar.server.auth import TokenFile, Tokens, parse_tokens
from tests.server.harness import address, running

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

ACME = (("authorization", "Bearer acme-token"),)
PLAIN = (("authorization", "Bearer plain-token"),)


async def code_of(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


# -- the tenant-less tokens of a multi-tenant file -------------------------------------


def test_a_tenant_named_default_beside_tenant_less_tokens_is_refused() -> None:
    lines = ["# mixed", "plain-token", "acme acme-token", "default default-token"]
    with pytest.raises(ValueError, match=r"^f:4: .*'default'.*line 2"):
        parse_tokens(lines, "f")
    # Either alone is fine: a tenant called default, or tenant-less tokens beside others.
    assert parse_tokens(["default d-token", "acme a-token"], "f").tenant_of(b"d-token") == "default"
    assert parse_tokens(["plain-token", "acme a-token"], "f").tenant_of(b"plain-token") == "default"


async def test_a_server_refuses_such_a_token_file_at_start(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("plain-token\ndefault default-token\n")
    with pytest.raises(InvalidConfig) as info:
        async with running(tmp_path, auth_token_file=str(tokens)):
            pass
    assert info.value.field == "auth_token_file"
    assert f"{tokens}:2" in str(info.value)


async def test_tenant_less_tokens_of_a_multi_tenant_file_see_only_their_own_sessions(
    tmp_path: Path,
) -> None:
    """What docs/security.md says they see: the sessions tenant-less tokens made, nothing else."""
    tokens = tmp_path / "tokens"
    tokens.write_text("plain-token\nacme acme-token\n")
    event = event_pb2.Event(id="e", role=event_pb2.ROLE_USER, text="hi")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            for who, session_id in ((ACME, "a"), (PLAIN, "p")):
                await stub.AppendEvents(
                    pb.AppendEventsRequest(
                        session_id=session_id, events=[event], create_if_missing=True
                    ),
                    metadata=who,
                )
            listed = await stub.ListSessions(pb.ListSessionsRequest(), metadata=PLAIN)
            assert [s.session_id for s in listed.sessions] == ["p"]
            found = await stub.SearchEvents(
                pb.SearchEventsRequest(query="hi", include_active=True), metadata=PLAIN
            )
            assert {h.session_id for h in found.hits} == {"p"}
            assert (
                await code_of(stub.GetSession(pb.GetSessionRequest(session_id="a"), metadata=PLAIN))
                == grpc.StatusCode.NOT_FOUND
            )


async def test_sessions_made_single_tenant_are_seen_by_no_token_of_a_multi_tenant_file(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("plain-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="old"), metadata=PLAIN)
    tokens.write_text("plain-token\nacme acme-token\n")  # a restart switches modes
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            for who in (PLAIN, ACME):
                listed = await stub.ListSessions(pb.ListSessionsRequest(), metadata=who)
                assert list(listed.sessions) == []
                got = stub.GetSession(pb.GetSessionRequest(session_id="old"), metadata=who)
                assert await code_of(got) == grpc.StatusCode.NOT_FOUND


# -- one lookup per call ----------------------------------------------------------------


class Rotation:
    """``TokenFile.current`` as if the file were reloaded right after a call's first lookup.

    Once ``armed``, the first lookup answers ``before`` and every later one
    ``after``; unarmed, every lookup answers ``before``. Counts lookups.
    """

    def __init__(self, before: Tokens, after: Tokens) -> None:
        self.before = before
        self.after = after
        self.armed = False
        self.lookups = 0

    def current(self) -> Tokens:
        if not self.armed:
            return self.before
        self.lookups += 1
        return self.before if self.lookups == 1 else self.after

    def arm(self) -> None:
        """The next call is the one whose setup the reload falls into."""
        self.armed = True
        self.lookups = 0


@pytest.fixture
async def rotated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Stub, Rotation]]:
    """A server whose token file drops acme's token right after each call's first lookup."""
    path = tmp_path / "tokens"
    path.write_text("acme acme-token\nglobex globex-token\n")
    before = parse_tokens(path.read_text().splitlines(), str(path))
    after = parse_tokens(["globex globex-token"], str(path))
    rotation = Rotation(before, after)
    async with running(tmp_path, auth_token_file=str(path)) as sidecar:
        token_file = _token_file(sidecar)
        monkeypatch.setattr(token_file, "current", rotation.current)
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            yield pb_grpc.CompactionServiceStub(channel), rotation


def _token_file(sidecar: Sidecar) -> TokenFile:
    tokens = sidecar.servicer.tokens
    assert tokens is not None
    return tokens


async def test_a_reload_during_a_unary_call_never_answers_unknown(
    rotated: tuple[Stub, Rotation],
) -> None:
    stub, rotation = rotated
    rotation.arm()
    created = stub.CreateSession(pb.CreateSessionRequest(session_id="s"), metadata=ACME)
    assert await code_of(created) == grpc.StatusCode.OK  # served with the tokens it was let in by
    assert rotation.lookups == 1
    rotation.arm()
    got = stub.GetSession(pb.GetSessionRequest(session_id="s"), metadata=ACME)
    assert await code_of(got) == grpc.StatusCode.OK
    assert rotation.lookups == 1


async def test_a_reload_during_a_stream_ends_it_as_revoked_never_unknown(
    rotated: tuple[Stub, Rotation],
) -> None:
    stub, rotation = rotated
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"), metadata=ACME)

    async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
        event = event_pb2.Event(id="e", role=event_pb2.ROLE_USER, text="hi")
        yield pb.StreamEventsRequest(request_id="r1", session_id="s", events=[event])

    rotation.arm()
    answers = stub.StreamEvents(requests(), metadata=ACME)
    assert await code_of(_drain(answers)) == grpc.StatusCode.UNAUTHENTICATED
    rotation.arm()
    watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"), metadata=ACME)
    assert await code_of(_drain(watch)) == grpc.StatusCode.UNAUTHENTICATED


async def _drain(call: AsyncIterable[object]) -> None:
    async for _ in call:
        pass
