"""The Python client speaks clearing and pipelines: domain policies in, ``cleared`` out."""

from __future__ import annotations

import json

from sidecar.client import AsyncClient, session_policy
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.model import Event, Role, ToolCall, ToolResult

PAGE = "pod checkout-7f9 OOMKilled, memory limit 512Mi exceeded while building invoices. " * 4
PIPELINE = CompactionPolicy(
    None,
    Pipeline((ClearToolResults(keep_tool_uses=1, exclude_tools=("runbook",)), TokenBudget(10_000))),
)


def tool_loop() -> list[Event]:
    events = [Event(id="u1", role=Role.USER, text="why is checkout down?")]
    for n in (1, 2, 3):
        events.append(
            Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{n}", "kubectl"),))
        )
        events.append(
            Event(
                id=f"t{n}",
                role=Role.TOOL,
                tool_results=(ToolResult(f"c{n}", "kubectl", PAGE),),
            )
        )
    return events


async def test_a_pipeline_policy_round_trips_and_cleared_events_decode(
    client: AsyncClient,
) -> None:
    created = await client.create_session("py-clear", PIPELINE)
    assert session_policy(created) == PIPELINE
    assert json.loads(created.policy_json or "")["strategy"]["pipeline"]["steps"][0]
    session = client.session("py-clear")
    await session.append(tool_loop())
    result = await session.compact(force=True)
    assert result.strategy == "pipeline"
    assert result.cleared_ids == ("t1", "t2")
    context = await session.context()
    assert [e.id for e in context.events if e.cleared] == ["t1", "t2"]
    placeholder = context.events[2].tool_results[0].content
    assert "building invoices" not in placeholder  # the prose is gone
    assert "checkout-7f9" in placeholder  # its identifiers stay as pointers
    assert context.token_count == sum(e.token_count for e in context.events)
    log = [e async for e in session.events()]
    assert log[2].cleared
    assert log[2].tool_results[0].content == PAGE
