from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import MAX_POLICY_BYTES, CompactionPolicy, policy_from_dict
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import AnyOf, TokenCount, TurnCount
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary


def test_round_trip_keeps_every_setting() -> None:
    policy = CompactionPolicy(
        trigger=AnyOf((TurnCount(20), TokenCount(8000))),
        strategy=Summarize(
            max_events_to_keep=6,
            overlap=1,
            model="m",
            temperature=0.5,
            thinking_budget=-1,
            boundary=Boundary.TOOL_PAIR,
        ),
    )
    assert policy_from_dict(policy.to_dict()) == policy


def test_placeholders_without_identifiers_are_stored_and_read_back() -> None:
    policy = policy_from_dict({"strategy": {"clear_tool_results": {"keep_identifiers": False}}})
    assert policy.strategy == ClearToolResults(keep_identifiers=False)
    assert policy.to_dict()["strategy"]["clear_tool_results"]["keep_identifiers"] is False
    assert policy_from_dict(policy.to_dict()) == policy


def test_sizes_are_stored_as_they_apply_texts_only_when_given() -> None:
    # A default that moves must not move a stored session's window; a prompt
    # left to its default follows a better one.
    data = CompactionPolicy(None, Summarize()).to_dict()
    assert data == {
        "strategy": {
            "summarize": {
                "max_events_to_keep": 10,
                "overlap": 2,
                "max_summary_tokens": 1024,
                "max_input_tokens": 100_000,
                "max_tool_result_tokens": 2000,
            },
            "boundary": "TURN",
        }
    }
    written = policy_from_dict({"strategy": {"turn_window": {"max_turns": 10}}})
    assert written.to_dict()["strategy"] == {"turn_window": {"max_turns": 10}, "boundary": "TURN"}
    prompted = CompactionPolicy(None, Summarize(system_prompt="Be brief.")).to_dict()
    assert prompted["strategy"]["summarize"]["system_prompt"] == "Be brief."


def test_yaml_like_document_parses() -> None:
    policy = policy_from_dict(
        {
            "trigger": {"turn_count": 3},
            "strategy": {"sliding_window": {"max_events": 4}, "boundary": "BOUNDARY_TOOL_PAIR"},
        }
    )
    assert policy == CompactionPolicy(TurnCount(3), SlidingWindow(4, Boundary.TOOL_PAIR))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({}, "policy.strategy"),
        ({"strategy": {}}, "strategy"),
        ({"strategy": {"nope": {}}}, "strategy"),
        (
            {"strategy": {"sliding_window": {"max_events": "ten"}}},
            "strategy.sliding_window.max_events",
        ),
        ({"strategy": {"sliding_window": {"colour": 1}}}, "strategy.sliding_window.colour"),
        ({"strategy": {"summarize": {"temperature": "hot"}}}, "strategy.summarize.temperature"),
        ({"strategy": {"summarize": {"temperature": 3.5}}}, "strategy.summarize.temperature"),
        (
            {"strategy": {"summarize": {"thinking_budget": -2}}},
            "strategy.summarize.thinking_budget",
        ),
        ({"strategy": {"sliding_window": {}, "boundary": "SIDEWAYS"}}, "strategy.boundary"),
        (
            {"strategy": {"summarize": {"max_events_to_keep": 3, "overlap": 3}}},
            "strategy.summarize.overlap",
        ),
        ({"strategy": {"turn_window": {}}, "trigger": {"any_of": []}}, "trigger.any_of"),
        (
            {"strategy": {"turn_window": {}}, "trigger": {"any_of": [{"turn_count": 0}]}},
            "trigger.any_of[0].turn_count",
        ),
        ({"strategy": {"turn_window": {}}, "trigger": {"sometimes": 1}}, "trigger"),
        ({"strategy": {"turn_window": {}}, "trigger": {"always": False}}, "trigger.always"),
        ({"strategy": {"turn_window": {}}, "extra": 1}, "policy.extra"),
        (
            {"strategy": {"clear_tool_results": {"keep_identifiers": "yes"}}},
            "strategy.clear_tool_results.keep_identifiers",
        ),
    ],
)
def test_bad_documents_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict(data)
    assert info.value.field == field


@pytest.mark.parametrize(("keep", "overlap"), [(1, 0), (2, 1), (3, 2), (10, 2)])
def test_an_unset_overlap_fits_a_small_kept_window(keep: int, overlap: int) -> None:
    """Unset, ``overlap`` is 2, or one less than a smaller ``max_events_to_keep``: a
    document that sets only the window (at least 1) is valid, alone or as a step."""
    alone = policy_from_dict({"strategy": {"summarize": {"max_events_to_keep": keep}}})
    assert isinstance(alone.strategy, Summarize)
    assert alone.strategy.overlap == overlap
    step = {"summarize": {"max_events_to_keep": keep}}
    piped = policy_from_dict({"strategy": {"pipeline": {"steps": [step]}}})
    assert isinstance(piped.strategy, Pipeline)
    assert piped.strategy.steps[0] == alone.strategy
    # Set, it is taken as it is, and checked.
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict({"strategy": {"summarize": {"max_events_to_keep": keep, "overlap": keep}}})
    assert info.value.field == "strategy.summarize.overlap"


def test_deeply_nested_triggers_are_refused() -> None:
    trigger: dict[str, Any] = {"turn_count": 1}
    for _ in range(20):
        trigger = {"any_of": [trigger]}
    with pytest.raises(InvalidConfig, match="nest deeper"):
        policy_from_dict({"strategy": {"turn_window": {}}, "trigger": trigger})


@pytest.mark.parametrize(
    ("strategy", "field"),
    [
        ({"clear_tool_results": {"placeholder": "x" * 2049}}, "strategy.clear_tool_results"),
        (
            {
                "pipeline": {
                    "steps": [
                        {"sliding_window": {}},
                        {"clear_tool_results": {"placeholder": "é" * 1025}},
                    ]
                }
            },
            "strategy.pipeline.steps[1].clear_tool_results",
        ),
    ],
)
def test_a_placeholder_template_over_its_bound_is_refused_unless_stored(
    strategy: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        policy_from_dict({"strategy": strategy})
    assert refused.value.field == f"{field}.placeholder"
    # A policy stored before the bound goes on working: its expansions are cut instead.
    assert policy_from_dict({"strategy": strategy}, bounded=False)


def test_the_size_bound_is_on_the_policy_as_written_not_the_defaults_stored_beside_it() -> None:
    """Eight summarize steps with 8,100-character prompts fit the 64 KiB bound as written; the
    defaults now stored beside them took the stored document past it, so a policy accepted
    before was refused (a default policy file, a policy read back and sent again)."""
    step = {"summarize": {"system_prompt": "x" * 8100}}
    policy = policy_from_dict({"strategy": {"pipeline": {"steps": [step] * 8}}})
    assert len(policy.to_json(defaults=False)) <= MAX_POLICY_BYTES < len(policy.to_json())
    assert policy_from_dict(json.loads(policy.to_json())) == policy  # read back, sent again
