"""Which peer a trace family's policies are held to, and the bill ratio that comes out.

Pure functions over a family's test rows (``run_family``'s ``test``, as the
results JSON keeps them), so the target line and the page's tables are
computed the same way, and from the JSON alone.

**The target** (issue 33): per trace family and price model, the peer of
best test retention (the cheaper of equals); our cheapest policy at
retention >= that peer's, billed ÷ that peer's bill, must be <= 0.5.

Two comparisons are reported beside it, labelled, never in its place:

- **against the best peer that compacts**: the peer of best retention among
  those that made at least one pass on the test traces. A peer that never
  fires at a family's sizes (a 100,000-token trigger on 10,000-token
  sessions) is no compaction under another name, and holds 1.000 that no
  policy which compacts can reach.
- **at matched retention within sampling noise**: ours whose retention is
  not below the best peer's by more than two standard errors of the
  difference (two proportions over the identifier uses, pooled). Uses are
  counted as independent draws, which they are not (a trace's uses share a
  fate), so the band is narrower than the true noise: a conservative band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Rows = Mapping[str, Mapping[str, Any]]
"""A family's test rows by policy name: kind, retention, identifier counts, passes, prices."""
TARGET_RATIO = 0.5
"""The target's bound: billed ÷ the compared peer's bill."""
NOISE_SE = 2.0
"""The matched-retention band: this many standard errors of the retention difference."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """Our cheapest policy at retention >= ``floor`` against ``peer``, billed under one price
    model; ``ours`` is None (and ``ratio`` infinite) when no policy of ours reaches it."""

    peer: str | None
    peer_retention: float
    floor: float
    ours: str | None
    ratio: float
    best_ours: float


def best_peer(test: Rows, price: str, compacting: bool = False) -> str | None:
    """The peer of best retention, the cheaper under ``price`` of equals; ``compacting``: only
    among the peers that made a pass. None when there is no such peer."""
    rows = [
        (name, row)
        for name, row in test.items()
        if row["kind"] == "peer" and (not compacting or any(row.get("passes", {}).values()))
    ]
    if not rows:
        return None
    return max(rows, key=lambda r: (r[1]["retention"], -r[1]["prices"][price]["billed"]))[0]


def compare(test: Rows, price: str, peer: str | None, floor: float | None = None) -> Comparison:
    """Our cheapest policy under ``price`` at retention >= ``floor`` (default: ``peer``'s),
    billed ÷ ``peer``'s bill."""
    best_ours = max((r["retention"] for r in test.values() if r["kind"] == "ours"), default=0.0)
    if peer is None:
        return Comparison(None, 0.0, 0.0, None, math.inf, best_ours)
    row = test[peer]
    floor = row["retention"] if floor is None else floor
    fit = [
        (r["prices"][price]["billed"], name)
        for name, r in test.items()
        if r["kind"] == "ours" and r["retention"] >= floor
    ]
    if not fit:
        return Comparison(peer, row["retention"], floor, None, math.inf, best_ours)
    billed, ours = min(fit)
    return Comparison(
        peer, row["retention"], floor, ours, billed / row["prices"][price]["billed"], best_ours
    )


def within_noise(peer: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Whether ``ours``' retention is below ``peer``'s by no more than ``NOISE_SE`` standard
    errors of the difference (pooled over both rows' identifier uses)."""
    n_peer, n_ours = int(peer["identifiers_used"]), int(ours["identifiers_used"])
    gap = float(peer["retention"]) - float(ours["retention"])
    if not n_peer or not n_ours:
        return gap <= 0.0
    pooled = (peer["identifiers_held"] + ours["identifiers_held"]) / (n_peer + n_ours)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_peer + 1 / n_ours))
    return gap <= NOISE_SE * se + 1e-12


def compare_within_noise(test: Rows, price: str, peer: str | None) -> Comparison:
    """``compare`` with ours admitted when ``within_noise`` of ``peer``: the floor is the
    lowest retention of ours so admitted."""
    if peer is None:
        return compare(test, price, None)
    admitted = [
        r["retention"] for r in test.values() if r["kind"] == "ours" and within_noise(test[peer], r)
    ]
    return compare(test, price, peer, min(admitted) if admitted else math.inf)
