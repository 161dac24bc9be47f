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
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.errors import InvalidArgument, InvalidConfig
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.server import compaction_ids
from sidecar.server.config import ServerConfig, check
from sidecar.store.paging import fingerprint
from sidecar.store.protocol import CompactionRecord
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


KEEP_TWO = policy_pb2.CompactionPolicy(
    strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=2))
)


async def compacted(stub: Stub, session_id: str, first: int) -> str:
    """Six events from ``first`` appended and a pass over them; the pass's compaction id."""
    events = [
        event_pb2.Event(id=f"{session_id}-e{n}", role=event_pb2.ROLE_USER, text=f"paris {n}")
        for n in range(first, first + 6)
    ]
    await stub.AppendEvents(pb.AppendEventsRequest(session_id=session_id, events=events))
    answer = await stub.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert answer.result.compacted
    return answer.result.compaction_id


async def test_a_compactions_ids_token_is_signed_and_bound_to_its_compaction(
    tmp_path: Path,
) -> None:
    """ListCompactions ``ids_of``: its tokens are refused as every other listing's are."""
    async with running(tmp_path, default_policy="none") as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            for session_id in ("s", "t"):
                await stub.CreateSession(
                    pb.CreateSessionRequest(session_id=session_id, policy=KEEP_TWO)
                )
            older = await compacted(stub, "s", 0)
            mine = await compacted(stub, "s", 6)
            theirs = await compacted(stub, "t", 0)

            def ids_of(
                compaction_id: str, token: str, session_id: str = "s"
            ) -> pb.ListCompactionsRequest:
                return pb.ListCompactionsRequest(
                    session_id=session_id, ids_of=compaction_id, page_size=2, page_token=token
                )

            # A valid token still pages through every id, each once, in order.
            pages = [await stub.ListCompactions(ids_of(mine, ""))]
            while pages[-1].next_page_token:
                pages.append(await stub.ListCompactions(ids_of(mine, pages[-1].next_page_token)))
            history = await stub.ListCompactions(
                pb.ListCompactionsRequest(session_id="s", page_size=1)
            )
            [whole] = history.compactions  # newest first: the whole record of ``mine``
            assert whole.compaction_id == mine
            listed = [
                i
                for page in pages
                for i in (
                    *page.compactions[0].archived_event_ids,
                    *page.compactions[0].cleared_event_ids,
                    *page.compactions[0].inserted_event_ids,
                )
            ]
            assert listed == [
                *whole.archived_event_ids,
                *whole.cleared_event_ids,
                *whole.inserted_event_ids,
            ]
            assert len(pages) >= 3
            token = pages[0].next_page_token
            older_token = (await stub.ListCompactions(ids_of(older, ""))).next_page_token
            theirs_token = (await stub.ListCompactions(ids_of(theirs, "", "t"))).next_page_token
            assert all((token, older_token, theirs_token, history.next_page_token))

            def plain(compaction_id: str, offset: int) -> str:
                """A token as the unsigned format built it: base64url of ids, id, offset."""
                raw = f"ids\x00{compaction_id}\x00{offset}".encode()
                return base64.urlsafe_b64encode(raw).decode().rstrip("=")

            replays = [
                ids_of(mine, plain(mine, 4)),  # a forged offset
                # an issued token altered
                ids_of(mine, token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]),
                ids_of(mine, older_token),  # another compaction of the same session
                ids_of(theirs, token, "t"),  # another session's compaction
                ids_of(mine, theirs_token),
                ids_of(mine, history.next_page_token),  # the history's own listing
                pb.ListCompactionsRequest(session_id="s", page_token=token),
            ]
            for request in replays:
                assert await refusal(stub.ListCompactions(request)) == REFUSED, request
            listing = stub.ListEvents(pb.ListEventsRequest(session_id="s", page_token=token))
            assert await refusal(listing) == REFUSED


def test_a_compactions_ids_token_is_bound_to_its_session() -> None:
    """Compaction ids are random: only a record made up here can share one with another
    session, here the same "s" in another tenant's namespace."""
    record = CompactionRecord(
        compaction_id="c",
        session_id="acme#s",
        version_before=1,
        version_after=2,
        strategy="sliding_window",
        archived_ids=tuple(f"e{n}" for n in range(5)),
        inserted_ids=(),
        tokens_saved=0,
        summarizer_latency_ms=0.0,
        summary_input_tokens=0,
        summary_output_tokens=0,
        create_time=datetime(2026, 1, 1, tzinfo=UTC),
    )
    first, token = compaction_ids.ids_page(record, 2, "", 1 << 20)
    assert list(first.archived_event_ids) == ["e0", "e1"]
    second, _ = compaction_ids.ids_page(record, 2, token, 1 << 20)
    assert list(second.archived_event_ids) == ["e2", "e3"]
    elsewhere = replace(record, session_id="globex#s")  # "s" of another tenant
    with pytest.raises(InvalidArgument) as info:
        compaction_ids.ids_page(elsewhere, 2, token, 1 << 20)
    assert info.value.field == "page_token"


async def test_a_negative_page_size_is_refused_by_every_listing(tmp_path: Path) -> None:
    """AIP-158: a negative page size is INVALID_ARGUMENT naming ``page_size``, not the default."""
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await seeded(stub)
            refused = (grpc.StatusCode.INVALID_ARGUMENT, "page_size")
            listings = [
                stub.ListSessions(pb.ListSessionsRequest(page_size=-1)),
                stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=-7)),
                stub.SearchEvents(pb.SearchEventsRequest(query="paris", page_size=-1)),
                stub.ListCompactions(pb.ListCompactionsRequest(session_id="s", page_size=-1)),
                stub.ListCompactions(
                    pb.ListCompactionsRequest(session_id="s", ids_of="any", page_size=-1)
                ),
            ]
            for listing in listings:
                assert await refusal(listing) == refused
            # zero is the default, as before
            listed = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=0))
            assert len(listed.events) == 6
