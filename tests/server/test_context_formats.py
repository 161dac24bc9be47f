"""GetContext with a format: the window rendered ready to send, over gRPC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.model import Event, Role, Session, SessionCounters, utcnow
from sidecar.providers.prefix import StablePrefix
from sidecar.providers.render import ContextFormat, render
from sidecar.server import convert
from sidecar.server.app import Sidecar
from sidecar.server.context_cache import ENTRY_OVERHEAD, ContextResponses, EventBlobs
from sidecar.server.renderings import format_in
from tests.providers import sdk
from tests.server.harness import address, running
from tests.server.test_api import expect, field_violations

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

FORMATS = [
    pb.CONTEXT_FORMAT_GEMINI,
    pb.CONTEXT_FORMAT_OPENAI_CHAT,
    pb.CONTEXT_FORMAT_OPENAI_RESPONSES,
    pb.CONTEXT_FORMAT_ANTHROPIC,
]


SIGNED = b"EqQBsig"  # Anthropic's and OpenAI's signatures are strings, stored as UTF-8
ENCRYPTED = b"gAAAAAenc"  # OpenAI's reasoning has an id as well
GEMINI = b"\x00\x01gemini"  # Gemini's are bytes


def tool_loop() -> list[event_pb2.Event]:
    """A system prompt, a question, a signed call with reasoning, and its result."""
    return [
        event_pb2.Event(id="s", role=event_pb2.ROLE_SYSTEM, text="You are an SRE agent."),
        event_pb2.Event(id="u", role=event_pb2.ROLE_USER, text="Why is checkout slow?"),
        event_pb2.Event(
            id="a",
            role=event_pb2.ROLE_ASSISTANT,
            reasoning=[
                event_pb2.Reasoning(text="Check the pool.", signature=SIGNED),
                event_pb2.Reasoning(text="Pool first.", signature=ENCRYPTED, id="rs_1"),
            ],
            tool_calls=[
                event_pb2.ToolCall(
                    id="c1", name="logs", arguments_json='{"svc":"checkout"}', signature=GEMINI
                )
            ],
        ),
        event_pb2.Event(
            id="t",
            role=event_pb2.ROLE_TOOL,
            tool_results=[event_pb2.ToolResult(call_id="c1", name="logs", content="pool: 5/5")],
        ),
    ]


async def _session(stub: Stub, events: list[event_pb2.Event], session_id: str = "s") -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id=session_id, events=events, create_if_missing=True)
    )


@pytest.mark.parametrize("value", FORMATS)
async def test_get_context_renders_the_window_in_each_format(stub: Stub, value: int) -> None:
    await _session(stub, tool_loop())
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s", format=value))  # type: ignore[arg-type]
    fmt = format_in(value)
    assert fmt is not None
    body = json.loads(reply.rendered_json)
    sdk.parse(fmt, body)
    events = [convert.event_in(e, "events") for e in reply.events]
    assert body == render(events, fmt)
    assert reply.rendered_json == json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    assert [e.id for e in reply.events] == ["s", "u", "a", "t"]


async def test_signatures_come_back_as_each_provider_takes_them(stub: Stub) -> None:
    await _session(stub, tool_loop())

    async def rendered(value: int) -> str:
        reply = await stub.GetContext(pb.GetContextRequest(session_id="s", format=value))  # type: ignore[arg-type]
        return reply.rendered_json

    gemini = json.loads(await rendered(pb.CONTEXT_FORMAT_GEMINI))
    call = gemini["contents"][1]["parts"][-1]
    assert call["functionCall"]["id"] == "c1"
    assert call["thoughtSignature"] == "AAFnZW1pbmk="  # base64 of b"\x00\x01gemini"
    anthropic = json.loads(await rendered(pb.CONTEXT_FORMAT_ANTHROPIC))
    thinking = [b for b in anthropic["messages"][1]["content"] if b["type"] == "thinking"]
    assert [b["signature"] for b in thinking] == ["EqQBsig"]  # OpenAI's is not Anthropic's
    responses = json.loads(await rendered(pb.CONTEXT_FORMAT_OPENAI_RESPONSES))
    reasoning = [i for i in responses["input"] if i["type"] == "reasoning"]
    assert [i["encrypted_content"] for i in reasoning] == ["gAAAAAenc"]


async def test_without_a_format_rendered_json_is_empty(stub: Stub) -> None:
    await _session(stub, tool_loop())
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert reply.rendered_json == ""


async def test_an_unknown_format_is_invalid_argument_naming_format(stub: Stub) -> None:
    await _session(stub, tool_loop())
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.GetContext(pb.GetContextRequest(session_id="s", format=99)),  # type: ignore[arg-type]
    )
    assert field_violations(error) == ["format"]


async def test_kept_answers_are_served_only_for_the_format_they_were_made_for(
    stub: Stub, sidecar: Sidecar
) -> None:
    await _session(stub, tool_loop())
    plain = pb.GetContextRequest(session_id="s")
    chat = pb.GetContextRequest(session_id="s", format=pb.CONTEXT_FORMAT_OPENAI_CHAT)
    gemini = pb.GetContextRequest(session_id="s", format=pb.CONTEXT_FORMAT_GEMINI)
    assert (await stub.GetContext(plain)).rendered_json == ""
    first = (await stub.GetContext(chat)).rendered_json
    assert json.loads(first)["messages"][0]["role"] == "system"
    assert (await stub.GetContext(plain)).rendered_json == ""
    assert "contents" in json.loads((await stub.GetContext(gemini)).rendered_json)
    reads = dict(sidecar.servicer.context_reads)
    assert (await stub.GetContext(chat)).rendered_json == first  # kept
    assert sidecar.servicer.context_reads["kept"] == reads.get("kept", 0) + 1
    await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=[event_pb2.Event(id="u2", role=event_pb2.ROLE_USER, text="and now?")],
        )
    )
    after = json.loads((await stub.GetContext(chat)).rendered_json)
    assert after["messages"][-1] == {"role": "user", "content": "and now?"}
    assert (await stub.GetContext(plain)).rendered_json == ""


async def test_an_answer_too_large_with_its_rendering_omits_content_and_rendering(
    tmp_path: Path,
) -> None:
    text = "x" * 30_000  # the window fits alone (about 60 KB), not with its rendering
    async with running(tmp_path, max_message_bytes=100 * 1024) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await _session(
                stub,
                [
                    event_pb2.Event(id=f"u{i}", role=event_pb2.ROLE_USER, text=text)
                    for i in range(2)
                ],
            )
            plain = await stub.GetContext(pb.GetContextRequest(session_id="s"))
            assert not plain.content_omitted
            request = pb.GetContextRequest(session_id="s", format=pb.CONTEXT_FORMAT_ANTHROPIC)
            for _ in range(2):  # built, then kept
                reply = await stub.GetContext(request)
                assert reply.content_omitted
                assert reply.rendered_json == ""
                assert [e.text for e in reply.events] == ["", ""]


def test_every_api_format_has_a_rendering() -> None:
    named = {v for v in pb.ContextFormat.values() if v != pb.CONTEXT_FORMAT_UNSPECIFIED}
    assert named == set(FORMATS)
    assert {format_in(v) for v in FORMATS} == set(ContextFormat)


def _header(version: int, total_events: int, *window: Event) -> Session:
    """The session at ``version``, whose counters are those of ``window``."""
    counters = SessionCounters.of_window(window)
    return Session("s", version, None, {}, CREATED, CREATED, counters, total_events)


CREATED = utcnow()


def test_a_kept_rendering_is_charged_beside_its_answer_and_dropped_with_its_window() -> None:
    kept = ContextResponses(max_bytes=1 << 20)
    window = [Event(id="u1", role=Role.USER, text="hi", position=1)]
    prefix = StablePrefix(_header(1, 1, *window), window)
    kept.put("s", _header(1, 1, *window), pb.GetContextResponse(version=1), window, prefix)
    plain = kept.bytes_held
    rendered = pb.GetContextResponse(version=1, rendered_json='{"contents":[]}')
    kept.keep_rendered("s", _header(1, 1, *window), ContextFormat.GEMINI, rendered, 15)
    kept.keep_rendered("s", _header(1, 1, *window), ContextFormat.ANTHROPIC, rendered, 15)
    assert kept.rendered("s", ContextFormat.GEMINI) is rendered
    each = plain - ENTRY_OVERHEAD + 3 * 15 + ENTRY_OVERHEAD  # a copy of the plain one, and more
    assert kept.bytes_held == plain + 2 * each
    more = Event(id="u2", role=Role.USER, text="and?", position=2)
    kept.appended("s", _header(2, 2, *window, more), [more], EventBlobs())
    assert kept.rendered("s", ContextFormat.GEMINI) is None  # of the window before the append
    assert kept.window("s") == [*window, more]
    assert kept.bytes_held < plain + each


HOSTILE_RESULTS = ['{"s": "\\ud83d"}', "[" * 3000 + "]" * 3000, '{"a": NaN}', '{"a": 1e999}']


async def test_results_that_are_not_strict_json_still_render_strict_json(stub: Stub) -> None:
    calls = [event_pb2.ToolCall(id=f"c{i}", name="t") for i in range(len(HOSTILE_RESULTS))]
    results = [
        event_pb2.ToolResult(call_id=f"c{i}", name="t", content=content)
        for i, content in enumerate(HOSTILE_RESULTS)
    ]
    await _session(
        stub,
        [
            event_pb2.Event(id="u", role=event_pb2.ROLE_USER, text="go"),
            event_pb2.Event(id="a", role=event_pb2.ROLE_ASSISTANT, tool_calls=calls),
            event_pb2.Event(id="t", role=event_pb2.ROLE_TOOL, tool_results=results),
        ],
    )
    for value in FORMATS:  # GetContext answered INTERNAL here, on every read
        reply = await stub.GetContext(pb.GetContextRequest(session_id="s", format=value))
        body = json.loads(reply.rendered_json, parse_constant=_not_a_number)
        fmt = format_in(value)
        assert fmt is not None
        sdk.parse(fmt, body)


def _not_a_number(name: str) -> object:
    raise AssertionError(f"{name} in rendered_json")


async def test_arguments_past_a_double_are_refused_naming_the_field(stub: Stub) -> None:
    await _session(stub, [event_pb2.Event(id="u", role=event_pb2.ROLE_USER, text="go")])
    call = event_pb2.ToolCall(id="c1", name="t", arguments_json='{"n": 1e999}')
    error = await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.AppendEvents(
            pb.AppendEventsRequest(
                session_id="s",
                events=[event_pb2.Event(id="a", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call])],
            )
        ),
    )
    assert field_violations(error) == ["events[0].tool_calls[0].arguments_json"]
    log = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    assert [e.id for e in log.events] == ["u"]  # nothing stored
