"""ClientError carries the status code and the server's details; the bearer token is sent."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from sidecar.client import (
    AsyncClient,
    ClientError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    Precondition,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from sidecar.client.errors import error_from_rpc
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.model import Event, Role, ToolCall
from sidecar.server.app import Sidecar
from tests.client.conftest import a, t, turn, u
from tests.server.harness import address, running


async def test_bad_event_names_its_field(client: AsyncClient) -> None:
    handle = client.session("s1")

    with pytest.raises(InvalidArgumentError) as caught:
        await handle.append([u(), t()], create_if_missing=True)

    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.field == "events[1].tool_results"
    assert "at least one tool result" in caught.value.field_violations[0].description


async def test_event_without_role_names_events_0_role(sidecar: Sidecar) -> None:
    # The model cannot express a missing role, so this request is built by hand.
    request = pb.AppendEventsRequest(session_id="s1", create_if_missing=True)
    request.events.add(text="who said this?")
    async with grpc.aio.insecure_channel(address(sidecar)) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            await stub.AppendEvents(request)

    error = error_from_rpc(caught.value)

    assert isinstance(error, InvalidArgumentError)
    assert error.field == "events[0].role"


async def test_bad_tool_call_arguments_name_the_call(client: AsyncClient) -> None:
    broken = Event(id="", role=Role.ASSISTANT, tool_calls=(ToolCall("c1", "lookup", "{not"),))

    with pytest.raises(InvalidArgumentError) as caught:
        await client.session("s1").append([u(), broken], create_if_missing=True)

    assert caught.value.field == "events[1].tool_calls[0].arguments_json"


async def test_version_mismatch_exposes_the_current_version(client: AsyncClient) -> None:
    handle = client.session("s1")
    appended = await handle.append(turn(0), create_if_missing=True)

    with pytest.raises(FailedPreconditionError) as on_append:
        await handle.append(turn(1), expected_version=appended.version + 5)
    with pytest.raises(FailedPreconditionError) as on_update:
        await client.update_session("s1", labels={}, expected_version=appended.version + 5)
    with pytest.raises(FailedPreconditionError) as on_compact:
        await handle.compact(force=True, expected_version=appended.version + 5)

    assert on_append.value.current_version == appended.version
    assert on_append.value.reason == "VERSION_MISMATCH"
    assert on_update.value.current_version == appended.version
    assert on_compact.value.current_version == appended.version
    assert [e.text async for e in handle.events()] == ["question number0", "answer number0"]


async def test_a_restore_out_of_order_names_the_compaction_to_restore_first(
    client: AsyncClient,
) -> None:
    """The PreconditionFailure the server attaches is read, as Go and Java read it."""
    handle = client.session("s1")
    await handle.append([*turn(0), *turn(1), *turn(2)], create_if_missing=True)
    keep = CompactionPolicy(trigger=None, strategy=SlidingWindow(max_events=4))
    older = await handle.compact(keep, force=True)
    await handle.append(turn(3))
    newer = await handle.compact(CompactionPolicy(None, SlidingWindow(max_events=2)), force=True)
    assert older.compacted
    assert newer.compacted

    with pytest.raises(FailedPreconditionError) as caught:
        await handle.restore(older.compaction_id)

    (precondition,) = caught.value.preconditions
    assert precondition == Precondition("RESTORE_ORDER", newer.compaction_id, caught.value.message)


async def test_missing_session_is_not_found(client: AsyncClient) -> None:
    handle = client.session("nobody")

    with pytest.raises(NotFoundError) as caught:
        await handle.context()

    assert caught.value.message == "session 'nobody' not found"
    assert isinstance(caught.value, ClientError)


async def test_over_a_limit_names_the_limit(tmp_path: Path) -> None:
    async with (
        running(tmp_path, max_events_per_append=2) as sidecar,
        AsyncClient(address(sidecar)) as client,
    ):
        with pytest.raises(ResourceExhaustedError) as caught:
            await client.session("s1").append([u(), a(), u()], create_if_missing=True)

    assert caught.value.limits == ("max_events_per_append",)


async def test_a_refused_stream_reports_the_servers_status_though_writes_were_under_way(
    tmp_path: Path,
) -> None:
    """grpc.aio reports INTERNAL for a write under way as the server ends the call
    (grpc/grpc#36066), and a write after it raises InvalidStateError: the stream
    gives the server's own status either way."""
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret\n")
    big = "x" * 60_000  # writes wait on flow control while the refusal arrives

    async def stream_without_a_token(client: AsyncClient, attempt: int) -> None:
        async with client.session("s1").stream() as stream:
            for n in range(20):
                event = Event(id=f"e{attempt}-{n}", role=Role.USER, text=big)
                await stream.send([event], create_if_missing=True)
            await anext(stream)

    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with AsyncClient(address(sidecar)) as anonymous:
            for attempt in range(10):
                with pytest.raises(UnauthenticatedError):
                    await stream_without_a_token(anonymous, attempt)


async def test_bearer_token_is_required_and_sent(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# one token a line\ns3cret\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with AsyncClient(address(sidecar)) as anonymous:
            with pytest.raises(UnauthenticatedError):
                await anonymous.create_session("s1")
            with pytest.raises(UnauthenticatedError):
                [s async for s in anonymous.list_sessions()]
            async with anonymous.session("s1").stream() as stream:
                await stream.send([u()], create_if_missing=True)
                with pytest.raises(UnauthenticatedError):
                    await anext(stream)
        async with AsyncClient(address(sidecar), token="wrong") as impostor:
            with pytest.raises(UnauthenticatedError):
                await impostor.get_session("s1")
        async with AsyncClient(address(sidecar), token="s3cret") as member:
            await member.create_session("s1")
            appended = await member.session("s1").append(turn(0))

            assert (await member.get_session("s1")).version == appended.version
