"""A stream's batch over many sessions: one engine call for the plain ones, answers in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.server.decoding import Undecodable
from tests.server.harness import running


def request(n: int, session: str, **fields: Any) -> pb.StreamEventsRequest:
    events = fields.pop("events", None) or [
        event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text=f"hello {n}")
    ]
    fields.setdefault("create_if_missing", True)
    return pb.StreamEventsRequest(request_id=f"r{n}", session_id=session, events=events, **fields)


async def test_plain_appends_to_many_sessions_are_one_engine_call(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        engine = sidecar.engine
        calls: list[list[str]] = []
        one_by_one: list[str] = []
        many, append = engine.append_many, engine.append

        async def counted_many(appends: Any) -> Any:
            calls.append([a.session_id for a in appends])
            return await many(appends)

        async def counted_append(session_id: str, *args: Any, **kwargs: Any) -> Any:
            one_by_one.append(session_id)
            return await append(session_id, *args, **kwargs)

        engine.append_many = counted_many  # type: ignore[method-assign]
        engine.append = counted_append  # type: ignore[method-assign]
        await engine.create_session("checked")
        broken = event_pb2.Event(id="bad", role=event_pb2.ROLE_UNSPECIFIED, text="x")
        batch: list[pb.StreamEventsRequest | Undecodable] = []
        for n in range(20):  # s0..s9 twice, interleaved: each folds into one append
            batch.append(request(n, f"s{n % 10}"))
        batch[13] = request(13, "s3", events=[broken])  # s3's second request is bad
        batch.insert(5, request(90, "checked", expected_version=1))
        batch.insert(7, Undecodable("truncated message"))
        batch.append(request(95, "ghost", create_if_missing=False))  # fails in the store
        answers = await sidecar.servicer.stream_batches.answer(batch)

        assert len(answers) == len(batch)
        sent = [r.request_id if isinstance(r, pb.StreamEventsRequest) else "" for r in batch]
        assert [a.request_id for a in answers] == sent
        # The plain sessions, together; s3's requests do not convert together (one is
        # bad), so they ran alone, each with its own answer.
        assert calls == [[f"s{n}" for n in range(10) if n != 3] + ["ghost"]]
        assert sorted(one_by_one) == ["checked", "s3"]  # r13 never reaches the engine
        kinds = {a.request_id: a.WhichOneof("result") for a in answers}
        assert kinds.pop("") == "error"  # the undecodable message
        assert kinds.pop("r13") == "error"
        assert kinds.pop("r95") == "error"
        assert set(kinds.values()) == {"append"}
        bad = next(a for a in answers if a.request_id == "r13")
        assert bad.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "events[0].role" in bad.error.message
        by_id = {a.request_id: a for a in answers}
        assert by_id["r95"].error.code == grpc.StatusCode.NOT_FOUND.value[0]
        assert by_id["r90"].append.version == 2
        for n in range(10):
            _, window = await sidecar.engine.context(f"s{n}")
            expected = [f"e{n}"] if n == 3 else [f"e{n}", f"e{n + 10}"]
            assert [e.id for e in window] == expected
            # Folded: the session's two requests are acknowledged at one version.
            if n != 3:
                assert by_id[f"r{n}"].append.version == by_id[f"r{n + 10}"].append.version == 1
            assert by_id[f"r{n}"].append.events[0].token_count > 0


async def test_one_session_in_a_batch_goes_alone(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        engine = sidecar.engine
        calls: list[object] = []
        many = engine.append_many

        async def counted_many(appends: Any) -> Any:
            calls.append(appends)
            return await many(appends)

        engine.append_many = counted_many  # type: ignore[method-assign]
        answers = await sidecar.servicer.stream_batches.answer(
            [request(n, "only") for n in range(5)]
        )
        assert [a.request_id for a in answers] == [f"r{n}" for n in range(5)]
        assert calls == []
