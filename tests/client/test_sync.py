"""The blocking client's calls, end to end.

The server runs on this test's event loop, so each blocking scenario runs in
a worker thread (``asyncio.to_thread``) while the loop serves it.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from sidecar.client import (
    Ack,
    AsyncClient,
    BackgroundCompaction,
    Client,
    ClientError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    RequestFailed,
    RetryPolicy,
    SessionContext,
    UnauthenticatedError,
    session_policy,
)
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import CompactionResult, Role
from sidecar.server.app import Sidecar
from tests.client.conftest import SUMMARIZE, WINDOW, policy, t, turn, u, until_watched
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, running


class _Unavailable(grpc.RpcError):
    """What a sync call raises when the connection drops: an RpcError with a code."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection reset (simulated)"

    def trailing_metadata(self) -> tuple[Any, ...]:
        return ()


class LoseFirstAppendAnswer(grpc.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """Lets the first AppendEvents reach the server, then reports it UNAVAILABLE."""

    def __init__(self) -> None:
        self.attempts = 0

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], client_call_details: Any, request: Any
    ) -> Any:
        outcome = continuation(client_call_details, request)
        if client_call_details.method.endswith("/AppendEvents"):
            self.attempts += 1
            if self.attempts == 1:
                outcome.result()  # the server stored the batch
                raise _Unavailable()
        return outcome


async def test_sync_client_main_calls(sidecar: Sidecar) -> None:
    def scenario() -> None:
        with Client(address(sidecar)) as client:
            created = client.create_session("s1", policy(WINDOW), labels={"team": "a"})
            client.create_session("s2", labels={"team": "b"})
            handle = client.session("s1")
            for n in range(4):
                last = handle.append(turn(n), expected_version=None)
            context = handle.context()
            everything = list(handle.events(page_size=3))
            hits = list(handle.search("number0", roles=[Role.USER]))
            team_a = [s.session_id for s in client.list_sessions(label_filter={"team": "a"})]
            updated = client.update_session("s1", labels={"team": "c"})
            forced = handle.compact(force=True)
            fetched = handle.get()
            client.delete_session("s2")
            with pytest.raises(NotFoundError):
                client.get_session("s2")

        assert session_policy(created) == policy(WINDOW)
        assert last.compaction is not None
        assert last.compaction.compacted
        assert [e.text for e in context.events][-1] == "answer number3"
        assert context.version == last.version
        assert len(everything) == 8
        assert [h.event.text for h in hits] == ["question number0"]
        assert team_a == ["s1"]
        assert dict(updated.labels) == {"team": "c"}
        assert not forced.compacted  # the window already fits
        assert fetched.version == updated.version

    await asyncio.to_thread(scenario)


async def test_sync_restore_undoes_the_newest_compaction_and_lists_the_history(
    sidecar: Sidecar,
) -> None:
    def scenario() -> None:
        with Client(address(sidecar)) as client:
            client.create_session("s", policy(WINDOW))
            handle = client.session("s")
            for n in range(4):
                last = handle.append(turn(n))
            assert last.compaction is not None
            compacted = last.compaction
            hits = list(handle.search("number0", roles=[Role.USER]))
            assert [h.archived_by for h in hits] == [compacted.compaction_id]
            restored = handle.restore(expected_version=last.version)
            assert restored.strategy == "restore"
            assert restored.restored_ids == tuple(e.id for e in compacted.archived_events)
            assert len(handle.context().events) == 8
            history = list(handle.compactions(page_size=1))
            assert [r.strategy for r in history] == ["restore", "sliding_window"]
            assert history[0].restores == history[1].compaction_id
            with pytest.raises(FailedPreconditionError):
                handle.restore()  # nothing left standing

    await asyncio.to_thread(scenario)


async def test_sync_stream_answers_every_batch_by_index(sidecar: Sidecar) -> None:
    def scenario() -> list[Any]:
        with Client(address(sidecar)) as client:
            batches = [turn(0), [u(), t()], turn(1)]
            return list(client.session("s1").stream(batches, create_if_missing=True))

    messages = await asyncio.to_thread(scenario)

    assert [m.request_id for m in messages] == ["0", "1", "2"]
    assert isinstance(messages[0], Ack)
    assert isinstance(messages[1], RequestFailed)
    assert isinstance(messages[1].error, InvalidArgumentError)
    assert messages[1].error.field == "events[1].tool_results"
    assert isinstance(messages[2], Ack)
    assert [e.position for e in messages[2].result.events] == [3, 4]


async def test_sync_stream_and_watch_carry_background_compactions(tmp_path: Path) -> None:
    async with running(
        tmp_path, summarizer=FakeSummarizer("recap"), default_policy=json.dumps(SUMMARIZE)
    ) as sidecar:
        with Client(address(sidecar)) as client:
            await asyncio.to_thread(client.create_session, "s1")
            watch = client.session("s1").watch()
            first = asyncio.create_task(asyncio.to_thread(next, watch))
            await until_watched(sidecar, "s1")

            def stream() -> list[Any]:
                out: list[Any] = []
                for message in client.session("s1").stream(turn(n) for n in range(5)):
                    out.append(message)
                return out

            messages = await asyncio.to_thread(stream)
            update = await asyncio.wait_for(first, 5)
            watch.close()

    assert isinstance(update, CompactionResult)
    assert update.compacted
    acks = [m for m in messages if isinstance(m, Ack)]
    assert [m.request_id for m in acks] == ["0", "1", "2", "3", "4"]
    # The trigger fires with the 4th turn; when the server folds queued requests
    # into one transaction, the flag rides on the last ack of that transaction.
    assert any(a.result.compaction_scheduled for a in acks[3:])
    # The stream ends after the last ack; the compaction lands on it only if it came first.
    landed = [m for m in messages if isinstance(m, BackgroundCompaction)]
    assert all(m.result.compaction_id == update.compaction_id for m in landed)


async def test_sync_append_retried_after_a_lost_answer_stores_once(sidecar: Sidecar) -> None:
    lossy = LoseFirstAppendAnswer()
    fast = RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.02)

    def scenario() -> list[str]:
        with Client(address(sidecar), retry_policy=fast, interceptors=[lossy]) as client:
            handle = client.session("s1")
            handle.append([u("hi"), u("there")], create_if_missing=True)
            return [e.id for e in handle.events()]

    ids = await asyncio.to_thread(scenario)

    assert lossy.attempts == 2
    assert len(ids) == 2
    assert Counter(ids) == Counter(set(ids))


async def test_sync_context_read_in_parts_keeps_its_cache_prefix(tmp_path: Path) -> None:
    """The blocking ``context()`` on a window past the message limit: the id and the stable
    prefix are the header answer's, the events are the ones read in pages."""
    async with running(tmp_path, max_message_bytes=8192) as sidecar:

        def scenario() -> tuple[SessionContext, str, int]:
            with Client(address(sidecar)) as client:
                client.create_session(
                    "s", policy({"strategy": {"sliding_window": {"max_events": 4}}})
                )
                handle = client.session("s")
                for n in range(6):
                    handle.append([u(f"q{n} " + "x" * 1500, id=f"q{n}")])
                handle.compact(force=True)
                handle.append([u("y" * 1500, id="late")])
                header = client._stub.GetContext(pb.GetContextRequest(session_id="s"))
                assert header.content_omitted
                return handle.context(), header.cache_prefix_id, header.stable_prefix_tokens

        window, header_id, header_tokens = await asyncio.to_thread(scenario)

    assert [e.id for e in window.events] == ["q2", "q3", "q4", "q5", "late"]
    assert len(window.cache_prefix_id) == 32
    assert (window.cache_prefix_id, window.stable_prefix_tokens) == (header_id, header_tokens)
    assert window.stable_prefix_events == 4
    assert window.stable_prefix_tokens == sum(e.token_count for e in window.events[:4])


async def test_sync_errors_carry_code_and_details(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:

        def scenario() -> tuple[ClientError, ClientError]:
            with (
                Client(address(sidecar)) as anonymous,
                pytest.raises(UnauthenticatedError) as denied,
            ):
                anonymous.get_session("s1")
            with (
                Client(address(sidecar), token="s3cret") as member,
                pytest.raises(InvalidArgumentError) as bad,
            ):
                member.session("s1").append([t()], create_if_missing=True)
            return denied.value, bad.value

        denied, bad = await asyncio.to_thread(scenario)

    assert denied.code is grpc.StatusCode.UNAUTHENTICATED
    assert bad.field == "events[0].tool_results"


async def test_async_and_sync_clients_agree(client: AsyncClient, sidecar: Sidecar) -> None:
    await client.session("s1").append(turn(0), create_if_missing=True)

    def read() -> list[str]:
        with Client(address(sidecar)) as sync:
            return [e.id for e in sync.session("s1").events()]

    assert await asyncio.to_thread(read) == [e.id async for e in client.session("s1").events()]
