"""Page tokens are signed and bound to their listing: a client can only hand back what it got.

A token a client builds or alters, a token of another listing (another
session, another filter, another tenant's namespace, another kind of listing)
and a token signed with another key are all INVALID_ARGUMENT naming
``page_token``. Servers that share ``page_token_key`` accept each other's
tokens, across restarts too.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.errors import InvalidConfig
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.server.config import ServerConfig, check
from sidecar.store.paging import fingerprint
from tests.server.harness import address, running

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

KEY = "a-page-token-key-replicas-share"
ACME = (("authorization", "Bearer acme-token"),)
GLOBEX = (("authorization", "Bearer globex-token"),)


def u(n: int) -> event_pb2.Event:
    return event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text=f"paris {n}")


async def seeded(stub: Stub, session_id: str = "s", count: int = 6) -> None:
    events = [u(n) for n in range(count)]
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id=session_id, events=events, create_if_missing=True)
    )


async def refusal(call: object) -> tuple[grpc.StatusCode, str]:
    """The code and the field a call's error names ("" for OK)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), (error.details() or "").split(":")[0]
    return grpc.StatusCode.OK, ""


REFUSED = (grpc.StatusCode.INVALID_ARGUMENT, "page_token")


def hand_built(kind: str, bound: str, *after: int) -> str:
    """A token as the unsigned format was documented: base64url of ``[kind, bound, *after]``."""
    payload = json.dumps([kind, bound, *after], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


async def test_a_token_built_by_hand_is_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await seeded(stub)
            # The right kind and bound, and a key of the client's choosing: past e3.
            forged = hand_built("events", fingerprint("s", True), 4, 4)
            listing = stub.ListEvents(pb.ListEventsRequest(session_id="s", page_token=forged))
            assert await refusal(listing) == REFUSED
            offset = hand_built("search", "0" * 16, 1)
            search = stub.SearchEvents(pb.SearchEventsRequest(query="paris", page_token=offset))
            assert await refusal(search) == REFUSED


async def test_every_alteration_of_an_issued_token_is_refused(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await seeded(stub)
            first = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=2))
            token = first.next_page_token
            alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            for i, char in enumerate(token):
                other = alphabet[(alphabet.index(char) + 1) % len(alphabet)]
                altered = token[:i] + other + token[i + 1 :]
                listing = stub.ListEvents(
                    pb.ListEventsRequest(session_id="s", page_size=2, page_token=altered)
                )
                assert await refusal(listing) == REFUSED, (i, altered)
            for altered in (token[:-1], token + "A", ""):
                listing = stub.ListEvents(
                    pb.ListEventsRequest(session_id="s", page_size=2, page_token=altered)
                )
                answer = await refusal(listing)
                assert answer == (REFUSED if altered else (grpc.StatusCode.OK, "")), altered
            # The issued token itself still works, and stays short.
            second = await stub.ListEvents(
                pb.ListEventsRequest(session_id="s", page_size=2, page_token=token)
            )
            assert [e.id for e in second.events] == ["e2", "e3"]
            assert len(token) <= 40, token


async def test_a_token_is_refused_by_every_other_listing(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("acme acme-token\nglobex globex-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            for who in (ACME, GLOBEX):
                for session_id in ("s", "t"):
                    await stub.AppendEvents(
                        pb.AppendEventsRequest(
                            session_id=session_id,
                            events=[u(n) for n in range(4)],
                            create_if_missing=True,
                        ),
                        metadata=who,
                    )
            events = await stub.ListEvents(
                pb.ListEventsRequest(session_id="s", page_size=1), metadata=ACME
            )
            sessions = await stub.ListSessions(pb.ListSessionsRequest(page_size=1), metadata=ACME)
            hits = await stub.SearchEvents(
                pb.SearchEventsRequest(query="paris", include_active=True, page_size=1),
                metadata=ACME,
            )
            token, hit = events.next_page_token, hits.next_page_token
            assert token
            assert sessions.next_page_token
            assert hit
            replays = [
                # Another session, the same session's active window, another tenant's "s".
                (pb.ListEventsRequest(session_id="t", page_token=token), ACME),
                (pb.ListEventsRequest(session_id="s", page_token=token, active_only=True), ACME),
                (pb.ListEventsRequest(session_id="s", page_token=token), GLOBEX),
                # Other kinds of listing.
                (pb.ListSessionsRequest(page_token=token), ACME),
                (pb.SearchEventsRequest(query="paris", page_token=token), ACME),
                # The same arguments in another tenant's namespace, or with another filter.
                (pb.ListSessionsRequest(page_token=sessions.next_page_token), GLOBEX),
                (
                    pb.ListSessionsRequest(
                        page_token=sessions.next_page_token, label_filter={"a": "b"}
                    ),
                    ACME,
                ),
                (
                    pb.SearchEventsRequest(query="paris", page_token=hit, include_active=True),
                    GLOBEX,
                ),
                (pb.SearchEventsRequest(query="rome", page_token=hit, include_active=True), ACME),
            ]
            for request, who in replays:
                method = {
                    pb.ListEventsRequest: stub.ListEvents,
                    pb.ListSessionsRequest: stub.ListSessions,
                    pb.SearchEventsRequest: stub.SearchEvents,
                }[type(request)]
                answer = await refusal(method(request, metadata=who))  # type: ignore[operator]
                assert answer == REFUSED, (type(request).__name__, request, who)


async def test_servers_sharing_page_token_key_accept_each_others_tokens(tmp_path: Path) -> None:
    """A restart, or another replica over the same store: the same key, the same tokens."""
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    async with running(tmp_path, store=db, page_token_key=KEY) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await seeded(stub)
            first = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=2))
    async with running(tmp_path, store=db, page_token_key="another-key-of-enough-length") as other:
        async with grpc.aio.insecure_channel(address(other)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            listing = stub.ListEvents(
                pb.ListEventsRequest(session_id="s", page_size=2, page_token=first.next_page_token)
            )
            assert await refusal(listing) == REFUSED
    async with running(tmp_path, store=db, page_token_key=KEY) as again:
        async with grpc.aio.insecure_channel(address(again)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            second = await stub.ListEvents(
                pb.ListEventsRequest(session_id="s", page_size=2, page_token=first.next_page_token)
            )
            assert [e.id for e in second.events] == ["e2", "e3"]


def test_a_short_page_token_key_is_refused() -> None:
    with pytest.raises(InvalidConfig) as info:
        check(ServerConfig(page_token_key="short"))
    assert info.value.field == "page_token_key"


def _token_bytes(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def _reads_as_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, UnicodeError):
        return False
    return True


async def test_a_compaction_listing_token_does_not_show_the_store_wide_row_id(
    tmp_path: Path,
) -> None:
    """Row ids are store-wide: in clear text, two tokens would count other tenants' passes."""
    window = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1))
    )

    async def compact(stub: Stub, session_id: str, turn: int) -> None:
        events = [
            event_pb2.Event(id=f"{session_id}-{turn}-{n}", role=event_pb2.ROLE_USER, text="hi")
            for n in range(2)
        ]
        await stub.AppendEvents(pb.AppendEventsRequest(session_id=session_id, events=events))
        answer = await stub.Compact(pb.CompactRequest(session_id=session_id, force=True))
        assert answer.result.compacted

    async with running(tmp_path, default_policy="none") as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            for session_id in ("mine", "theirs"):
                await stub.CreateSession(
                    pb.CreateSessionRequest(session_id=session_id, policy=window)
                )
            tokens = []
            for turn in range(3):
                await compact(stub, "mine", turn)
                for other in range(5):
                    await compact(stub, "theirs", 10 * turn + other)
                listed = await stub.ListCompactions(
                    pb.ListCompactionsRequest(session_id="mine", page_size=1)
                )
                tokens.append(listed.next_page_token)
            # Opaque: what follows the signature does not read as the key it carries.
            assert all(not _reads_as_json(_token_bytes(t)[16:]) for t in tokens[1:]), tokens
            # And each token still pages the listing it came from.
            rest = await stub.ListCompactions(
                pb.ListCompactionsRequest(session_id="mine", page_size=5, page_token=tokens[-1])
            )
            assert len(rest.compactions) == 2
