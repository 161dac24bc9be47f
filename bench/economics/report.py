"""What the economics run prints: each transcript's table, and what limits a missed target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.economics.pricing import PRICE_MODELS
from bench.economics.transcripts import Transcript


@dataclass(frozen=True, slots=True)
class Verdict:
    """Which policies a target compared: our cheapest (None: none had the recall), the peer's."""

    ours: str | None
    peer: str
    price: str


def report(
    t: Transcript, policies: dict[str, Any], floors: dict[str, float], say: Callable[[str], None]
) -> None:
    """The transcript's table: billed tokens per price model, cache hits, recall, passes."""
    names = [p.name for p in PRICE_MODELS]
    head = "".join(f"{n + ' billed':>17}" for n in names)
    say(f"  {'policy':<30}{head}{'hit ratio':>11}{'recall':>8}{'in ctx':>8}{'passes':>8}"
        f"{'max prompt':>12}")  # fmt: skip
    for name, f in policies.items():
        over = f" OVER WINDOW in {f['over_window_calls']} calls" if f["over_window_calls"] else ""
        say(
            f"  {name:<30}"
            + "".join(f"{f['prices'][n]['billed'] / 1e6:>15.2f} M" for n in names)
            + f"{f['prices']['anthropic']['cache_hit_ratio']:>11.2f}{f['recall']:>8.2f}"
            + f"{f['in_context']:>8.2f}{sum(f['passes'].values()):>8}"
            + f"{f['max_prompt_tokens']:>12}{over}"
        )
    say(
        f"  {'floor (each token once)':<30}" + "".join(f"{floors[n] / 1e6:>15.2f} M" for n in names)
    )


def _parts(figures: dict[str, Any], price: str) -> str:
    """A bill split by what it paid for, in millions of input tokens."""
    p = next(m for m in PRICE_MODELS if m.name == price)
    bill = figures["prices"][price]
    return (
        f"cached reads {bill['cached'] * p.read / 1e6:.2f} M, writes"
        f" {bill['written'] * p.write / 1e6:.2f} M, uncached {bill['uncached'] / 1e6:.2f} M,"
        f" summarizer {bill['summarizer'] / 1e6:.2f} M"
    )


def explain(verdict: Verdict, policies: dict[str, Any], floors: dict[str, float]) -> str:
    """What limits a missed target, measured: both bills split, and the floor beside them."""
    price, peer = verdict.price, verdict.peer
    floor = floors[price]
    peer_billed = policies[peer]["prices"][price]["billed"]
    if verdict.ours is None:
        return f"  limits: none of ours reached {peer}'s recall {policies[peer]['recall']:.2f}"
    ours_billed = policies[verdict.ours]["prices"][price]["billed"]
    return (
        f"  limits: the floor (each token billed once uncached, the overhead cached) is"
        f" {floor / peer_billed:.2f} of {peer}'s bill, so 0.5 leaves"
        f" {0.5 * peer_billed / floor:.2f} x the floor; {verdict.ours} pays"
        f" {ours_billed / floor:.2f} x it ({_parts(policies[verdict.ours], price)}),"
        f" {peer} {peer_billed / floor:.2f} x ({_parts(policies[peer], price)})"
    )
