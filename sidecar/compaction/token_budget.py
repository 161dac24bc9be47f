"""Token budget: keep the newest contiguous suffix that fits in N tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.boundary import settle_cut
from sidecar.compaction.window import (
    Window,
    check_max_dropped_identifiers,
    check_min_saved_tokens,
    plan_for_cut,
)
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, CompactionPlan, Event

DEFAULT_MAX_TOKENS = 4000


def budget_cut(real: Sequence[Event], budget: int) -> int:
    """Index of the oldest event of the newest suffix whose tokens fit in ``budget``.

    Walks newest to oldest and stops at the first event that would overflow:
    the suffix stays contiguous (skipping one large event would leave a gap).
    Returns ``len(real)`` when not even the newest event fits.
    """
    spent = 0
    cut = len(real)
    for index in range(len(real) - 1, -1, -1):
        spent += real[index].token_count
        if spent > budget:
            break
        cut = index
    return cut


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Keeps the newest conversation that fits in ``max_tokens`` less the pinned events.

    The latest system message and the summaries are sent with the conversation
    whatever the cut, so their tokens come off the budget first. If that leaves
    nothing, only the newest turn is kept. There is no "everything fits"
    shortcut: the events are always walked.
    """

    max_tokens: int = DEFAULT_MAX_TOKENS
    boundary: Boundary = Boundary.TURN
    min_saved_tokens: int | None = None
    max_dropped_identifiers: int | None = None
    name = "token_budget"

    def __post_init__(self) -> None:
        check_min_saved_tokens(self.min_saved_tokens)
        check_max_dropped_identifiers(self.max_dropped_identifiers)
        if isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise InvalidConfig(
                "strategy.token_budget.max_tokens",
                f"must be at least 1, got {self.max_tokens!r}",
            )

    def plan(self, events: Sequence[Event]) -> CompactionPlan:
        window = Window.of(events)
        remaining = self.max_tokens - window.pinned_tokens
        # With no budget left, propose cutting everything: the boundary rule
        # then keeps only the newest turn.
        proposed = budget_cut(window.real, remaining) if remaining > 0 else len(window.real)
        cut = settle_cut(window.real, proposed, self.boundary)
        return plan_for_cut(
            window,
            cut,
            strategy=self.name,
            proposed=proposed,
            min_saved_tokens=self.min_saved_tokens,
        )
