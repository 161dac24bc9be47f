"""One policy syntax: proto3 JSON's camelCase and the proto's trigger lists read as snake_case does.

What GetSession prints is fed back in: ``--default-policy``, a YAML policy
file and ``policy_from_dict`` all read it, as protobuf's own JSON parser
reads both spellings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import MAX_TRIGGERS, CompactionPolicy, policy_from_dict
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import (
    AllOf,
    Always,
    AnyOf,
    ContextFraction,
    EventCount,
    Interval,
    TokenCount,
    TurnCount,
)
from sidecar.compaction.turn_window import TurnWindow
from sidecar.errors import InvalidConfig
from sidecar.gen.compaction.v1 import policy_pb2
from sidecar.model import Boundary
from sidecar.server import convert
from sidecar.server.config import ServerConfig

POLICIES = [
    CompactionPolicy(TurnCount(3), SlidingWindow(4)),
    CompactionPolicy(
        AnyOf((TurnCount(20), AllOf((TokenCount(8000), EventCount(40))), Interval(5))),
        TurnWindow(6, Boundary.TOOL_PAIR, min_saved_tokens=100),
    ),
    CompactionPolicy(Always(), TokenBudget(2000)),
    CompactionPolicy(
        ContextFraction(0.5),
        Summarize(max_events_to_keep=6, overlap=1, model="m", temperature=0.5, thinking_budget=-1),
    ),
    CompactionPolicy(
        TokenCount(8000),
        Pipeline(
            (
                ClearToolResults(
                    keep_tool_uses=2,
                    exclude_tools=("search",),
                    clear_tool_inputs=True,
                    keep_reasoning_turns=1,
                    min_saved_tokens=10,
                ),
                Summarize(max_events_to_keep=10, max_tool_result_tokens=500),
            )
        ),
    ),
]


def printed(policy: CompactionPolicy) -> dict[str, Any]:
    """The policy as GetSession prints it: the proto message in proto3 JSON (camelCase)."""
    return json_format.MessageToDict(_message(policy))


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: type(p.strategy).__name__)
def test_what_get_session_prints_reads_back_as_the_same_policy(policy: CompactionPolicy) -> None:
    document = printed(policy)
    assert policy_from_dict(document) == policy


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: type(p.strategy).__name__)
def test_the_proto_field_names_read_back_too(policy: CompactionPolicy) -> None:
    document = json_format.MessageToDict(_message(policy), preserving_proto_field_name=True)
    assert policy_from_dict(document) == policy


def test_camel_case_and_snake_case_are_one_policy() -> None:
    camel = {
        "trigger": {"anyOf": [{"turnCount": 20}, {"tokenCount": 8000}]},
        "strategy": {"slidingWindow": {"maxEvents": 20}, "minSavedTokens": 5},
    }
    snake = {
        "trigger": {"any_of": [{"turn_count": 20}, {"token_count": 8000}]},
        "strategy": {"sliding_window": {"max_events": 20}, "min_saved_tokens": 5},
    }
    assert policy_from_dict(camel) == policy_from_dict(snake)


def test_an_unspecified_boundary_is_the_default_turn() -> None:
    policy = policy_from_dict({"strategy": {"turnWindow": {}, "boundary": "BOUNDARY_UNSPECIFIED"}})
    assert policy.strategy == TurnWindow(boundary=Boundary.TURN)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"strategy": {"slidingWindow": {"maxEvents": "ten"}}},
            "strategy.sliding_window.max_events",
        ),
        (
            {"strategy": {"slidingWindow": {"maxEvents": 1, "max_events": 2}}},
            "strategy.sliding_window.max_events",
        ),
        ({"trigger": {"turnCount": 0}, "strategy": {"slidingWindow": {}}}, "trigger.turn_count"),
        (
            {
                "trigger": {"anyOf": {"triggers": [{"turnCount": 1}, {"eventCount": -1}]}},
                "strategy": {"slidingWindow": {}},
            },
            "trigger.any_of[1].event_count",
        ),
        (
            {"strategy": {"pipeline": {"steps": [{"tokenBudget": {"maxTokens": "x"}}]}}},
            "strategy.pipeline.steps[0].token_budget.max_tokens",
        ),
        (
            {"strategy": {"pipeline": {"steps": [{"pipeline": {}}]}}},
            "strategy.pipeline.steps[0].pipeline",
        ),
        ({"strategy": {"slidingWindow": {}, "boundary": "SIDEWAYS"}}, "strategy.boundary"),
    ],
)
def test_camel_case_errors_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict(data)
    assert info.value.field == field


def test_an_unknown_camel_case_kind_is_named_as_written() -> None:
    with pytest.raises(InvalidConfig, match="'turnCnt'"):
        policy_from_dict({"trigger": {"turnCnt": 2}, "strategy": {"slidingWindow": {}}})


def test_the_trigger_bound_counts_the_proto_shaped_lists() -> None:
    many = [{"turnCount": 1}] * MAX_TRIGGERS
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict(
            {"trigger": {"anyOf": {"triggers": many}}, "strategy": {"slidingWindow": {}}}
        )
    assert info.value.field == "trigger.any_of"


def test_default_policy_reads_get_session_json() -> None:
    policy = POLICIES[1]
    text = json_format.MessageToJson(_message(policy))
    assert ServerConfig(default_policy=text).policy() == policy


def test_a_yaml_policy_file_may_use_camel_case(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "trigger: {anyOf: {triggers: [{turnCount: 20}, {tokenCount: 8000}]}}\n"
        "strategy: {slidingWindow: {maxEvents: 20}, boundary: BOUNDARY_TOOL_PAIR}\n"
    )
    assert ServerConfig(default_policy=str(path)).policy() == CompactionPolicy(
        AnyOf((TurnCount(20), TokenCount(8000))), SlidingWindow(20, Boundary.TOOL_PAIR)
    )


def test_default_policy_errors_name_the_setting_and_the_field() -> None:
    with pytest.raises(InvalidConfig) as info:
        ServerConfig(default_policy='{"strategy": {"slidingWindow": {"maxEvents": -1}}}').policy()
    assert info.value.field == "default_policy.strategy.sliding_window.max_events"


def _message(policy: CompactionPolicy) -> policy_pb2.CompactionPolicy:
    message = policy_pb2.CompactionPolicy()
    convert.policy_out(policy, message)
    return message
