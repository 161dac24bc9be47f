"""Context economics: ``python -m bench.economics [--quick] [--json OUT] [--plot PNG]``.

Replays the three transcripts of ``bench.economics.transcripts`` through the
real server (in process, SQLite, ``--summarizer extractive``) under no
compaction, our policies and the peers' defaults (``bench.economics.policies``),
prices every model call under each provider's cache rules
(``bench.economics.pricing``) and measures recall of the planted facts.

Targets, one per transcript and price model, as ratios in one run: our best
policy's billed input tokens <= 0.5 x the best peer default's, among the
policies whose prompts fit the model's window, ours taken only with recall at
least that peer's. The benchmark prices contexts; it does not judge summary
quality: the summarizer is the offline extractive one, every summary capped
at the same ``max_summary_tokens``. ``--quick`` replays a tenth or less of
each transcript against a fifth of its window (the smoke test runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import Target
from bench.economics.policies import HIGH, LOW, MIN_SAVED, SUMMARY_TOKENS, Entry, entries
from bench.economics.pricing import PRICE_MODELS, Bill, Key, PriceModel, bill, shared_prefix_tokens
from bench.economics.replay import Replay, replay
from bench.economics.report import Verdict, explain, report
from bench.economics.sweep import SWEEP_TRANSCRIPT, depth_sweep
from bench.economics.transcripts import TRANSCRIPTS, Transcript
from sidecar.client import AsyncClient
from sidecar.compaction.tokens import count_event
from sidecar.server.app import start
from sidecar.server.config import ServerConfig

TARGET_RATIO = 0.5
QUICK = {"ops": (16, 25_600), "coding": (6, 25_600), "chat": (24, 6_400)}
"""--quick: each transcript's turns and window (the smoke test's size, well under a minute)."""
DEFAULT_JSON = Path(__file__).parent.parent / "results-economics.json"
NOTE = (
    "prices contexts, does not judge summary quality (extractive summarizer, "
    f"max_summary_tokens {SUMMARY_TOKENS})"
)
_POINTS = 200  # points per cumulative curve kept for the plot


def say(line: str) -> None:
    print(line, flush=True)


def transcripts(quick: bool) -> list[Transcript]:
    """The transcripts at full size, or at their ``QUICK`` size."""
    return [
        make(*(QUICK[name] if quick else (turns, window)))
        for name, (make, turns, window) in TRANSCRIPTS.items()
    ]


def _keep_events(t: Transcript) -> int:
    """Our summaries keep about LOW of the window: that many events at the session's mean size."""
    tokens = sum(count_event(e) for turn in t.turns for e in turn)
    mean = max(1, tokens // max(1, t.events))
    return max(4, int(t.window_tokens * LOW) // mean)


def floor(none: Replay, prices: PriceModel, overhead: int) -> float:
    """A lower bound for any policy: each token shown once, the overhead always cached.

    Every call pays for what was appended since the call before it, at the
    uncached price, and reads the overhead from the cache; the rest of the
    window is taken as free.
    """
    total = 0.0
    previous: tuple[Key, ...] = ()
    for call in none.calls:
        new = call.window_tokens - shared_prefix_tokens(previous, call.window)
        total += overhead * prices.read + new
        previous = call.window
    return total


def _figures(t: Transcript, entry: Entry, done: Replay) -> dict[str, Any]:
    prompts = [t.overhead_tokens + c.window_tokens for c in done.calls]
    needed = len(done.recalls)
    recalled = sum(r.in_context or r.found_by_search for r in done.recalls)
    figures: dict[str, Any] = {
        "kind": entry.kind,
        "calls": len(done.calls),
        "prompt_tokens": sum(prompts),
        "max_prompt_tokens": max(prompts),
        "over_window_calls": sum(p > t.window_tokens for p in prompts),
        "passes": done.passes,
        "summary_input_tokens": done.summary_input_tokens,
        "summary_output_tokens": done.summary_output_tokens,
        "recall": recalled / needed if needed else 1.0,
        "in_context": sum(r.in_context for r in done.recalls) / needed if needed else 1.0,
        "facts": {
            r.fact.name: "context" if r.in_context else "search" if r.found_by_search else "lost"
            for r in done.recalls
        },
        "prices": {},
    }
    for prices in PRICE_MODELS:
        bills = bill(done.calls, prices, t.overhead_tokens)
        figures["prices"][prices.name] = _priced(bills)
    return figures


def _priced(bills: list[Bill]) -> dict[str, Any]:
    prompt = sum(b.prompt for b in bills)
    running = 0.0
    curve = []
    step = max(1, len(bills) // _POINTS)
    for i, b in enumerate(bills):
        running += b.billed
        if i % step == 0 or i == len(bills) - 1:
            curve.append([i + 1, round(running)])
    return {
        "billed": running,
        "cached": sum(b.cached for b in bills),
        "written": sum(b.written for b in bills),
        "uncached": sum(b.uncached for b in bills),
        "summarizer": sum(b.summarizer for b in bills),
        "cache_hit_ratio": sum(b.cached for b in bills) / prompt if prompt else 0.0,
        "curve": curve,
    }


def _best(
    policies: dict[str, Any], kind: str, price: str, recall: float = 0.0, in_context: float = 0.0
) -> str | None:
    """The cheapest policy of ``kind`` that fits the window, with at least ``recall`` (in
    context or through the recall tool) and ``in_context`` (in context alone)."""
    fits = [
        (f["prices"][price]["billed"], name)
        for name, f in policies.items()
        if f["kind"] == kind
        and f["over_window_calls"] == 0
        and f["recall"] >= recall
        and f["in_context"] >= in_context
    ]
    return min(fits)[1] if fits else None


def in_context_comparison(policies: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per price model, a stricter comparison than the target's (reported, not a target): our
    cheapest policy keeping at least the best peer's in-context recall, ÷ that peer."""
    out = {}
    for prices in PRICE_MODELS:
        peer = _best(policies, "peer", prices.name)
        if peer is None:
            continue
        f = policies[peer]
        ours = _best(policies, "ours", prices.name, f["recall"], f["in_context"])
        billed = f["prices"][prices.name]["billed"]
        out[prices.name] = {
            "ours": ours,
            "peer": peer,
            "peer_in_context": f["in_context"],
            "ratio": (
                policies[ours]["prices"][prices.name]["billed"] / billed
                if ours is not None
                else None
            ),
        }
    return out


def targets(
    t: Transcript, policies: dict[str, Any], floors: dict[str, float]
) -> list[tuple[Target, Verdict]]:
    """One target per price model: our cheapest policy (recall at least the peer's) ÷ the peer's."""
    out = []
    for prices in PRICE_MODELS:
        peer = _best(policies, "peer", prices.name)
        if peer is None:
            continue
        ours = _best(policies, "ours", prices.name, policies[peer]["recall"])
        peer_billed = policies[peer]["prices"][prices.name]["billed"]
        ratio = (
            policies[ours]["prices"][prices.name]["billed"] / peer_billed
            if ours is not None
            else float("inf")
        )
        target = Target(
            f"economics_{t.name}_{prices.name}",
            ratio,
            TARGET_RATIO,
            False,
            f"{ours} / {peer} billed input tokens ({prices.name} prices);"
            f" floor / {peer}: {floors[prices.name] / peer_billed:.2f}",
        )
        out.append((target, Verdict(ours, peer, prices.name)))
    return out


def server_config(db: Path) -> ServerConfig:
    """The real server on a free loopback port over SQLite file ``db``, with the extractive
    summarizer and no default policy (a session without one never compacts)."""
    return replace(
        ServerConfig(),
        listen="127.0.0.1:0",
        store=f"sqlite:///{db}",
        default_policy="none",
        summarizer="extractive",
        shutdown_grace_s=1.0,
        log_level="WARNING",
    )


async def run_all(quick: bool, workdir: Path) -> tuple[dict[str, Any], list[Target]]:
    sidecar = await start(server_config(workdir / "economics.db"))
    figures: dict[str, Any] = {}
    all_targets: list[Target] = []
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}", default_timeout=120.0) as client:
            for t in transcripts(quick):
                started = time.perf_counter()
                say(
                    f"{t.name}: {len(t.turns)} turns, {t.events} events, window"
                    f" {t.window_tokens} tokens, overhead {t.overhead_tokens}, facts"
                    f" {len(t.facts)}; calls {t.call_gap_s:g} s apart in a turn, turns"
                    f" {t.turn_gap_s:g} s, a {t.pause_s:g} s pause every {t.pause_every}"
                )
                policies: dict[str, Any] = {}
                replays: dict[str, Replay] = {}
                for entry in entries(t.window_tokens, keep_events=_keep_events(t)):
                    began = time.perf_counter()
                    done = await replay(client, f"{t.name}-{entry.name}", t, entry)
                    say(f"  replayed under {entry.name} in {time.perf_counter() - began:.1f} s")
                    replays[entry.name] = done
                    policies[entry.name] = _figures(t, entry, done)
                floors = {
                    p.name: floor(replays["none"], p, t.overhead_tokens) for p in PRICE_MODELS
                }
                report(t, policies, floors, say)
                found = targets(t, policies, floors)
                for target, verdict in found:
                    say(f"  {target.description}")
                    if not target.passed:
                        say(explain(verdict, policies, floors))
                stricter = in_context_comparison(policies)
                for price, row in stricter.items():
                    ratio = "none qualifies" if row["ratio"] is None else f"{row['ratio']:.2f}"
                    say(
                        f"  in context ({price}): {row['ours']} / {row['peer']} {ratio}, our"
                        f" cheapest keeping {row['peer_in_context']:.2f} of the facts in context"
                        " as the peer does (reported, not a target)"
                    )
                swept = t.name == SWEEP_TRANSCRIPT and not quick
                sweep = await depth_sweep(client, t) if swept else []
                for row in sweep:
                    say(
                        f"  depth: trigger {row['high']:g} x window, budget {row['low']:g}:"
                        f" {row['passes']} passes, billed"
                        + ", ".join(
                            f" {p.name} {row[p.name]['billed'] / 1e6:.2f} M"
                            f" (hits {row[p.name]['cache_hit_ratio']:.2f})"
                            for p in PRICE_MODELS
                        )
                    )
                all_targets += [target for target, _ in found]
                figures[t.name] = {
                    "turns": len(t.turns),
                    "events": t.events,
                    "window_tokens": t.window_tokens,
                    "overhead_tokens": t.overhead_tokens,
                    "floor": floors,
                    "policies": policies,
                    "in_context_comparison": stricter,
                    "sweep": sweep,
                    "elapsed_s": time.perf_counter() - started,
                }
                say(f"  ({t.name} took {figures[t.name]['elapsed_s']:.1f} s)")
    finally:
        await sidecar.stop(0.5)
    return figures, all_targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short transcripts, small windows")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    parser.add_argument("--plot", type=Path, help="also draw the billed-tokens plot here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    say(f"mode: {'quick' if args.quick else 'full'}; this benchmark {NOTE}")
    say(
        f"ours: trigger token_count {HIGH:g} x window, passes down to {LOW:g} x window,"
        f" +min_saved: min_saved_tokens {MIN_SAVED:g} x window"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-economics-") as tmp:
        figures, found = asyncio.run(run_all(args.quick, Path(tmp)))
    for target in found:
        say(target.line())
    total = time.perf_counter() - started
    say(f"total {total:.1f} s")
    result = {
        "mode": "quick" if args.quick else "full",
        "note": f"This benchmark {NOTE}.",
        "price_models": {p.name: _price_json(p) for p in PRICE_MODELS},
        "ours": {"high": HIGH, "low": LOW, "min_saved": MIN_SAVED},
        "total_s": total,
        "transcripts": figures,
        "targets": {t.name: t.to_json() for t in found},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    say(f"results written to {args.json}")
    if args.plot is not None:
        from bench.economics.plot import draw

        draw(result, args.plot)
        say(f"plot written to {args.plot}")
    return 0


def _price_json(p: PriceModel) -> dict[str, float]:
    return {
        "read": p.read,
        "write": p.write,
        "output": p.output,
        "min_prefix": p.min_prefix,
        "increment": p.increment,
        "ttl_s": p.ttl_s,
    }


if __name__ == "__main__":
    sys.exit(main())
