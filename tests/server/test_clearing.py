"""Clearing and pipelines over gRPC: the window shows placeholders, the log the originals."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

ORIGINAL = "pod checkout-7f9 OOMKilled: memory limit 512Mi exceeded " * 30

CLEAR = policy_pb2.CompactionPolicy(
    strategy=policy_pb2.Strategy(
        clear_tool_results=policy_pb2.ClearToolResults(keep_tool_uses=1, exclude_tools=["runbook"])
    )
)


def tool_loop() -> list[event_pb2.Event]:
    events = [event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="why is checkout down?")]
    for i, tool in enumerate(["kubectl", "runbook", "kubectl", "kubectl"]):
        call = f"c{i}"
        events.append(
            event_pb2.Event(
                id=f"a{i}",
                role=event_pb2.ROLE_ASSISTANT,
                tool_calls=[event_pb2.ToolCall(id=call, name=tool, arguments_json="{}")],
            )
        )
        events.append(
            event_pb2.Event(
                id=f"t{i}",
                role=event_pb2.ROLE_TOOL,
                tool_results=[
                    event_pb2.ToolResult(call_id=call, name=tool, content=f"{i}: {ORIGINAL}")
                ],
            )
        )
    return events


async def seeded(stub: Stub, policy: policy_pb2.CompactionPolicy) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=tool_loop()))


async def test_clearing_shows_placeholders_in_context_and_originals_in_the_log(stub: Stub) -> None:
    await seeded(stub, CLEAR)
    before = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    answer = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    result = answer.result
    assert result.compacted
    assert result.strategy == "clear_tool_results"
    assert list(result.cleared_event_ids) == ["t0", "t2"]  # t1 is a runbook: excluded
    assert result.archived_event_count == 0
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    by_id = {e.id: e for e in context.events}
    assert [e.id for e in context.events] == [e.id for e in before.events]
    assert by_id["t0"].cleared
    assert ORIGINAL not in by_id["t0"].tool_results[0].content
    assert not by_id["t1"].cleared
    assert context.token_count == sum(e.token_count for e in context.events)
    assert before.token_count_estimated  # appends are estimated; a clearing plans on exact
    assert not context.token_count_estimated
    listed = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    exact_before = sum(e.token_count for e in listed.events)  # the originals, counted
    assert not any(e.token_count_estimated for e in listed.events)
    assert context.token_count == exact_before - result.tokens_estimated_saved
    t0 = next(e for e in listed.events if e.id == "t0")
    assert t0.cleared
    assert t0.tool_results[0].content == f"0: {ORIGINAL}"
    hits = await stub.SearchEvents(
        pb.SearchEventsRequest(query="OOMKilled", session_id="s", include_active=True)
    )
    assert {h.event.id for h in hits.hits} >= {"t0", "t2"}


async def test_a_pipeline_policy_round_trips_and_lands_step_by_step(stub: Stub) -> None:
    pipeline = policy_pb2.CompactionPolicy(
        trigger=policy_pb2.Trigger(token_count=100),
        strategy=policy_pb2.Strategy(
            pipeline=policy_pb2.Pipeline(
                steps=[
                    CLEAR.strategy,
                    policy_pb2.Strategy(token_budget=policy_pb2.TokenBudget(max_tokens=300)),
                ]
            )
        ),
    )
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=pipeline))
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert session.policy.strategy.pipeline.steps[0].clear_tool_results.exclude_tools == ["runbook"]
    events = [*tool_loop(), event_pb2.Event(id="u2", role=event_pb2.ROLE_USER, text="and now?")]
    appended = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))
    assert appended.compaction.strategy == "pipeline"
    # Still over 100 tokens once cleared: token_budget ran and archived the first turn.
    assert list(appended.compaction.cleared_event_ids) == []  # both cleared events left too
    assert appended.compaction.archived_event_count == 9
    assert appended.version == 4  # created, appended, then one version per landed step
    answer = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    assert [e.id for e in answer.events if e.cleared] == ["t0", "t2"]


@pytest.mark.parametrize(
    ("strategy", "field"),
    [
        (policy_pb2.Strategy(pipeline=policy_pb2.Pipeline()), "policy.strategy.pipeline.steps"),
        (
            policy_pb2.Strategy(
                pipeline=policy_pb2.Pipeline(
                    steps=[
                        policy_pb2.Strategy(pipeline=policy_pb2.Pipeline(steps=[CLEAR.strategy]))
                    ]
                )
            ),
            "policy.strategy.pipeline.steps[0].pipeline",
        ),
        (
            policy_pb2.Strategy(clear_tool_results=policy_pb2.ClearToolResults(keep_tool_uses=-1)),
            "policy.strategy.clear_tool_results.keep_tool_uses",
        ),
    ],
)
async def test_bad_pipelines_are_invalid_arguments_naming_the_field(
    stub: Stub, strategy: policy_pb2.Strategy, field: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.CreateSession(
            pb.CreateSessionRequest(
                session_id="s", policy=policy_pb2.CompactionPolicy(strategy=strategy)
            )
        )
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in (info.value.details() or "")


async def test_inspect_marks_cleared_events(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await seeded(stub, CLEAR)
            await stub.Compact(pb.CompactRequest(session_id="s", force=True))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sidecar.cli",
            "inspect",
            "s",
            "--addr",
            address(sidecar),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(process.communicate(), 60)
    text = out.decode()
    assert process.returncode == 0, text
    cleared = [line for line in text.splitlines() if line.startswith("c ")]
    assert len(cleared) == 2  # t0 and t2, shown with their original content
    assert all("OOMKilled" in line for line in cleared)
    assert "2 active cleared events" in text


async def test_exclude_tools_matches_the_calls_name_for_results_and_inputs(stub: Stub) -> None:
    """One rule: a result named otherwise than its call is excluded, or not, with its call."""
    events = [event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="why is checkout down?")]
    for i, (called, answered) in enumerate(
        [("kubectl", "runbook"), ("runbook", "kubectl"), ("kubectl", "kubectl")]
    ):
        arguments = json.dumps({"q": ORIGINAL})
        call = event_pb2.ToolCall(id=f"c{i}", name=called, arguments_json=arguments)
        result = event_pb2.ToolResult(call_id=f"c{i}", name=answered, content=ORIGINAL)
        events += [
            event_pb2.Event(id=f"a{i}", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call]),
            event_pb2.Event(id=f"t{i}", role=event_pb2.ROLE_TOOL, tool_results=[result]),
        ]
    policy = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(
            clear_tool_results=policy_pb2.ClearToolResults(
                keep_tool_uses=1, exclude_tools=["runbook"], clear_tool_inputs=True
            )
        )
    )
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))
    answer = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    assert list(answer.result.cleared_event_ids) == ["a0", "t0"]  # the kubectl call and its result
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    by_id = {e.id: e for e in context.events}
    assert ORIGINAL not in by_id["t0"].tool_results[0].content
    assert by_id["t1"].tool_results[0].content == ORIGINAL  # a runbook call: kept, both
    assert ORIGINAL in by_id["a1"].tool_calls[0].arguments_json
