"""Regression tests for the bugs the fuzzer found (all fixed), one minimal repro each.

Each states the behaviour the API promises: bad input is INVALID_ARGUMENT,
never INTERNAL or UNKNOWN, and a composite trigger round-trips.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.store.paging import encode_token, fingerprint
from tests.reliability import wire
from tests.server.harness import address, running

YEAR_10000 = 253402300800


async def _code(call: object) -> grpc.StatusCode:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_undecodable_request_is_invalid_argument(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            call = channel.unary_unary("/compaction.v1.CompactionService/GetSession", None, None)
            raw = wire.length_delimited(1, b"\xff\xfe")  # session_id: invalid UTF-8
            assert await _code(call(raw, timeout=10)) == grpc.StatusCode.INVALID_ARGUMENT


async def test_timestamp_out_of_range_is_invalid_argument(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            late = Timestamp(seconds=YEAR_10000)
            event = event_pb2.Event(id="e", role=event_pb2.ROLE_USER, text="hi", create_time=late)
            append = stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=[event], create_if_missing=True)
            )
            assert await _code(append) == grpc.StatusCode.INVALID_ARGUMENT
            search = stub.SearchEvents(pb.SearchEventsRequest(query="hi", since=late))
            assert await _code(search) == grpc.StatusCode.INVALID_ARGUMENT


async def test_forged_page_tokens_are_invalid_argument(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            event = event_pb2.Event(id="e", role=event_pb2.ROLE_USER, text="hi")
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=[event], create_if_missing=True)
            )
            overflow = encode_token("events", fingerprint("s", True), (10**30, 1))
            nested = base64.urlsafe_b64encode(b"[" * 3000).decode().rstrip("=")
            for token in (overflow, nested):
                listing = stub.ListEvents(pb.ListEventsRequest(session_id="s", page_token=token))
                assert await _code(listing) == grpc.StatusCode.INVALID_ARGUMENT, token[:40]


def _any_of() -> policy_pb2.CompactionPolicy:
    trigger = policy_pb2.Trigger(
        any_of=policy_pb2.TriggerList(
            triggers=[policy_pb2.Trigger(turn_count=3), policy_pb2.Trigger(token_count=500)]
        )
    )
    strategy = policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=6))
    return policy_pb2.CompactionPolicy(trigger=trigger, strategy=strategy)


async def test_a_composite_trigger_is_accepted_over_the_api(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            created = await stub.CreateSession(
                pb.CreateSessionRequest(session_id="s", policy=_any_of())
            )
            expected = _any_of()
            expected.strategy.boundary = policy_pb2.BOUNDARY_TURN  # the default, made explicit
            assert created.policy == expected


async def test_a_composite_default_policy_is_readable_over_the_api(tmp_path: Path) -> None:
    policy = {
        "trigger": {"any_of": [{"turn_count": 3}, {"token_count": 500}]},
        "strategy": {"sliding_window": {"max_events": 6}},
    }
    async with running(tmp_path, default_policy=json.dumps(policy)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            created = stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
            assert await _code(created) == grpc.StatusCode.OK


async def test_an_undecodable_message_in_a_stream_gets_its_own_error_and_the_stream_goes_on(
    tmp_path: Path,
) -> None:
    """It once aborted the call from the request iterator's task, racing the answers
    already on their way: the call could hang until its deadline."""

    def request(n: int) -> bytes:
        event = event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text="hi")
        return pb.StreamEventsRequest(
            request_id=f"r{n}", session_id="s", create_if_missing=True, events=[event]
        ).SerializeToString()

    bad = wire.length_delimited(2, b"\xff\xfe")  # session_id: invalid UTF-8
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            call = channel.stream_stream(
                "/compaction.v1.CompactionService/StreamEvents", None, None
            )

            async def messages() -> AsyncIterator[bytes]:
                for raw in (request(1), bad, request(2)):
                    yield raw

            answers = [
                pb.StreamEventsResponse.FromString(raw)
                async for raw in call(messages(), timeout=10)
            ]
    assert [a.WhichOneof("result") for a in answers] == ["append", "error", "append"]
    assert answers[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert [a.request_id for a in answers] == ["r1", "", "r2"]
