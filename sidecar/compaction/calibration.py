"""A policy resolved against one session: calibrated token thresholds, the model's window.

Our token counts are estimates (cl100k); the provider's usage reports say
how far off they run for a session (``TokenCalibration.factor``: reported
over estimated). A threshold the user set in the provider's tokens is, in our
estimated tokens, the threshold divided by the factor. So instead of teaching
every trigger and strategy about calibration, the engine resolves the policy
once per check into plain estimated-token terms, and everything downstream
(triggers, strategies, pipelines) stays as it was:

- ``token_count(t)`` becomes ``token_count(ceil(t / factor))``;
- ``context_fraction(x)`` gets its window: ``(input window - output reserve)
  / factor`` estimated tokens, the model's profile's;
- ``token_budget(m)`` keeps ``floor(m / factor)`` estimated tokens (at least 1).

Counts of turns and events, intervals, summaries' own token settings and
``min_saved_tokens`` are not calibrated: they bound what the summarizer is
sent or how much a pass saves, not what the provider is sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sidecar.compaction.pipeline import Pipeline, Step
from sidecar.compaction.policy import CompactionPolicy, Strategy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import AllOf, AnyOf, ContextFraction, TokenCount, Trigger


@dataclass(frozen=True, slots=True)
class TokenScale:
    """What a policy is resolved against: the calibration factor and the usable window.

    ``usable_tokens`` is 0 when the session has no model (a
    ``context_fraction`` then never fires; the engine refuses it up front).
    """

    factor: float = 1.0
    usable_tokens: int = 0

    @property
    def is_identity(self) -> bool:
        return self.factor == 1.0 and self.usable_tokens == 0


def uses_context_fraction(policy: CompactionPolicy | None) -> bool:
    """True when the policy's trigger has a ``context_fraction`` anywhere in it."""
    return policy is not None and _has_fraction(policy.trigger)


def _has_fraction(trigger: Trigger | None) -> bool:
    if isinstance(trigger, ContextFraction):
        return True
    if isinstance(trigger, AnyOf | AllOf):
        return any(_has_fraction(t) for t in trigger.triggers)
    return False


def resolved(policy: CompactionPolicy, scale: TokenScale) -> CompactionPolicy:
    """``policy`` in estimated tokens for a session of this scale (see the module docstring)."""
    if scale.is_identity:
        return policy
    trigger = None if policy.trigger is None else _trigger(policy.trigger, scale)
    return CompactionPolicy(trigger=trigger, strategy=_strategy(policy.strategy, scale.factor))


def _trigger(trigger: Trigger, scale: TokenScale) -> Trigger:
    if isinstance(trigger, TokenCount):
        return TokenCount(max(1, math.ceil(trigger.threshold / scale.factor)))
    if isinstance(trigger, ContextFraction):
        window = math.floor(scale.usable_tokens / scale.factor)
        return ContextFraction(trigger.fraction, window_tokens=window)
    if isinstance(trigger, AnyOf):
        return AnyOf(tuple(_trigger(t, scale) for t in trigger.triggers))
    if isinstance(trigger, AllOf):
        return AllOf(tuple(_trigger(t, scale) for t in trigger.triggers))
    return trigger


def _strategy(strategy: Strategy, factor: float) -> Strategy:
    if isinstance(strategy, Pipeline):
        return replace(strategy, steps=tuple(_step(step, factor) for step in strategy.steps))
    return _step(strategy, factor)


def _step(strategy: Step, factor: float) -> Step:
    if factor != 1.0 and isinstance(strategy, TokenBudget):
        return replace(strategy, max_tokens=max(1, math.floor(strategy.max_tokens / factor)))
    return strategy
