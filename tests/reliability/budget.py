"""How hard the reliability suite pushes, and the figures it reports.

Quick mode (the default) runs inside the normal ``pytest -q`` and stays well
under a minute on two shared cores. ``RELIABILITY=long`` (``make reliability``)
runs the same tests with far more requests, clients and kills, and prints the
figures for docs/reliability.md at the end of the run.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

LONG = os.environ.get("RELIABILITY", "quick").strip().lower() == "long"


@dataclass(frozen=True, slots=True)
class Budget:
    """Sizes of every test in one mode."""

    fuzz_examples: int  # hypothesis examples per RPC
    garbage_connections: int  # raw-socket garbage connections per kind
    clients: int  # concurrent clients in the history test
    sessions: int
    ops_per_client: int
    kills: int  # SIGKILLs of the serve subprocess
    load_between_kills_s: tuple[float, float]
    summarizer_load_s: float


QUICK = Budget(
    fuzz_examples=30,
    garbage_connections=4,
    clients=8,
    sessions=3,
    ops_per_client=30,
    kills=3,
    load_between_kills_s=(0.6, 1.2),
    summarizer_load_s=2.0,
)

FULL = Budget(
    fuzz_examples=600,
    garbage_connections=60,
    clients=32,
    sessions=8,
    ops_per_client=250,
    kills=30,
    load_between_kills_s=(0.5, 3.0),
    summarizer_load_s=10.0,
)

BUDGET = FULL if LONG else QUICK

FIGURES: Counter[str] = Counter()
"""What this run did, summed over the tests: printed at the end (see conftest.py)."""

MEASURES: dict[str, float] = {}
"""The worst of what this run measured (peaks, p99s): printed at the end with ``MEASURE_LABELS``."""

MEASURE_LABELS = {
    "stream_flood_rss_growth_mib": "MiB the server grew under streams of 15 MB requests"
    " (the bound held: 1,200 quick / 2,048 long)",
    "stream_flood_context_p99_ms": "ms, another session's GetContext p99 during that flood",
    "search_attack_context_max_ms": "ms, the slowest GetContext while searches of"
    " thousands of words ran",
    "fair_share_quiet_p50_ms": "ms, a quiet session's unary append p50 with no load",
    "fair_share_loaded_p50_ms": "ms, its p50 while 8 streams flood other sessions",
    "fair_share_loaded_p99_ms": "ms, its p99 while 8 streams flood other sessions",
    "window_cost_context_p99_ms": "ms, another session's GetContext p99 while a big window"
    " (30,000 quick / 100,000 long events) was compacted, restored and cleared",
    "placeholder_compact_ms": "ms, a clearing of results whose names, ids and template"
    " are at their bounds (all {name})",
    "placeholder_context_max_ms": "ms, another session's slowest GetContext meanwhile",
    "shutdown_under_load_s": "s from SIGTERM to exit under load, 3 s grace (bound 6)",
}


def measured(key: str, value: float) -> None:
    """Keep the worst ``value`` seen for ``key`` this run."""
    MEASURES[key] = max(MEASURES.get(key, value), value)


LABELS = {
    "open_calls_ended_by_revocation": "open streams and watches ended by a token's removal",
    "oversized_answers_sent_without_content": "answers past the size limit, sent without content",
    "id_lists_sent_in_parts": "answers whose id lists passed the limit, sent and read in parts",
    "search_pages_bounded_in_bytes": "search pages of hits on large events, each within the limit",
    "requests_fuzzed": "requests fuzzed (every RPC; valid, boundary, malformed)",
    "garbage_connections": "connections of raw garbage bytes",
    "histories_checked": "session histories checked",
    "operations_checked": "client operations checked",
    "snapshots_checked": "GetContext snapshots checked",
    "acknowledged_events": "acknowledged events, every one found exactly once",
    "crashes_survived": "SIGKILLs survived",
    "lost_acks_retried": "lost acknowledgements retried",
    "disk_full_rejections": "appends refused while the disk was full",
    "identifier_refusals": "tool names and call ids past their bounds, refused naming the field",
    "placeholder_results_cleared": "results cleared with placeholders at their bound",
    "sigterms_under_load": "SIGTERMs under load, each exited within its grace",
}
