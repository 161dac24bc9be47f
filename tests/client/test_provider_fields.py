"""The Python client speaks issue 20's fields: reasoning and signatures, the session's model,
usage reports, and contexts rendered for a provider."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from sidecar.client import (
    Ack,
    AsyncClient,
    Batch,
    Client,
    ContextFormat,
    InvalidArgumentError,
    ModelUsage,
    decode,
    requests,
    session_policy,
)
from sidecar.compaction.policy import policy_from_dict
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.model import Event, Reasoning, Role, TokenCalibration, ToolCall, ToolResult
from sidecar.providers.profiles import ModelProfile
from sidecar.providers.render import render_json
from sidecar.server.app import Sidecar
from tests.client.conftest import u
from tests.counting import exact_tokens
from tests.server.harness import address, running

THOUGHT = Reasoning("order 42 is in the lookup tool", signature=b"\xfb\xff\xbfsig-1")
REDACTED = Reasoning(signature=b"\x00\x01encrypted\xfe\xff", redacted=True)
SUMMARY = Reasoning("looked it up", signature=b"\xfb\xefenc", id="rs_1")
CALL = ToolCall("c1", "lookup_order", '{"order":42}', signature=b"\xfa\xfb\xfccall-sig")


def tool_loop(prefix: str) -> list[Event]:
    """A user question, the assistant's reasoning and signed call, the tool's answer."""
    return [
        Event(id=f"{prefix}u", role=Role.USER, text="Where is order 42?"),
        Event(
            id=f"{prefix}a",
            role=Role.ASSISTANT,
            text="Let me look.",
            reasoning=(THOUGHT, REDACTED, SUMMARY),
            tool_calls=(CALL,),
        ),
        Event(
            id=f"{prefix}t",
            role=Role.TOOL,
            tool_results=(ToolResult("c1", "lookup_order", "shipped"),),
        ),
    ]


def signed(
    events: tuple[Event, ...] | list[Event],
) -> list[tuple[tuple[Reasoning, ...], tuple[ToolCall, ...]]]:
    return [(e.reasoning, e.tool_calls) for e in events]


async def test_reasoning_and_call_signatures_come_back_byte_for_byte(client: AsyncClient) -> None:
    session = client.session("py-reasoning")
    sent = tool_loop("r")
    ack = await session.append(sent, create_if_missing=True)
    context = await session.context()
    log = [e async for e in session.events()]
    async with client.session("py-reasoning-stream").stream() as stream:
        await stream.send(tool_loop("s"), create_if_missing=True)
        await stream.close()
        streamed = [m async for m in stream]

    want = signed(sent)
    assert signed(ack.events) == want
    assert signed(context.events) == want
    assert signed(log) == want
    assert len(streamed) == 1
    assert signed(streamed[0].result.events) == want  # type: ignore[union-attr]


async def test_the_blocking_client_speaks_models_formats_reasoning_and_usage_batches(
    sidecar: Sidecar,
) -> None:
    def scenario() -> tuple[list[Event], list[object]]:
        with Client(address(sidecar)) as client:
            created = client.create_session("py-sync-reasoning", model="gpt-4o")
            assert created.model_profile is not None
            assert created.model_profile.provider == "openai"
            handle = client.session("py-sync-reasoning")
            handle.append(tool_loop("r"))
            context = handle.context(format=ContextFormat.OPENAI_CHAT)
            assert context.rendered_json == render_json(context.events, ContextFormat.OPENAI_CHAT)
            assert client.update_session("py-sync-reasoning", model="").model_profile is None
            report = ModelUsage(context_version=context.version, prompt_tokens=120)
            batches: list[Sequence[Event] | Batch] = [
                Batch([u("and order 43?")], usage=report),
                [u("thanks")],
            ]
            return list(context.events), list(handle.stream(batches))

    events, acks = await asyncio.to_thread(scenario)

    assert signed(events) == signed(tool_loop("r"))
    assert [a.request_id for a in acks] == ["0", "1"]  # type: ignore[attr-defined]


def test_requests_carry_the_model_the_usage_and_the_format() -> None:
    created = requests.create_session("s", None, None, "gemini-2.5-flash")
    renamed = requests.update_session("s", requests.KEEP, requests.KEEP, 3, "gpt-5")
    cleared = requests.update_session("s", requests.KEEP, {"a": "b"}, None, "")
    usage = ModelUsage(context_version=7, prompt_tokens=1234)
    appended = requests.append("s", [], None, False, (), usage)
    streamed = requests.stream_append("r1", "s", [], None, False, usage)
    plain = requests.append("s", [], None, False)
    rendered = requests.context("s", ContextFormat.ANTHROPIC)

    assert created.model == "gemini-2.5-flash"
    assert list(renamed.update_mask.paths) == ["model"]
    assert (renamed.session.model, renamed.expected_version) == ("gpt-5", 3)
    assert list(cleared.update_mask.paths) == ["labels", "model"]
    assert cleared.session.model == ""
    assert (appended.usage.context_version, appended.usage.prompt_tokens) == (7, 1234)
    assert (streamed.usage.context_version, streamed.usage.prompt_tokens) == (7, 1234)
    assert not plain.HasField("usage")
    assert rendered.format == pb.CONTEXT_FORMAT_ANTHROPIC
    assert requests.context("s", None).format == pb.CONTEXT_FORMAT_UNSPECIFIED


def test_every_context_format_is_the_protos() -> None:
    assert set(requests.FORMATS) == set(ContextFormat)
    assert set(requests.FORMATS.values()) == {
        v for v in pb.ContextFormat.values() if v != pb.CONTEXT_FORMAT_UNSPECIFIED
    }


def test_answers_decode_the_rendering_the_estimate_and_why_usage_was_ignored() -> None:
    window = decode.context(
        pb.GetContextResponse(
            version=4, token_count=100, rendered_json='{"contents":[]}', estimated_prompt_tokens=130
        )
    )
    ack = decode.append_result(
        pb.AppendEventsResponse(version=5, usage_ignored_reason="no estimate for version 1")
    )

    assert (window.rendered_json, window.estimated_prompt_tokens) == ('{"contents":[]}', 130)
    assert ack.usage_ignored_reason == "no estimate for version 1"


async def test_a_window_read_in_parts_keeps_its_reasoning_and_is_rendered_by_the_client(
    tmp_path: Path,
) -> None:
    """Past the message limit GetContext sends no content and no rendering: context() reads
    the events in pages, reasoning and signatures included, and renders them itself."""
    async with running(tmp_path, max_message_bytes=8192) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("big")
            big = [u("x" * 1500, id=f"q{n}") for n in range(4)]
            await session.append(big, create_if_missing=True)
            await session.append(tool_loop("r"))
            answer = await client._stub.GetContext(
                pb.GetContextRequest(session_id="big", format=pb.CONTEXT_FORMAT_GEMINI)
            )
            window = await session.context(format=ContextFormat.GEMINI)

    assert answer.content_omitted
    assert [e.id for e in window.events] == ["q0", "q1", "q2", "q3", "ru", "ra", "rt"]
    assert signed(window.events[4:]) == signed(tool_loop("r"))
    assert answer.rendered_json == ""
    assert window.rendered_json == render_json(window.events, ContextFormat.GEMINI)
    assert window.estimated_prompt_tokens == answer.estimated_prompt_tokens


def test_a_session_decodes_with_its_model_and_calibration() -> None:
    header = session_pb2.Session(session_id="s", version=3, model="gemini-2.5-flash")
    header.calibration.factor = 1.25
    header.calibration.samples = 4

    decoded = decode.session(header)
    older = decode.session(session_pb2.Session(session_id="s", version=3))

    assert decoded.model == "gemini-2.5-flash"
    assert decoded.calibration == TokenCalibration(factor=1.25, samples=4)
    assert older.calibration == TokenCalibration()  # no calibration sent: uncalibrated, not 0


async def test_a_sessions_model_comes_with_its_profile_and_can_be_changed(
    client: AsyncClient,
) -> None:
    created = await client.create_session("py-model", model="gemini-2.5-flash")
    renamed = await client.update_session("py-model", model="claude-sonnet-4-5-20250929")
    fetched = await client.get_session("py-model")
    removed = await client.update_session("py-model", model="")
    with pytest.raises(InvalidArgumentError) as unknown:
        await client.create_session("py-model-2", model="no-such-model")

    assert (created.model, created.model_profile) == (
        "gemini-2.5-flash",
        ModelProfile("gemini-2.5-flash", "gemini", 1_048_576, 65_536),
    )
    assert renamed.model == fetched.model == "claude-sonnet-4-5-20250929"
    assert fetched.model_profile == ModelProfile("claude-sonnet-4-5", "anthropic", 200_000, 64_000)
    assert (removed.model, removed.model_profile) == ("", None)
    assert unknown.value.field == "model"


async def test_usage_reports_calibrate_the_session_and_its_context_estimate(
    client: AsyncClient,
) -> None:
    await client.create_session("py-usage", model="gemini-2.5-flash")
    session = client.session("py-usage")
    await session.append([u("Where is my order?")])
    sent = await session.context()
    counted = await session.append(
        [u("and the invoice?")],
        usage=ModelUsage(context_version=sent.version, prompt_tokens=2 * exact_tokens(sent)),
    )
    calibrated = await session.get()
    later = await session.context()
    ignored = await session.append([u("thanks")], usage=ModelUsage(999, 10))
    async with session.stream() as stream:
        await stream.send([u("bye")], usage=ModelUsage(998, 10))
        await stream.close()
        [streamed] = [m async for m in stream]

    assert counted.usage_ignored_reason == ""
    assert calibrated.calibration.samples == 1
    assert calibrated.calibration.factor == 2.0
    assert later.estimated_prompt_tokens == 2 * later.token_count
    assert "999" in ignored.usage_ignored_reason
    assert isinstance(streamed, Ack)
    assert "998" in streamed.result.usage_ignored_reason
    assert (await session.get()).calibration.samples == 1


async def test_a_context_fraction_policy_round_trips_on_a_session_with_a_model(
    client: AsyncClient,
) -> None:
    fraction = policy_from_dict(
        {
            "trigger": {"context_fraction": 0.5},
            "strategy": {"clear_tool_results": {"keep_tool_uses": 1, "keep_reasoning_turns": 1}},
        }
    )
    created = await client.create_session("py-fraction", fraction, model="gpt-4o")
    with pytest.raises(InvalidArgumentError) as unmodelled:
        await client.create_session("py-fraction-2", fraction)

    assert session_policy(created) == fraction
    assert unmodelled.value.field == "policy.trigger.context_fraction"
