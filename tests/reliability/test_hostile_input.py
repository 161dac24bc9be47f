"""Hostile input over the API: each is refused as INVALID_ARGUMENT naming its field, or served.

Never INTERNAL or UNKNOWN, never stored, never an ERROR in the log: a
client that sends these is wrong, not the server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sidecar.engine.validation import MAX_JSON_DEPTH
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.store.paging import encode_token, fingerprint
from tests.server.harness import address, running

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

CALL_FIELD = "events[0].tool_calls[0].arguments_json"


async def _refusal(call: object) -> tuple[grpc.StatusCode, str]:
    """The status code and details a call ended with (OK and "" when it succeeded)."""
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def _calling(arguments_json: str) -> event_pb2.Event:
    call = event_pb2.ToolCall(id="c1", name="lookup", arguments_json=arguments_json)
    return event_pb2.Event(id="a1", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call])


@pytest.fixture
async def stub(tmp_path: Path) -> AsyncIterator[Stub]:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            yield pb_grpc.CompactionServiceStub(channel)


# -- health on the API port -----------------------------------------------------------


async def test_health_watch_on_the_api_port_streams_the_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Client-side health checking watches the API port; it gets what the health port serves."""
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=""), timeout=10
            )
            first = await watch.read()
            watch.cancel()
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# -- arguments_json -------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments_json",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 100_000 + "1" + "}" * 100_000,
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
    ],
    ids=["deep-array", "deep-object", "one-past-the-limit"],
)
async def test_deeply_nested_arguments_json_is_refused_and_nothing_stored(
    stub: Stub, arguments_json: str
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    append = stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_calling(arguments_json)])
    )
    code, details = await _refusal(append)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert CALL_FIELD in details
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert (context.version, list(context.events)) == (1, [])


@pytest.mark.parametrize(
    "arguments_json",
    ["NaN", '{"x": Infinity}', "[-Infinity]", r'"\ud800"', r'{"k": "\udc00"}', r'"\udc00\ud800"'],
)
async def test_arguments_json_must_be_strict_json(stub: Stub, arguments_json: str) -> None:
    """Python reads NaN, Infinity and lone surrogates; other clients' JSON parsers do not."""
    append = stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s", events=[_calling(arguments_json)], create_if_missing=True
        )
    )
    code, details = await _refusal(append)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert CALL_FIELD in details
    assert list((await stub.ListSessions(pb.ListSessionsRequest())).sessions) == []


async def test_a_number_too_long_to_read_is_refused_in_the_callers_terms(stub: Stub) -> None:
    """Past 4,300 digits Python will not read an integer; the refusal says so in terms
    of the JSON sent, not of the server's interpreter."""
    append = stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s", events=[_calling('{"n": 1' + "0" * 5000 + "}")], create_if_missing=True
        )
    )
    code, details = await _refusal(append)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert CALL_FIELD in details
    assert "more than 4300 digits" in details
    assert "sys." not in details
    assert list((await stub.ListSessions(pb.ListSessionsRequest())).sessions) == []


async def test_strict_json_arguments_are_stored_as_sent(stub: Stub) -> None:
    """A surrogate pair is one character; nesting up to the limit is fine."""
    nested = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    arguments_json = r'{"face": "\ud83d\ude00", "n": [1e308, -0.5, null], "deep": ' + nested + "}"
    await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s", events=[_calling(arguments_json)], create_if_missing=True
        )
    )
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert context.events[0].tool_calls[0].arguments_json == arguments_json


# -- ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("session_id", ["s1\n", "s1\r\n", "\ns1"])
async def test_a_session_id_with_a_newline_is_refused(stub: Stub, session_id: str) -> None:
    create = stub.CreateSession(pb.CreateSessionRequest(session_id=session_id))
    code, details = await _refusal(create)
    assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "session_id")
    event = event_pb2.Event(id="e1", role=event_pb2.ROLE_USER, text="hi")
    append = stub.AppendEvents(
        pb.AppendEventsRequest(session_id=session_id, events=[event], create_if_missing=True)
    )
    code, details = await _refusal(append)
    assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "session_id")
    listing = await stub.ListSessions(pb.ListSessionsRequest())
    assert list(listing.sessions) == []


async def test_an_event_id_with_a_trailing_newline_is_refused(stub: Stub) -> None:
    event = event_pb2.Event(id="e1\n", role=event_pb2.ROLE_USER, text="hi")
    append = stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s1", events=[event], create_if_missing=True)
    )
    code, details = await _refusal(append)
    assert (code, details.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "events[0].id")


# -- page tokens ----------------------------------------------------------------------


def _forged(*place: int) -> str:
    """The token of the search below, holding ``place`` (its block, offset and newest event's
    key): signed with the key of the server, which runs in this process, as if that key had
    leaked (see paging.py)."""
    bound = fingerprint("paris", None, "", [], True, None, None)
    return encode_token("search", bound, place)


async def test_a_forged_search_page_token_is_refused_by_every_store(
    tmp_path: Path, store_url: str
) -> None:
    async with running(tmp_path, store=store_url) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            events = [
                event_pb2.Event(id=f"e{i}", role=event_pb2.ROLE_USER, text="paris")
                for i in range(3)
            ]
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=events, create_if_missing=True)
            )
            issued = await stub.SearchEvents(
                pb.SearchEventsRequest(query="paris", include_active=True, page_size=1)
            )
            issued_token = issued.next_page_token
            # The forgery is made as the server makes tokens: block, offset, newest event's key.
            newest = next(n for n in range(1, 100) if _forged(0, 1, n) == issued_token)
            forgeries = (
                _forged(0, -1, newest),
                _forged(-1, 0, newest),
                _forged(0, -(2**63), newest),
                _forged(0, 1, -1),
                _forged(0, -1),  # an older server's form
                _forged(1),
                _forged(0, 1, newest, 0),
                "%%",
            )
            for token in forgeries:
                search = stub.SearchEvents(
                    pb.SearchEventsRequest(query="paris", include_active=True, page_token=token)
                )
                code, details = await _refusal(search)
                assert (code, details.split(":")[0]) == (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "page_token",
                ), token
