"""A policy resolved against a session: calibrated thresholds and the model's window."""

from __future__ import annotations

import pytest

from sidecar.compaction.calibration import TokenScale, resolved, uses_context_fraction
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import AnyOf, ContextFraction, Interval, TokenCount
from sidecar.errors import InvalidConfig
from sidecar.model import SessionCounters, TokenCalibration


def at(tokens: int) -> SessionCounters:
    return SessionCounters(tokens=tokens)


def test_a_token_threshold_is_divided_by_the_factor() -> None:
    policy = CompactionPolicy(TokenCount(1000), TokenBudget(max_tokens=600))
    doubled = resolved(policy, TokenScale(factor=2.0))
    assert doubled.trigger == TokenCount(500)
    assert doubled.strategy == TokenBudget(max_tokens=300)
    assert not doubled.trigger.fires(at(499))
    assert doubled.trigger.fires(at(500))
    halved = resolved(policy, TokenScale(factor=0.5))
    assert halved.trigger == TokenCount(2000)


def test_a_context_fraction_is_of_the_window_less_the_output_calibrated() -> None:
    policy = CompactionPolicy(ContextFraction(0.5), TokenBudget())
    plain = resolved(policy, TokenScale(usable_tokens=1000))
    assert plain.trigger is not None
    assert not plain.trigger.fires(at(499))
    assert plain.trigger.fires(at(500))
    calibrated = resolved(policy, TokenScale(factor=1.25, usable_tokens=1000))
    assert calibrated.trigger is not None
    assert not calibrated.trigger.fires(at(399))
    assert calibrated.trigger.fires(at(400))


def test_an_unresolved_fraction_never_fires() -> None:
    assert not ContextFraction(0.1).fires(at(10**9))


def test_nested_triggers_and_pipeline_steps_are_resolved_too() -> None:
    policy = CompactionPolicy(
        AnyOf((Interval(3), TokenCount(900), ContextFraction(1.0))),
        Pipeline((ClearToolResults(), TokenBudget(max_tokens=90))),
    )
    assert uses_context_fraction(policy)
    out = resolved(policy, TokenScale(factor=3.0, usable_tokens=3000))
    assert out.trigger == AnyOf((Interval(3), TokenCount(300), ContextFraction(1.0, 1000)))
    assert isinstance(out.strategy, Pipeline)
    assert out.strategy.steps == (ClearToolResults(), TokenBudget(max_tokens=30))


def test_an_uncalibrated_session_without_a_model_keeps_its_policy_as_is() -> None:
    policy = CompactionPolicy(TokenCount(10), TokenBudget())
    assert resolved(policy, TokenScale()) is policy
    assert not uses_context_fraction(policy)


@pytest.mark.parametrize("value", [0, -0.1, 1.01, float("nan"), float("inf"), True, "0.5"])
def test_a_fraction_is_more_than_zero_and_at_most_one(value: object) -> None:
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict({"trigger": {"context_fraction": value}, "strategy": {"token_budget": {}}})
    assert info.value.field == "trigger.context_fraction"


def test_a_fraction_round_trips_through_the_policy_document() -> None:
    data = {"trigger": {"context_fraction": 0.8}, "strategy": {"token_budget": {}}}
    policy = policy_from_dict(data)
    assert policy.trigger == ContextFraction(0.8)
    assert policy_from_dict(policy.to_dict()) == policy


def test_the_calibration_averages_bounded_reports_then_moves_by_an_eighth() -> None:
    calibration = TokenCalibration()
    for ratio in (1.2, 1.4, 1.0):
        calibration = calibration.after_report(ratio)
    assert calibration.samples == 3
    assert calibration.factor == pytest.approx((1.2 + 1.4 + 1.0) / 3)
    for _ in range(20):
        calibration = calibration.after_report(1.3)
    steady = calibration.factor
    assert steady == pytest.approx(1.3, abs=0.01)
    assert calibration.after_report(100.0).factor == pytest.approx(steady + (4.0 - steady) / 8)
    assert TokenCalibration().after_report(0.0).factor == 0.25
