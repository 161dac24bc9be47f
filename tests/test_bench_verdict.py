"""The economics target's comparison, and the two reported beside it, on hand-made test rows."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from bench.economics.pricing import GPT_4O
from bench.economics.run import targets
from bench.economics.verdict import best_peer, compare, compare_within_noise, within_noise

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
