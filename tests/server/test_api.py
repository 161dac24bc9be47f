"""Every RPC end to end over a real socket, with the status codes bad input gets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from google.protobuf import field_mask_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from sidecar.server.app import Sidecar
from sidecar.summarizer.protocol import Summarizer
from tests.compaction.fakes import FakeSummarizer
from tests.engine.gates import GatedSummarizer
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

WINDOW = policy_pb2.CompactionPolicy(
    trigger=policy_pb2.Trigger(turn_count=3),
    strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=4)),
)
SUMMARY = policy_pb2.CompactionPolicy(
    trigger=policy_pb2.Trigger(turn_count=3),
    strategy=policy_pb2.Strategy(
        summarize=policy_pb2.Summarize(
            max_events_to_keep=4, overlap=1, shadow_prompt="Summary", max_summary_tokens=1
        )
    ),
)


def turn(n: int) -> list[event_pb2.Event]:
    return [
        event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"question {n} about invoices"),
        event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"answer {n}"),
    ]


def field_violations(error: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    fields: list[str] = []
    for detail in status.details if status else ():
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields.extend(v.field for v in bad.field_violations)
    return fields


async def expect(code: grpc.StatusCode, call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    assert info.value.code() == code, info.value.details()
    return info.value


async def snapshot(stub: Stub, session_id: str) -> tuple[int, list[str]]:
    session = await stub.GetSession(pb.GetSessionRequest(session_id=session_id))
    log = await stub.ListEvents(pb.ListEventsRequest(session_id=session_id, page_size=1000))
    return session.version, [f"{e.id}:{e.archived}" for e in log.events]


# -- sessions ---------------------------------------------------------------


async def test_session_lifecycle(stub: Stub) -> None:
    created = await stub.CreateSession(
        pb.CreateSessionRequest(session_id="s1", policy=WINDOW, labels={"team": "a"})
    )
    assert created.version == 1
    assert created.policy.strategy.sliding_window.max_events == 4
    await expect(
        grpc.StatusCode.ALREADY_EXISTS, stub.CreateSession(pb.CreateSessionRequest(session_id="s1"))
    )
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s2", labels={"team": "b"}))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s3", labels={"team": "a"}))
    page = await stub.ListSessions(pb.ListSessionsRequest(label_filter={"team": "a"}, page_size=1))
    assert [s.session_id for s in page.sessions] == ["s1"]
    page = await stub.ListSessions(
        pb.ListSessionsRequest(
            label_filter={"team": "a"}, page_size=1, page_token=page.next_page_token
        )
    )
    assert [s.session_id for s in page.sessions] == ["s3"]
    turns = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=3))
    )
    updated = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="s1", labels={"team": "c"}, policy=turns),
            update_mask=field_mask_pb2.FieldMask(paths=["labels", "policy"]),
        )
    )
    assert dict(updated.labels) == {"team": "c"}
    assert updated.policy.strategy.turn_window.max_turns == 3
    assert updated.version == 2
    await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s1"))
    await expect(grpc.StatusCode.NOT_FOUND, stub.GetSession(pb.GetSessionRequest(session_id="s1")))


async def test_default_policy_comes_from_the_server(stub: Stub) -> None:
    session = await stub.CreateSession(pb.CreateSessionRequest(session_id="d"))
    assert session.policy.trigger.token_count == 8000
    assert session.policy.strategy.HasField("token_budget")


async def test_update_mask_is_checked(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s", version=9),
                update_mask=field_mask_pb2.FieldMask(paths=["version"]),
            )
        ),
    )
    assert field_violations(error) == ["update_mask.paths"]
    # A mask of a million repeats is refused before a list of them is made.
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s", labels={"a": "b"}),
                update_mask=field_mask_pb2.FieldMask(paths=["labels"] * 17),
            )
        ),
    )
    assert field_violations(error) == ["update_mask.paths"]
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert dict(session.labels) == {}  # nothing changed
    twice = field_mask_pb2.FieldMask(paths=["labels", "labels"])  # a repeat is harmless
    updated = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="s", labels={"a": "b"}), update_mask=twice
        )
    )
    assert dict(updated.labels) == {"a": "b"}


# -- appends and context ------------------------------------------------------


async def test_append_compacts_inline_and_context_returns_the_window(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    for n in range(3):
        ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(n)))
        assert not ack.HasField("compaction")
    ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
    assert ack.compaction.compacted
    assert ack.compaction.archived_event_count == 4
    assert [e.position for e in ack.events] == [7, 8]
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert [e.id for e in context.events] == ["u2", "a2", "u3", "a3"]
    assert context.version == ack.version
    assert context.turn_count == 2
    assert context.token_count == sum(e.token_count for e in context.events)
    log = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=3))
    assert [e.id for e in log.events] == ["u0", "a0", "u1"]
    assert all(e.archived for e in log.events)
    active = await stub.ListEvents(pb.ListEventsRequest(session_id="s", active_only=True))
    assert [e.id for e in active.events] == ["u2", "a2", "u3", "a3"]


async def test_append_retry_is_idempotent(stub: Stub) -> None:
    request = pb.AppendEventsRequest(session_id="s", events=turn(0), create_if_missing=True)
    first = await stub.AppendEvents(request)
    again = await stub.AppendEvents(request)
    assert again.version == first.version
    assert [e.position for e in again.events] == [e.position for e in first.events]


async def test_a_create_time_comes_back_to_the_microsecond_across_its_whole_range(
    stub: Stub,
) -> None:
    """Converted through a float, a time far from 1970 lost microseconds (up to 30 in year
    9999), and the last microsecond of 9999 came back as year 10000: no valid Timestamp."""
    times = [
        (253402300799, 999_999_000),  # the last microsecond a Timestamp holds
        (253402300799, 123_456_000),
        (9_000_000_000, 1_000),
        (-62135596800, 999_999_000),  # in year 1
        (-1, 500_000_000),
        (1_700_000_000, 654_321_000),
    ]
    events = [
        event_pb2.Event(id=f"t{n}", role=event_pb2.ROLE_USER, text="when")
        for n in range(len(times))
    ]
    for event, (seconds, nanos) in zip(events, times, strict=True):
        event.create_time.seconds = seconds
        event.create_time.nanos = nanos
    ack = await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=events, create_if_missing=True)
    )
    log = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    for answer in (ack.events, log.events):
        assert [(e.create_time.seconds, e.create_time.nanos) for e in answer] == times


async def test_conflicting_payload_under_an_existing_id(stub: Stub) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=turn(0), create_if_missing=True)
    )
    before = await snapshot(stub, "s")
    changed = event_pb2.Event(id="u0", role=event_pb2.ROLE_USER, text="something else")
    await expect(
        grpc.StatusCode.ALREADY_EXISTS,
        stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[*turn(1), changed])),
    )
    assert await snapshot(stub, "s") == before


async def test_version_mismatch_is_failed_precondition_with_the_current_version(stub: Stub) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=turn(0), create_if_missing=True)
    )
    error = await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=turn(1), expected_version=7)
        ),
    )
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    info = error_details_pb2.ErrorInfo()
    assert status is not None
    assert status.details[0].Unpack(info)
    assert info.metadata["current_version"] == "1"


@pytest.mark.parametrize(
    ("events", "field"),
    [
        ([event_pb2.Event(id="x", text="no role")], "events[0].role"),
        ([event_pb2.Event(id="x", role=cast(Any, 99))], "events[0].role"),
        ([], "events"),
        ([event_pb2.Event(id="bad id!", role=event_pb2.ROLE_USER)], "events[0].id"),
        (
            [event_pb2.Event(id="t", role=event_pb2.ROLE_TOOL)],
            "events[0].tool_results",
        ),
        (
            [
                event_pb2.Event(
                    id="c",
                    role=event_pb2.ROLE_ASSISTANT,
                    tool_calls=[event_pb2.ToolCall(id="1", name="f", arguments_json="{nope")],
                )
            ],
            "events[0].tool_calls[0].arguments_json",
        ),
        (
            [event_pb2.Event(id="p", role=event_pb2.ROLE_USER, parts=[event_pb2.Part(data=b"x")])],
            "events[0].parts[0].mime_type",
        ),
        *(
            (
                [
                    event_pb2.Event(
                        id="p",
                        role=event_pb2.ROLE_USER,
                        parts=[event_pb2.Part(mime_type=mime, data=b"x")],
                    )
                ],
                "events[0].parts[0].mime_type",
            )
            for mime in ("image/png\x00", "image/p\nng", "image/" + "x" * 250, "image/pñg")
        ),
    ],
)
async def test_bad_events_name_the_field_and_store_nothing(
    stub: Stub, events: Sequence[event_pb2.Event], field: str
) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=turn(0), create_if_missing=True)
    )
    before = await snapshot(stub, "s")
    batch = [*turn(1), *events] if events else []  # good events first: the batch is all or nothing
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=batch)),
    )
    assert [f.replace("events[2]", "events[0]") for f in field_violations(error)] == [field]
    assert await snapshot(stub, "s") == before


async def test_bad_session_ids_and_missing_sessions(stub: Stub) -> None:
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.AppendEvents(
            pb.AppendEventsRequest(session_id="'; DROP TABLE events;--", events=turn(0))
        ),
    )
    assert field_violations(error) == ["session_id"]
    await expect(
        grpc.StatusCode.NOT_FOUND,
        stub.AppendEvents(pb.AppendEventsRequest(session_id="missing", events=turn(0))),
    )
    await expect(
        grpc.StatusCode.NOT_FOUND, stub.GetContext(pb.GetContextRequest(session_id="missing"))
    )


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (
            policy_pb2.CompactionPolicy(
                strategy=policy_pb2.Strategy(
                    summarize=policy_pb2.Summarize(max_events_to_keep=2, overlap=2)
                )
            ),
            "policy.strategy.summarize.overlap",
        ),
        (
            policy_pb2.CompactionPolicy(
                trigger=policy_pb2.Trigger(turn_count=0),
                strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow()),
            ),
            "policy.trigger.turn_count",
        ),
        (policy_pb2.CompactionPolicy(trigger=policy_pb2.Trigger(always=True)), "policy.strategy"),
        (
            policy_pb2.CompactionPolicy(
                strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=-3))
            ),
            "policy.strategy.sliding_window.max_events",
        ),
        # A summarizer model no summarizer can call: 20,000 characters were echoed whole
        # in the summarizer's error, past what grpc lets a status carry, and Gemini's SDK
        # refuses '..' with a ValueError, which was INTERNAL.
        *(
            (
                policy_pb2.CompactionPolicy(
                    strategy=policy_pb2.Strategy(summarize=policy_pb2.Summarize(model=model))
                ),
                "policy.strategy.summarize.model",
            )
            for model in ("m" * 20_000, "../../v1beta/models/x", "gemini\x00", "a?b")
        ),
        (
            policy_pb2.CompactionPolicy(
                strategy=policy_pb2.Strategy(
                    pipeline=policy_pb2.Pipeline(
                        steps=[
                            policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow()),
                            policy_pb2.Strategy(summarize=policy_pb2.Summarize(model="a b")),
                        ]
                    )
                )
            ),
            "policy.strategy.pipeline.steps[1].summarize.model",
        ),
    ],
)
async def test_bad_policies_name_the_field(
    stub: Stub, policy: policy_pb2.CompactionPolicy, field: str
) -> None:
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.CreateSession(pb.CreateSessionRequest(session_id="p", policy=policy)),
    )
    assert field_violations(error) == [field]
    await expect(grpc.StatusCode.NOT_FOUND, stub.GetSession(pb.GetSessionRequest(session_id="p")))


async def test_size_limits_are_resource_exhausted(tmp_path: Path) -> None:
    async with running(tmp_path, max_event_bytes=1000, max_message_bytes=64 * 1024) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=turn(0), create_if_missing=True)
            )
            before = await snapshot(stub, "s")
            big = event_pb2.Event(id="big", role=event_pb2.ROLE_USER, text="x" * 2000)
            error = await expect(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[big])),
            )
            assert "max_event_bytes" in (error.details() or "")
            huge = event_pb2.Event(id="huge", role=event_pb2.ROLE_USER, text="x" * 100_000)
            await expect(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[huge])),
            )
            assert await snapshot(stub, "s") == before


# -- streaming ----------------------------------------------------------------


async def test_stream_acks_in_order_with_errors_and_background_compactions(tmp_path: Path) -> None:
    async with running(tmp_path, summarizer=FakeSummarizer("rolling summary")) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=SUMMARY))
            call: Any = stub.StreamEvents()  # type: ignore[call-arg]
            for n in range(5):
                await call.write(
                    pb.StreamEventsRequest(request_id=f"r{n}", session_id="s", events=turn(n))
                )
            await call.write(
                pb.StreamEventsRequest(
                    request_id="bad", session_id="s", events=[event_pb2.Event(id="x")]
                )
            )
            await call.write(
                pb.StreamEventsRequest(request_id="r5", session_id="s", events=turn(5))
            )
            acks: list[str] = []
            errors: dict[str, int] = {}
            compactions: list[pb.StreamEventsResponse] = []
            while len(acks) + len(errors) < 7 or not compactions:
                response = await asyncio.wait_for(call.read(), 5)
                assert response is not grpc.aio.EOF  # type: ignore[attr-defined]
                kind = response.WhichOneof("result")
                if kind == "append":
                    acks.append(response.request_id)
                elif kind == "error":
                    errors[response.request_id] = response.error.code
                else:
                    compactions.append(response)
            await call.done_writing()
            assert acks == ["r0", "r1", "r2", "r3", "r4", "r5"]
            assert errors == {"bad": grpc.StatusCode.INVALID_ARGUMENT.value[0]}
            assert compactions[0].session_id == "s"
            assert compactions[0].compaction.compacted
            assert compactions[0].compaction.strategy == "summarize"
            context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
            assert any(e.synthetic and e.text == "rolling summary" for e in context.events)


async def test_a_stream_relays_the_results_of_a_session_deleted_and_created_again(
    tmp_path: Path,
) -> None:
    """A stream's relay of a session's results ends with the session; appending to the one
    created again under its id relays that one's results."""
    async with running(tmp_path, summarizer=FakeSummarizer("rolling summary")) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            call: Any = stub.StreamEvents()  # type: ignore[call-arg]

            async def compacted_after_appends(tag: str) -> None:
                await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=SUMMARY))
                for n in range(5):
                    await call.write(
                        pb.StreamEventsRequest(
                            request_id=f"{tag}{n}", session_id="s", events=turn(n)
                        )
                    )
                acks = compactions = 0
                while acks < 5 or not compactions:
                    response = await asyncio.wait_for(call.read(), 5)
                    assert response is not grpc.aio.EOF  # type: ignore[attr-defined]
                    if response.WhichOneof("result") == "append":
                        acks += 1
                    else:
                        assert response.compaction.compacted
                        compactions += 1

            await compacted_after_appends("first")
            await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
            await compacted_after_appends("again")
            await call.done_writing()


async def test_stream_interleaving_sessions_answers_in_request_order(tmp_path: Path) -> None:
    """Requests for many sessions, sent back to back, run side by side in the server;
    the answers still come in request order, each session's events in its order,
    and a bad request fails alone."""
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            requests = [
                pb.StreamEventsRequest(
                    request_id=f"r{n}",
                    session_id=f"s{n % 5}",
                    create_if_missing=True,
                    events=[event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text="hi")],
                )
                for n in range(60)
            ]
            requests[31].expected_version = 99  # s1 is never at 99

            async def send() -> AsyncIterator[pb.StreamEventsRequest]:
                for request in requests:
                    yield request

            answers = [r async for r in stub.StreamEvents(send())]
            assert [a.request_id for a in answers] == [r.request_id for r in requests]
            assert answers[31].WhichOneof("result") == "error"
            assert answers[31].error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
            for session in range(5):
                listed = await stub.ListEvents(pb.ListEventsRequest(session_id=f"s{session}"))
                expected = [f"e{n}" for n in range(session, 60, 5) if n != 31]
                assert [e.id for e in listed.events] == expected
                assert [e.position for e in listed.events] == list(range(1, len(expected) + 1))


async def test_stream_whose_client_stops_reading_is_held_back(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(
                pb.CreateSessionRequest(
                    session_id="s",
                    policy=policy_pb2.CompactionPolicy(
                        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow())
                    ),
                )
            )
            sent = 3000
            payload = "y" * 8000

            async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
                for n in range(sent):
                    event = event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text=payload)
                    yield pb.StreamEventsRequest(request_id=str(n), session_id="s", events=[event])

            call = stub.StreamEvents(requests())
            await asyncio.sleep(2.0)  # the client reads nothing meanwhile
            stored = (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).total_event_count
            assert 0 < stored < sent  # the server stopped taking requests it cannot answer
            received = 0
            async for _ in call:
                received += 1
            assert received == sent
            final = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
            assert final.total_event_count == sent


# -- compaction and watching ---------------------------------------------------


async def test_compact_with_override_and_watchers(stub: Stub) -> None:
    await stub.CreateSession(
        pb.CreateSessionRequest(
            session_id="s",
            policy=policy_pb2.CompactionPolicy(
                strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=5))
            ),
        )
    )
    for n in range(4):
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(n)))
    watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
    not_fired = await stub.Compact(pb.CompactRequest(session_id="s"))
    assert not_fired.result.skipped_reason == "trigger_not_fired"
    within = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    assert within.result.skipped_reason == "within_limit"
    override = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1))
    )
    done = await stub.Compact(pb.CompactRequest(session_id="s", force=True, policy=override))
    assert done.result.compacted
    assert [e.id for e in done.result.active_events] == ["u3", "a3"]
    seen: Any = await asyncio.wait_for(watch.read(), 5)
    assert seen.compaction.compaction_id == done.result.compaction_id
    watch.cancel()
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.Compact(pb.CompactRequest(session_id="s", force=True, expected_version=1)),
    )


async def test_watch_of_a_missing_session_is_not_found(stub: Stub) -> None:
    call = stub.WatchSession(pb.WatchSessionRequest(session_id="nope"))
    await expect(grpc.StatusCode.NOT_FOUND, call.read())


async def test_a_watch_ends_not_found_when_its_session_is_deleted(stub: Stub) -> None:
    """A watch never outlives its session: deleting it ends the call at once, as NOT_FOUND."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
    await watch.initial_metadata()  # the watch is in place
    await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
    error = await expect(grpc.StatusCode.NOT_FOUND, asyncio.wait_for(watch.read(), 5))
    assert "'s'" in (error.details() or "")


@pytest.mark.parametrize("again", [False, True], ids=["deleted", "created-again"])
async def test_a_watch_ends_when_another_server_deletes_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, again: bool
) -> None:
    """Deleted through another server on the same store (or deleted and created again under
    its id), the session's watch here ends at its next check, as NOT_FOUND."""
    monkeypatch.setattr("sidecar.server.servicer.WATCHED_SESSION_CHECK_S", 0.2)
    async with running(tmp_path) as here, running(tmp_path) as there:
        async with (
            grpc.aio.insecure_channel(address(here)) as near,
            grpc.aio.insecure_channel(address(there)) as far,
        ):
            stub: Stub = pb_grpc.CompactionServiceStub(near)
            other: Stub = pb_grpc.CompactionServiceStub(far)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
            watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
            await watch.initial_metadata()
            await other.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
            if again:
                await other.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
            await expect(grpc.StatusCode.NOT_FOUND, asyncio.wait_for(watch.read(), 10))


async def test_summarizer_failures_map_to_their_codes_and_change_nothing(tmp_path: Path) -> None:
    from sidecar.errors import SummarizerUnavailable

    policy = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(
            summarize=policy_pb2.Summarize(
                max_events_to_keep=2, overlap=1, shadow_prompt="Summary", max_summary_tokens=1
            )
        )
    )
    cases: list[tuple[Summarizer, grpc.StatusCode]] = [
        (
            FakeSummarizer(error=SummarizerUnavailable("gemini said 503")),
            grpc.StatusCode.UNAVAILABLE,
        ),
        (GatedSummarizer(), grpc.StatusCode.DEADLINE_EXCEEDED),
    ]
    for summarizer, code in cases:
        async with running(tmp_path / code.name, summarizer=summarizer) as sidecar:
            async with grpc.aio.insecure_channel(address(sidecar)) as channel:
                stub = pb_grpc.CompactionServiceStub(channel)
                await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
                for n in range(4):
                    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(n)))
                before = await snapshot(stub, "s")
                await expect(
                    code, stub.Compact(pb.CompactRequest(session_id="s", force=True), timeout=1.0)
                )
                assert await snapshot(stub, "s") == before


# -- search -------------------------------------------------------------------


async def test_search_finds_archived_events_and_survives_query_syntax(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    for n in range(4):
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(n)))
    hits = await stub.SearchEvents(pb.SearchEventsRequest(query="invoices", session_id="s"))
    assert sorted(h.event.id for h in hits.hits) == ["u0", "u1"]
    assert all(h.event.archived for h in hits.hits)
    assert all("invoices" in h.snippet for h in hits.hits)
    both = await stub.SearchEvents(
        pb.SearchEventsRequest(query="invoices", session_id="s", include_active=True)
    )
    assert len(both.hits) == 4
    users = await stub.SearchEvents(
        pb.SearchEventsRequest(query="answer", roles=[event_pb2.ROLE_USER], include_active=True)
    )
    assert list(users.hits) == []
    for hostile in ['"', "AND (", "NEAR(", "*", "'; DROP TABLE events; --", "\x00"]:
        await stub.SearchEvents(pb.SearchEventsRequest(query=hostile))
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT, stub.SearchEvents(pb.SearchEventsRequest(query=" "))
    )
    assert field_violations(error) == ["query"]
    assert len((await stub.ListEvents(pb.ListEventsRequest(session_id="s"))).events) == 8


async def test_a_role_filter_is_its_distinct_roles(stub: Stub) -> None:
    """A role repeated past SQLite's limit on parameters (32,766 by default, 250,000 in
    some builds) filters by that role: it was UNAVAILABLE "too many SQL variables", which
    clients retry."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(0)))
    many = [event_pb2.ROLE_ASSISTANT, event_pb2.ROLE_USER] * 130_000
    hits = await stub.SearchEvents(
        pb.SearchEventsRequest(query="invoices", roles=many, include_active=True)
    )
    assert [h.event.id for h in hits.hits] == ["u0"]
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.SearchEvents(pb.SearchEventsRequest(query="invoices", roles=[*many, cast(Any, 9)])),
    )
    assert field_violations(error) == [f"roles[{len(many)}]"]


async def test_stream_folds_queued_appends_but_answers_each_request(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    sent = 300

    async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
        for n in range(sent):
            bad = n == 150  # one bad request in the middle fails alone
            role = event_pb2.ROLE_UNSPECIFIED if bad else event_pb2.ROLE_USER
            event = event_pb2.Event(id=f"e{n}", role=role, text="hi")
            yield pb.StreamEventsRequest(request_id=str(n), session_id="s", events=[event])

    acks: dict[str, pb.StreamEventsResponse] = {}
    async for response in stub.StreamEvents(requests()):
        acks[response.request_id] = response
    assert sorted(acks, key=int) == [str(n) for n in range(sent)]
    assert acks["150"].WhichOneof("result") == "error"
    good = [acks[str(n)] for n in range(sent) if n != 150]
    assert all(a.WhichOneof("result") == "append" for a in good)
    assert all(
        a.append.events[0].id == f"e{n}"
        for n, a in zip([n for n in range(sent) if n != 150], good, strict=True)
    )
    versions = [a.append.version for a in good]
    assert versions == sorted(versions)  # folded requests share a version, never go back
    log = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=1000))
    assert [e.id for e in log.events] == [f"e{n}" for n in range(sent) if n != 150]


async def test_summarizing_policy_on_a_server_without_summarizer(stub: Stub) -> None:
    """Refused up front, not by a failure on every append past the trigger."""
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.CreateSession(pb.CreateSessionRequest(session_id="sum", policy=SUMMARY)),
    )
    await stub.CreateSession(pb.CreateSessionRequest(session_id="sum"))
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="sum", policy=SUMMARY),
                update_mask=field_mask_pb2.FieldMask(paths=["policy"]),
            )
        ),
    )
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.Compact(pb.CompactRequest(session_id="sum", force=True, policy=SUMMARY)),
    )


@pytest.mark.parametrize(
    ("updates", "code", "field"),
    [
        (
            [pb.LabelUpdate(set={"a": "1"}), pb.LabelUpdate(session_id="lu", set={"b": "1"})],
            grpc.StatusCode.INVALID_ARGUMENT,
            "label_updates[1].session_id",
        ),
        (
            [pb.LabelUpdate(set={"a": "1"}, remove=["a"])],
            grpc.StatusCode.INVALID_ARGUMENT,
            "label_updates[0].remove",
        ),
        (
            [pb.LabelUpdate(session_id="bad id!", set={"a": "1"})],
            grpc.StatusCode.INVALID_ARGUMENT,
            "label_updates[0].session_id",
        ),
        (
            [pb.LabelUpdate(session_id="other", set={f"k{i}": "v" for i in range(65)})],
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            None,
        ),
        (
            [pb.LabelUpdate(session_id="other", remove=[f"k{i}" for i in range(65)])],
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            None,
        ),
        (
            [pb.LabelUpdate(session_id="other", set={"a": "1"}, expected_version=3)],
            grpc.StatusCode.FAILED_PRECONDITION,
            None,
        ),
    ],
)
async def test_a_refused_label_update_stores_nothing(
    stub: Stub, updates: list[pb.LabelUpdate], code: grpc.StatusCode, field: str | None
) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="lu", events=turn(0), create_if_missing=True)
    )
    before = await snapshot(stub, "lu")
    error = await expect(
        code,
        stub.AppendEvents(
            pb.AppendEventsRequest(session_id="lu", events=turn(1), label_updates=updates)
        ),
    )
    if field is not None:
        assert field_violations(error) == [field]
        assert field in (error.details() or "")
    assert await snapshot(stub, "lu") == before
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="lu"))).labels == {}
    await expect(
        grpc.StatusCode.NOT_FOUND, stub.GetSession(pb.GetSessionRequest(session_id="other"))
    )


def quota_subjects(error: grpc.aio.AioRpcError) -> list[str]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    subjects: list[str] = []
    for detail in status.details if status else ():
        quota = error_details_pb2.QuotaFailure()
        if detail.Unpack(quota):
            subjects.extend(v.subject for v in quota.violations)
    return subjects


async def test_label_counts_are_refused_before_anything_is_built_from_them(
    stub: Stub, sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request far past the label counts (100,000 empty label updates in 200 kB, or a map of
    100,000 labels) is refused from its counts: converted first, a million of them held the
    event loop, and every other client, for seconds."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("built before its counts were checked")

    monkeypatch.setattr("sidecar.server.appends.LabelUpdate", never)
    monkeypatch.setattr(sidecar.engine, "create_session", never)
    monkeypatch.setattr(sidecar.engine, "update_session", never)
    many = {f"k{i}": "v" for i in range(100_000)}
    error = await expect(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        stub.AppendEvents(
            pb.AppendEventsRequest(
                session_id="s",
                events=turn(0),
                create_if_missing=True,
                label_updates=[pb.LabelUpdate()] * 100_000,
            )
        ),
    )
    assert quota_subjects(error) == ["max_label_updates"]
    for updates in ([pb.LabelUpdate(set=many)], [pb.LabelUpdate(remove=list(many))]):
        error = await expect(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="s", events=turn(0), create_if_missing=True, label_updates=updates
                )
            ),
        )
        assert quota_subjects(error) == ["max_labels"]
    error = await expect(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        stub.CreateSession(pb.CreateSessionRequest(session_id="s", labels=many)),
    )
    assert quota_subjects(error) == ["max_labels"]
    error = await expect(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s", labels=many),
                update_mask=field_mask_pb2.FieldMask(paths=["labels"]),
            )
        ),
    )
    assert quota_subjects(error) == ["max_labels"]
    await expect(grpc.StatusCode.NOT_FOUND, stub.GetSession(pb.GetSessionRequest(session_id="s")))
