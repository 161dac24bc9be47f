"""A large request's counts are checked on the wire, before protobuf parses it.

Parsing holds the event loop: 16 MiB of empty events took seconds, during
which no other client was answered. These tests hold that such a request is
refused unparsed, with the limit it is past, and that no request the
limits admit is ever refused by the walk (the property test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.policy import MAX_TRIGGERS
from sidecar.engine.validation import (
    MAX_LABEL_UPDATES,
    Limits,
    check_label_update_counts,
    check_shape,
)
from sidecar.errors import InvalidConfig, LimitExceeded, SessionNotFound
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from sidecar.server.decoding import DecodeErrorInterceptor, Refused
from sidecar.server.wire_counts import SCAN_ABOVE, WireCounts, echoed_ids, fields_budget
from tests.reliability import wire
from tests.server.harness import address, running

APPEND = pb.AppendEventsRequest.DESCRIPTOR
EVENTS = 2  # AppendEventsRequest.events
PAD = "x" * (SCAN_ABOVE + 1)  # one event's text: the request is walked


def empty_events(count: int) -> bytes:
    """An append of ``count`` empty events: two bytes each, the cheapest to send."""
    return wire.length_delimited(EVENTS, b"") * count


def problem(raw: bytes, limits: Limits | None = None) -> LimitExceeded | None:
    """The limit an append is past on the wire (an append's problems are all limits')."""
    found = WireCounts(limits or Limits()).problem(raw, APPEND)
    assert found is None or isinstance(found, LimitExceeded), found
    return found


def test_millions_of_empty_events_are_refused_naming_the_events_limit() -> None:
    found = problem(empty_events(8 << 20))
    assert found is not None
    assert found.limit == "max_events_per_append"
    assert "events has more than 1000 entries" in str(found)


def test_an_events_metadata_past_its_limit_is_named_with_its_path() -> None:
    request = pb.AppendEventsRequest(session_id="s")
    request.events.add(id="a", text=PAD)
    crowded = request.events.add(id="b")
    for n in range(65):
        crowded.metadata[f"k{n}"] = "v"
    found = problem(request.SerializeToString())
    assert found is not None
    assert found.limit == "max_metadata_entries"
    assert "events[1].metadata has more than 64 entries" in str(found)


def test_items_are_counted_across_events() -> None:
    limits = Limits(max_items_per_append=10)
    request = pb.AppendEventsRequest(session_id="s")
    request.events.add(id="pad", text=PAD)
    for n in range(3):
        event = request.events.add(id=f"e{n}")
        for m in range(4):
            event.tool_calls.add(id=f"c{n}.{m}", name="t")
    found = problem(request.SerializeToString(), limits)
    assert found is not None
    assert found.limit == "max_items_per_append"
    assert str(found).startswith("max_items_per_append: events[3].tool_calls")


def test_label_updates_past_their_count_are_refused() -> None:
    request = pb.AppendEventsRequest(session_id="s")
    request.events.add(id="pad", text=PAD)
    for n in range(MAX_LABEL_UPDATES + 1):
        request.label_updates.add(session_id=f"s{n}")
    found = problem(request.SerializeToString())
    assert found is not None
    assert found.limit == "max_label_updates"


def test_fields_past_what_the_limits_admit_are_refused_whatever_they_are() -> None:
    """Unknown fields, or a singular field sent again and again, bound no count of their
    own: the request's fields in all are bounded."""
    unknown = wire.varint_field(99, 0) * (fields_budget(Limits()) + 1)
    padding = wire.length_delimited(1, b"s")
    found = problem(padding + unknown)
    assert found is not None
    assert found.limit == "request_fields"
    repeated_time = wire.length_delimited(11, b"") * 200_000  # Event.create_time, again
    found = problem(wire.length_delimited(EVENTS, repeated_time))
    assert found is not None
    assert found.limit == "request_fields"


def test_a_policys_trigger_list_is_refused_as_the_policys_own_check_refuses_it() -> None:
    """INVALID_ARGUMENT naming the list, wherever the policy travels (here UpdateSession's)."""
    request = pb.UpdateSessionRequest(session=session_pb2.Session(session_id="s"))
    request.session.policy.trigger.any_of.triggers.extend(
        [policy_pb2.Trigger(turn_count=5)] * 100_000
    )
    found = WireCounts(Limits()).problem(
        request.SerializeToString(), pb.UpdateSessionRequest.DESCRIPTOR
    )
    assert isinstance(found, InvalidConfig)
    assert found.field == "session.policy.trigger.any_of"
    assert str(MAX_TRIGGERS) in found.description


def test_a_refused_requests_ids_are_read_off_the_wire_for_its_answer() -> None:
    request = pb.StreamEventsRequest(request_id="r7", session_id="s1")
    raw = request.SerializeToString() + empty_events(10)
    assert echoed_ids(raw, pb.StreamEventsRequest.DESCRIPTOR) == {
        "request_id": "r7",
        "session_id": "s1",
    }
    not_utf8 = wire.length_delimited(1, b"\xff") + wire.length_delimited(2, b"s1")
    assert echoed_ids(not_utf8, pb.StreamEventsRequest.DESCRIPTOR) == {}


def test_small_requests_and_bytes_that_do_not_decode_are_left_to_the_parser() -> None:
    """A small request holds too few fields to cost anything; bytes the walk cannot read
    are the parser's to refuse (INVALID_ARGUMENT, as before)."""
    assert problem(empty_events(SCAN_ABOVE // 2)) is None  # past the limit, but small
    truncated = wire.tag(EVENTS, wire.LEN) + wire.varint(10 << 20) + b"\x00" * SCAN_ABOVE
    assert problem(truncated) is None


def test_the_largest_append_the_limits_admit_passes() -> None:
    limits = Limits()
    request = pb.AppendEventsRequest(session_id="s", expected_version=3, create_if_missing=True)
    items = limits.max_items_per_append
    for n in range(limits.max_events_per_append):
        event = request.events.add(id=f"e{n}", role=event_pb2.ROLE_USER, text="t", author="a")
        event.create_time.FromSeconds(1_700_000_000)
        for m in range(limits.max_metadata_entries):
            event.metadata[f"k{m}"] = "v"
        for m in range(min(items, 5)):
            event.tool_calls.add(id=f"c{m}", name="t", arguments_json="{}")
        items -= min(items, 5)
    for n in range(MAX_LABEL_UPDATES):
        update = request.label_updates.add(session_id=f"s{n}", expected_version=1)
        for m in range(limits.max_labels):
            update.set[f"k{m}"] = "v"
            update.remove.append(f"r{m}")
    request.usage.context_version, request.usage.prompt_tokens = 3, 100
    assert problem(request.SerializeToString(), limits) is None


counts = st.integers(min_value=0, max_value=4)


@st.composite
def appends(draw: st.DrawFn) -> pb.AppendEventsRequest:
    """Appends around small limits (``SMALL``), each walked (its first event is long)."""
    request = pb.AppendEventsRequest(session_id="s")
    request.events.add(id="pad", text=PAD)
    for n in range(draw(counts)):
        event = request.events.add(id=f"e{n}", text="hi")
        for m in range(draw(counts)):
            event.metadata[f"k{m}"] = "v"
        for m in range(draw(counts)):
            event.tool_calls.add(id=f"c{m}", name="t")
        for m in range(draw(counts)):
            event.tool_results.add(call_id=f"c{m}", content="r")
        for _ in range(draw(counts)):
            event.parts.add(mime_type="image/png", data=b"\x89")
        for _ in range(draw(counts)):
            event.reasoning.add(text="because")
    for n in range(draw(counts)):
        update = request.label_updates.add(session_id=f"s{n}")
        for m in range(draw(counts)):
            update.set[f"k{m}"] = "v"
        for m in range(draw(counts)):
            update.remove.append(f"r{m}")
    return request


SMALL = Limits(
    max_events_per_append=3,
    max_metadata_entries=2,
    max_labels=2,
    max_tool_calls_per_event=2,
    max_tool_results_per_event=3,
    max_parts_per_event=2,
    max_items_per_append=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(appends())
def test_the_walk_refuses_exactly_what_the_checks_after_parsing_refuse(
    request: pb.AppendEventsRequest,
) -> None:
    """Never a request the limits admit; always one they do not, naming one of its limits."""
    try:
        check_shape(request.events, SMALL)
        check_label_update_counts(request.label_updates, SMALL)
    except LimitExceeded:
        refused = True
    else:
        refused = False
    found = problem(request.SerializeToString(), SMALL)
    assert (found is not None) == refused
    if found is not None and found.limit == "max_label_updates":  # only ever its own bound
        assert len(request.label_updates) > MAX_LABEL_UPDATES


async def test_the_interceptors_deserializer_refuses_without_parsing() -> None:
    parsed: list[int] = []

    class Counted:
        DESCRIPTOR = APPEND

        @classmethod
        def FromString(cls, raw: bytes) -> pb.AppendEventsRequest:
            parsed.append(len(raw))
            return pb.AppendEventsRequest.FromString(raw)

    handler = grpc.unary_unary_rpc_method_handler(
        lambda request, context: None, request_deserializer=Counted.FromString
    )

    async def continuation(details: Any) -> Any:
        return handler

    details = cast(grpc.HandlerCallDetails, SimpleNamespace(method="/m", invocation_metadata=()))
    built = await DecodeErrorInterceptor(Limits()).intercept_service(continuation, details)
    deserialize = built.request_deserializer
    assert deserialize is not None
    refused = deserialize(empty_events(1 << 20))
    assert isinstance(refused, Refused)
    assert isinstance(refused.error, LimitExceeded)
    assert refused.error.limit == "max_events_per_append"
    assert parsed == []
    small = pb.AppendEventsRequest(session_id="s").SerializeToString()
    assert deserialize(small) == pb.AppendEventsRequest(session_id="s")
    assert parsed == [len(small)]


async def test_an_append_past_its_counts_is_resource_exhausted_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    raw = wire.length_delimited(1, b"s") + wire.varint_field(4, 1) + empty_events(200_000)
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            call = channel.unary_unary("/compaction.v1.CompactionService/AppendEvents", None, None)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(raw, timeout=30)
        with pytest.raises(SessionNotFound):
            await sidecar.engine.store.get_session("s")
    error = refused.value
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "events has more than 1000 entries" in (error.details() or "")
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    quota = error_details_pb2.QuotaFailure()
    assert status.details[0].Unpack(quota)
    assert quota.violations[0].subject == "max_events_per_append"


async def test_a_streamed_message_past_its_counts_gets_its_own_error_and_the_stream_goes_on(
    tmp_path: Path,
) -> None:
    def request(n: int) -> bytes:
        event = event_pb2.Event(id=f"e{n}", role=event_pb2.ROLE_USER, text="hi")
        return pb.StreamEventsRequest(
            request_id=f"r{n}", session_id="s", create_if_missing=True, events=[event]
        ).SerializeToString()

    crowded = wire.length_delimited(1, b"r") + wire.length_delimited(3, b"") * 100_000
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            call = channel.stream_stream(
                "/compaction.v1.CompactionService/StreamEvents", None, None
            )

            async def messages() -> AsyncIterator[bytes]:
                for raw in (request(1), crowded, request(2)):
                    yield raw

            answers = [
                pb.StreamEventsResponse.FromString(raw)
                async for raw in call(messages(), timeout=30)
            ]
    assert [a.WhichOneof("result") for a in answers] == ["append", "error", "append"]
    assert answers[1].error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert answers[1].request_id == "r"  # read off the wire: the client matches answers by it
    assert "events has more than 1000 entries" in answers[1].error.message
    assert [a.append.version for a in (answers[0], answers[2])] == [1, 2]
