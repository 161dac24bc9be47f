"""Pipelines: steps in order while the trigger fires; their policy documents, checked."""

from __future__ import annotations

import json

import pytest
import yaml

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import policy_from_dict
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, SessionCounters
from tests.compaction.test_clear_tool_results import tool_session

PIPELINE = Pipeline((ClearToolResults(keep_tool_uses=1), TokenBudget(max_tokens=300)))


def test_the_pipeline_stops_once_the_trigger_no_longer_fires() -> None:
    events = tool_session(4)
    cleared_tokens = SessionCounters.of_window(
        PIPELINE.run_in_memory(events, None, force=True)[0].active_events
    ).tokens
    results = PIPELINE.run_in_memory(events, TokenCount(cleared_tokens + 1))
    assert [r.strategy for r in results] == ["clear_tool_results"]  # clearing was enough
    assert not results[0].archived_events


def test_the_next_step_runs_while_the_trigger_still_fires() -> None:
    results = PIPELINE.run_in_memory(tool_session(4), TokenCount(50))
    assert [r.strategy for r in results] == ["clear_tool_results", "token_budget"]


def test_a_forced_pass_runs_every_step() -> None:
    results = PIPELINE.run_in_memory(tool_session(4), TokenCount(10**6), force=True)
    assert len(results) == 2


def test_a_pipeline_policy_reads_from_json_and_yaml() -> None:
    document = """
    trigger: {token_count: 8000}
    strategy:
      pipeline:
        steps:
          - clear_tool_results: {keep_tool_uses: 3, exclude_tools: [read_file]}
          - summarize: {max_events_to_keep: 10}
            boundary: TOOL_PAIR
    """
    policy = policy_from_dict(yaml.safe_load(document))
    assert policy.strategy == Pipeline(
        (
            ClearToolResults(exclude_tools=("read_file",)),
            Summarize(boundary=Boundary.TOOL_PAIR),
        )
    )
    assert policy_from_dict(json.loads(policy.to_json())) == policy


@pytest.mark.parametrize(
    ("strategy", "field"),
    [
        ({"pipeline": {}}, "strategy.pipeline.steps"),
        ({"pipeline": {"steps": []}}, "strategy.pipeline.steps"),
        (
            {"pipeline": {"steps": [{"pipeline": {"steps": [{"token_budget": {}}]}}]}},
            "strategy.pipeline.steps[0].pipeline",
        ),
        (
            {"pipeline": {"steps": [{"token_budget": {"max_tokens": 0}}]}},
            "strategy.pipeline.steps[0].token_budget.max_tokens",
        ),
        ({"pipeline": {"steps": [{"token_budget": {}}]}, "boundary": "TURN"}, "strategy.boundary"),
        ({"pipeline": {"stages": []}}, "strategy.pipeline.stages"),
        ({"pipeline": {"steps": [{"token_budget": {}}] * 9}}, "strategy.pipeline.steps"),
        (
            {"clear_tool_results": {"keep_tool_uses": "3"}},
            "strategy.clear_tool_results.keep_tool_uses",
        ),
        (
            {"clear_tool_results": {"exclude_tools": "grep"}},
            "strategy.clear_tool_results.exclude_tools",
        ),
        (
            {"clear_tool_results": {"clear_tool_inputs": 1}},
            "strategy.clear_tool_results.clear_tool_inputs",
        ),
    ],
)
def test_bad_pipelines_are_refused_with_the_field_named(
    strategy: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict({"strategy": strategy})
    assert info.value.field == field
