"""The economics target's comparison, and the two reported beside it, on hand-made test rows."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from bench.economics.pricing import GPT_4O
from bench.economics.run import targets
from bench.economics.verdict import (
    best_peer,
    cluster,
    compare,
    compare_within_noise,
    retention_se,
    within_noise,
)

PRICE = "gpt-4o"


def row(kind: str, held: int, billed: float, passes: int = 0, used: int = 1000) -> dict[str, Any]:
    return {
        "kind": kind,
        "retention": held / used,
        "identifiers_used": used,
        "identifiers_held": held,
        "passes": {"pass": passes} if passes else {},
        "prices": {PRICE: {"billed": billed}},
    }


# τ-bench's shape: the peers of best retention never fire; ours all compact and lose a little.
ROWS = {
    "none": row("baseline", 1000, 100.0),
    "budget": row("ours", 990, 98.0, passes=3),
    "summary": row("ours", 998, 101.0, passes=3),
    "clear_peer": row("peer", 1000, 100.0),
    "summary_peer": row("peer", 995, 106.0, passes=14),
    "adk_peer": row("peer", 875, 150.0, passes=166),
}


def test_the_best_peer_is_the_best_retention_even_one_that_never_compacts() -> None:
    assert best_peer(ROWS, PRICE) == "clear_peer"
    assert best_peer(ROWS, PRICE, compacting=True) == "summary_peer"


def test_no_policy_of_ours_at_the_peers_retention_is_an_infinite_ratio_and_says_so() -> None:
    plain = compare(ROWS, PRICE, "clear_peer")
    assert (plain.ours, plain.ratio, plain.best_ours) == (None, math.inf, 0.998)
    fam = {"test": ROWS}
    (target,) = targets("tau-airline", fam, [replace(GPT_4O, name=PRICE)])
    assert target.ratio == math.inf
    assert not target.passed
    assert target.description.startswith("none of ours (best 0.998) / clear_peer billed")


def test_against_the_best_compacting_peer_ours_at_its_retention_is_compared() -> None:
    against = compare(ROWS, PRICE, best_peer(ROWS, PRICE, compacting=True))
    assert (against.peer, against.ours) == ("summary_peer", "summary")
    assert against.ratio == 101.0 / 106.0


def test_matched_retention_admits_ours_within_two_standard_errors_only() -> None:
    peer = ROWS["clear_peer"]
    assert within_noise(peer, ROWS["summary"])  # 2 of 1000 lost: inside the band
    assert not within_noise(peer, ROWS["budget"])  # 10 of 1000: outside
    matched = compare_within_noise(ROWS, PRICE, "clear_peer")
    assert (matched.ours, matched.floor) == ("summary", 0.998)
    assert matched.ratio == 101.0 / 100.0


def test_the_page_states_each_miss_by_how_much_and_the_comparisons_beside_it() -> None:
    from bench.economics import table

    none = ROWS["none"]["prices"][PRICE]["billed"]
    test = {
        name: {**r, "setting": "", "conversation_vs_none": 1.0,
               "prices": {PRICE: {**r["prices"][PRICE], "billed_cheap_summarizer":
                                  r["prices"][PRICE]["billed"], "vs_none":
                                  r["prices"][PRICE]["billed"] / none}}}
        for name, r in ROWS.items()
    }  # fmt: skip
    fam = {"about": "τ-bench-like", "test_traces": 1, "overhead_tokens": [3681], "test": test}
    (target,) = targets("tau-airline", fam, [replace(GPT_4O, name=PRICE)])
    result = {
        "mode": "full",
        "total_s": 60.0,
        "price_models": {PRICE: {}},
        "traces": {"tau-airline": fam},
        "targets": {target.name: target.to_json(), "other": {**target.to_json(), "ratio": 1.0}},
    }
    page = table.tables(result)
    assert "| — | miss (none of ours reaches the peer's retention) |" in page
    assert "| 1.00 | miss (2.0 x the bound) |" in page
    beside = [line for line in page.splitlines() if line.startswith("| tau-airline | gpt-4o |")]
    assert beside == [
        "| tau-airline | gpt-4o"
        " | — miss: none of ours at >= 1.000 (`clear_peer`; ours best 0.998)"
        " | 0.95 miss: `summary` / `summary_peer` at >= 0.995"
        " | 1.01 miss: `summary` / `clear_peer` at >= 0.998 |"
    ]


def _traced(kind: str, held_per_trace: list[int], used: int = 100) -> dict[str, Any]:
    rows = [{"trace": f"t{i}", "used": used, "held": h} for i, h in enumerate(held_per_trace)]
    total = used * len(held_per_trace)
    return {**row(kind, sum(held_per_trace), 100.0, used=total), "per_trace": rows}


def test_noise_is_measured_between_traces_so_a_loss_in_one_trace_is_within_it() -> None:
    """The same 20 lost uses of 1,000: all in one trace is within two trace-clustered standard
    errors (another sample of traces could miss it), one or two in every trace is not; the pooled
    count of uses, blind to traces, would call both outside."""
    peer = _traced("peer", [100] * 10)
    one_trace = _traced("ours", [80] + [100] * 9)
    every_trace = _traced("ours", [98] * 10)
    assert within_noise(peer, one_trace)
    assert not within_noise(peer, every_trace)
    pooled = {k: v for k, v in one_trace.items() if k != "per_trace"}
    assert not within_noise(peer, pooled)
    se = retention_se(one_trace)
    assert se is not None
    assert 0.015 < se < 0.025


def test_tau_bench_trials_of_one_task_are_one_cluster() -> None:
    assert cluster("tau-25-3") == cluster("tau-25-0") == "tau-25"
    assert cluster("coding-7") == "coding-7"


def test_a_policy_whose_prompt_passed_the_window_is_no_candidate_on_either_side() -> None:
    """The peer of best retention overflowed the model's window on a trace (the provider refuses
    the call): the next peer that runs is compared; an overflowing policy of ours is not an
    answer, however cheap."""
    rows = {
        **ROWS,
        "clear_peer": {**ROWS["clear_peer"], "failed_traces": 1},
        "cheap": {**row("ours", 999, 10.0, passes=3), "failed_traces": 2},
    }
    assert best_peer(rows, PRICE) == "summary_peer"
    against = compare(rows, PRICE, "summary_peer")
    assert (against.ours, against.best_ours) == ("summary", 0.998)
