"""Which peer a trace family's policies are held to, and the bill ratio that comes out.

Pure functions over a family's test rows (``run_family``'s ``test``, as the
results JSON keeps them), so the target line and the page's tables are
computed the same way, and from the JSON alone.

**The target** (issue 33): per trace family and price model, the peer of
best test retention (the cheaper of equals); our cheapest policy at
retention >= that peer's, billed ÷ that peer's bill, must be <= 0.5.

A policy whose prompt passed the model's window on some trace (``failed_traces``:
the provider refuses that call and the agent stops) is no candidate on
either side: a peer that cannot run is not the one to beat, and a policy of
ours that cannot run is not an answer, whatever its retention up to there.

Two comparisons are reported beside it, labelled, never in its place:

- **against the best peer that compacts**: the peer of best retention among
  those that made at least one pass on the test traces. A peer that never
  fires at a family's sizes (a 100,000-token trigger on 10,000-token
  sessions) is no compaction under another name, and holds 1.000 that no
  policy which compacts can reach.
- **at matched retention within sampling noise**: ours whose retention is
  not below the best peer's by more than two standard errors of the
  difference. The error is the trace-clustered one of the paired difference
  (``retention_gap_se``): both policies ran on the same traces, and a trace's
  identifier uses share a fate, so the unit of sampling is the trace (on
  τ-bench the task: its four trials are one cluster), not the use. Rows
  without per-trace counts fall back to two proportions over the pooled
  uses, which counts uses as independent and so narrows the band.
"""

from __future__ import annotations

import math
import re
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


def runs(row: Mapping[str, Any]) -> bool:
    """Whether the policy ran every trace to its end: no prompt past the model's window."""
    return not row.get("failed_traces")


def best_peer(test: Rows, price: str, compacting: bool = False) -> str | None:
    """The peer of best retention that ``runs``, the cheaper under ``price`` of equals;
    ``compacting``: only among the peers that made a pass. None when there is no such peer."""
    rows = [
        (name, row)
        for name, row in test.items()
        if row["kind"] == "peer"
        and runs(row)
        and (not compacting or any(row.get("passes", {}).values()))
    ]
    if not rows:
        return None
    return max(rows, key=lambda r: (r[1]["retention"], -r[1]["prices"][price]["billed"]))[0]


def compare(test: Rows, price: str, peer: str | None, floor: float | None = None) -> Comparison:
    """Our cheapest policy under ``price`` at retention >= ``floor`` (default: ``peer``'s),
    billed ÷ ``peer``'s bill."""
    best_ours = max(
        (r["retention"] for r in test.values() if r["kind"] == "ours" and runs(r)), default=0.0
    )
    if peer is None:
        return Comparison(None, 0.0, 0.0, None, math.inf, best_ours)
    row = test[peer]
    floor = row["retention"] if floor is None else floor
    fit = [
        (r["prices"][price]["billed"], name)
        for name, r in test.items()
        if r["kind"] == "ours" and runs(r) and r["retention"] >= floor
    ]
    if not fit:
        return Comparison(peer, row["retention"], floor, None, math.inf, best_ours)
    billed, ours = min(fit)
    return Comparison(
        peer, row["retention"], floor, ours, billed / row["prices"][price]["billed"], best_ours
    )


def cluster(trace: str) -> str:
    """The sampling unit a trace belongs to: its task on τ-bench (``tau-25-3`` → ``tau-25``,
    the four trials of a task are one cluster), else the trace itself."""
    found = re.fullmatch(r"(tau-\d+)-\d+", trace)
    return found.group(1) if found else trace


def _clustered(row: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Identifier uses and holds per cluster of ``row``'s ``per_trace`` counts."""
    out: dict[str, tuple[int, int]] = {}
    for t in row.get("per_trace") or ():
        used, held = out.get(cluster(t["trace"]), (0, 0))
        out[cluster(t["trace"])] = (used + int(t["used"]), held + int(t["held"]))
    return out


def retention_se(row: Mapping[str, Any]) -> float | None:
    """The trace-clustered standard error of ``row``'s retention (a ratio estimator over
    clusters); None without per-trace counts or with fewer than two clusters using any."""
    groups = [g for g in _clustered(row).values() if g[0]]
    n, used = len(groups), sum(u for u, _ in groups)
    if n < 2 or not used:
        return None
    ratio = sum(h for _, h in groups) / used
    spread = sum((h - ratio * u) ** 2 for u, h in groups) * n / (n - 1)
    return math.sqrt(spread) / used


def retention_gap_se(a: Mapping[str, Any], b: Mapping[str, Any]) -> float | None:
    """The standard error of ``a``'s retention less ``b``'s, paired by cluster (both ran the
    same traces); None without per-trace counts for the same clusters in both."""
    ga, gb = _clustered(a), _clustered(b)
    if len(ga) < 2 or set(ga) != set(gb):
        return None
    used_a, used_b = sum(u for u, _ in ga.values()), sum(u for u, _ in gb.values())
    if not used_a or not used_b:
        return None
    ra = sum(h for _, h in ga.values()) / used_a
    rb = sum(h for _, h in gb.values()) / used_b
    terms = [(ga[k][1] - ra * ga[k][0]) / used_a - (gb[k][1] - rb * gb[k][0]) / used_b for k in ga]
    return math.sqrt(sum(t * t for t in terms) * len(terms) / (len(terms) - 1))


def within_noise(peer: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Whether ``ours``' retention is below ``peer``'s by no more than ``NOISE_SE`` standard
    errors of the difference: trace-clustered and paired (``retention_gap_se``) when both rows
    have per-trace counts, else two proportions over the pooled identifier uses."""
    gap = float(peer["retention"]) - float(ours["retention"])
    clustered = retention_gap_se(peer, ours)
    if clustered is not None:
        return gap <= NOISE_SE * clustered + 1e-12
    n_peer, n_ours = int(peer["identifiers_used"]), int(ours["identifiers_used"])
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
        r["retention"]
        for r in test.values()
        if r["kind"] == "ours" and runs(r) and within_noise(test[peer], r)
    ]
    return compare(test, price, peer, min(admitted) if admitted else math.inf)
