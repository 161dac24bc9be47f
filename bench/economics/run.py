"""Context economics: ``python -m bench.economics [--quick] [--json OUT] [--plot PNG]``.

Replays each trace family through the real server (in process, SQLite,
``--summarizer extractive``), one event per append, GetContext before each
assistant step, under no compaction, our policy families and the peers'
defaults (``bench.economics.policies``). Per family of traces:

1. dev split: every setting of each of our families; the setting kept is the
   cheapest whose retention is at least the best peer's on dev (else the one
   with the highest retention, the cheaper of equals). Cheapest is by the
   bill, as the target counts it: billed ÷ no compaction's on dev, the
   geometric mean over the price models;
2. test split: none, each family at its chosen setting, the peers; every
   reported figure is from here.

Quality is the binding constraint: retention (``bench.economics.retention``).
Target, per trace family and price model: the peer with the highest test
retention (the cheaper of equals) is the one compared; our cheapest policy
with retention at least that peer's must bill <= 0.5 x it (``bench.economics.verdict``,
with the two comparisons reported beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Target
from bench.economics.adk_peer import PEERS as ADK_PEERS
from bench.economics.adk_peer import available as adk_available
from bench.economics.adk_peer import replay_adk
from bench.economics.anthropic_edit import replay_edited
from bench.economics.langchain_peer import PEERS as LANGCHAIN_PEERS
from bench.economics.langchain_peer import replay_langchain
from bench.economics.long_task import coding_tasks
from bench.economics.measure import Replayed, bench_server, replay_all, stop_at_window
from bench.economics.parallel import FamilyFailed, run_families
from bench.economics.policies import (
    SUMMARY_TOKENS,
    TRAIL_DEV_FLOOR,
    TRAIL_TARGET,
    TRIGGERS,
    Entry,
    grid,
    peers,
)
from bench.economics.pricing import (
    GEMINI_FLASH_USD,
    GPT_4O_MINI_USD,
    PRICE_MODELS,
    QUICK_PRICE_MODELS,
    PriceModel,
)
from bench.economics.recall import RecallRule
from bench.economics.score import pinned_bill, score
from bench.economics.summary_size import PEER_CAP, RATIO
from bench.economics.traces import Trace, from_transcript, tau_airline
from bench.economics.transcripts import TRANSCRIPTS
from bench.economics.verdict import TARGET_RATIO, best_peer, compare
from sidecar.client import AsyncClient

QUICK_STEPS = 10
"""--quick: the coding task's tool steps (and one task, three τ-bench runs, one setting each)."""
DEFAULT_JSON = Path(__file__).parent.parent / "results-economics.json"
NOTE = (
    "retention = share of the identifiers each step used (first seen in an earlier user message"
    " or tool result) still in the context it was sent; every summary a deterministic fake at"
    " one length rule (bench.economics.summary_size: the conversation read over the ratio,"
    f" ours within {SUMMARY_TOKENS} tokens, the peers' within {PEER_CAP})"
)


@dataclass(frozen=True, slots=True)
class Family:
    """A family of traces: its dev and test splits, what they are, and our settings' scale."""

    name: str
    about: str
    dev: Callable[[], list[Trace]]
    test: Callable[[], list[Trace]]
    scale: int
    triggers: tuple[float, ...] = TRIGGERS


TAU_TRIALS = (0, 1, 2, 3)
"""τ-bench's trials replayed by default: all four runs of each task, as ``measure_policy``."""
_SESSIONS = itertools.count()
"""Each replay's sessions get a fresh prefix (a setting's label is not a valid id)."""
_SEEDS = {"ops": 301, "coding": 202, "chat": 150}
"""The synthetic transcripts' shipped seeds (their test split); dev is each seed + 1000."""


def say(line: str) -> None:
    print(line, flush=True)


def _synthetic(name: str, quick: bool) -> Family:
    make, turns, window = TRANSCRIPTS[name]
    turns = 10 if quick else turns
    window = window // 5 if quick else window

    seed = _SEEDS[name]

    def split(offset: int) -> Callable[[], list[Trace]]:
        return lambda: [from_transcript(make(turns, window, seed + offset))]

    about = f"synthetic {name} transcript, {turns} turns (dev: seed {seed + 1000}, test: {seed})"
    return Family(f"synthetic-{name}", about, split(1000), split(0), int(window * 0.15), (1.0,))


def families(quick: bool, trials: tuple[int, ...] = TAU_TRIALS) -> list[Family]:
    """The trace families, at full size or the quick mode's; τ-bench's ``trials`` of each task."""
    trials = (0,) if quick else trials

    def tau(split: str) -> Callable[[], list[Trace]]:
        def traces() -> list[Trace]:
            found = tau_airline(split, trials)
            return found[:3] if quick else found

        return traces

    def coding(split: str) -> Callable[[], list[Trace]]:
        return lambda: coding_tasks(split, QUICK_STEPS)[:1] if quick else coding_tasks(split)

    tau_about = (
        f"τ-bench airline, GPT-4o, trials {', '.join(map(str, trials))} of each task"
        f" (dev: tasks 0-24, test: 25-49){'; quick: 3 runs' if quick else ''}"
    )
    out = [
        Family("tau-airline", tau_about, tau("dev"), tau("test"), 3000),
        Family(
            "coding-task",
            "generated single-task coding agent, 40-80 tool steps (dev: seeds 0-4, test: 5-9)"
            + (f"; quick: 1 task of {QUICK_STEPS} steps" if quick else ""),
            coding("dev"),
            coding("test"),
            6_000 if quick else 40_000,
        ),
    ]
    return [*out, *(_synthetic(n, quick) for n in (["chat"] if quick else TRANSCRIPTS))]


def cheap_for(entry: Entry) -> tuple[float, float] | None:
    """The cheap summarizer model a policy's docs use: Gemini Flash (ours, ADK), gpt-4o-mini."""
    if entry.name.startswith("langchain"):
        return GPT_4O_MINI_USD
    return GEMINI_FLASH_USD if entry.kind != "baseline" else None


async def _runs(
    client: AsyncClient, traces: list[Trace], entry: Entry, tag: str, ratio: float = RATIO
) -> list[Replayed]:
    """``entry`` over ``traces``: the peers as their own code, ours through the server; every
    fake summary at the length ``ratio`` gives (``summary_size``)."""
    if entry.edit == "anthropic_clear":
        return [stop_at_window(t, replay_edited(t)) for t in traces]
    if entry.edit in ADK_PEERS:
        adk = await replay_adk(traces, entry.edit, ratio)
        return [stop_at_window(t, r) for t, r in zip(traces, adk, strict=True)]
    if entry.edit in LANGCHAIN_PEERS:
        return [stop_at_window(t, replay_langchain(t, entry.edit, ratio)) for t in traces]
    recall = RecallRule() if entry.recall else None
    label = f"{tag}/{entry.name}/{next(_SESSIONS)}"
    return await replay_all(client, traces, entry.policy, label, recall)


def relative_bill(figures: dict[str, Any], none: dict[str, Any]) -> float:
    """Billed ÷ no compaction's, the geometric mean over the price models scored."""
    ratios = [
        figures["prices"][name]["billed"] / max(1e-9, billed["billed"])
        for name, billed in none["prices"].items()
    ]
    return math.exp(sum(math.log(max(r, 1e-12)) for r in ratios) / max(1, len(ratios)))


def choose(dev: dict[str, list[dict[str, Any]]], peer_retention: float) -> dict[str, int]:
    """Per family, the index of the setting kept: the cheapest (``bill_vs_none``) at >= the
    peer's retention (``summarize_trail``: at >= ``TRAIL_DEV_FLOOR``, its own target's); else
    the best retention, the cheaper of equals."""
    chosen = {}
    for family, rows in dev.items():
        floor = TRAIL_DEV_FLOOR if family == "summarize_trail" else peer_retention
        fit = [i for i, r in enumerate(rows) if r["retention"] >= floor]
        if fit:
            chosen[family] = min(fit, key=lambda i: rows[i]["bill_vs_none"])
        else:
            chosen[family] = max(
                range(len(rows)), key=lambda i: (rows[i]["retention"], -rows[i]["bill_vs_none"])
            )
    return chosen


async def run_family(
    client: AsyncClient,
    fam: Family,
    prices: Sequence[PriceModel],
    quick: bool,
    triggers: tuple[float, ...] | None = None,
    ratio: float = RATIO,
) -> dict[str, Any]:
    started = time.perf_counter()
    dev_traces, test_traces = fam.dev(), fam.test()
    say(f"{fam.name}: {fam.about}; dev {len(dev_traces)} traces, test {len(test_traces)}")
    options = grid(fam.scale, (1.0,) if quick else triggers or fam.triggers, quick)
    # ADK's own Runner (its venv) in full runs; its emulation in the quick mode, for time.
    the_peers = peers(real_adk=not quick and adk_available())
    dev_peer: dict[str, float] = {}
    for entry in the_peers:
        runs = await _runs(client, dev_traces, entry, f"{fam.name}-dev", ratio)
        dev_peer[entry.name] = score(dev_traces, runs, ())["retention"]
    best_dev_peer = max(dev_peer.values())
    baseline = Entry("none", "baseline", None)
    dev_none = score(dev_traces, await _runs(client, dev_traces, baseline, "dev"), prices)
    dev: dict[str, list[dict[str, Any]]] = {}
    for family, entries in options.items():
        dev[family] = []
        for entry in entries:
            runs = await _runs(client, dev_traces, entry, f"{fam.name}-dev", ratio)
            s = score(dev_traces, runs, prices)
            dev[family].append(
                {"setting": entry.setting, "retention": s["retention"],
                 "conversation_tokens": s["conversation_tokens"],
                 "bill_vs_none": relative_bill(s, dev_none), "searches": s["searches"]}
            )  # fmt: skip
            say(f"  dev {family} [{entry.setting}]: retention {s['retention']:.3f},"
                f" conversation tokens {s['conversation_tokens']},"
                f" billed {dev[family][-1]['bill_vs_none']:.3f} x none")  # fmt: skip
    chosen = choose(dev, best_dev_peer)
    test_entries = [
        baseline,
        *(options[f][i] for f, i in chosen.items()),
        *the_peers,
    ]
    test: dict[str, Any] = {}
    for entry in test_entries:
        runs = await _runs(client, test_traces, entry, f"{fam.name}-test", ratio)
        s = score(test_traces, runs, prices, cheap_for(entry))
        test[entry.name] = {"kind": entry.kind, "setting": entry.setting, **s}
    none = test["none"]
    pinned = {
        name: billed / none["prices"][name]["billed"]
        for name, billed in pinned_bill(test_traces, prices).items()
    }
    for f in test.values():
        f["conversation_vs_none"] = f["conversation_tokens"] / max(1, none["conversation_tokens"])
        for p in prices:
            f["prices"][p.name]["vs_none"] = (
                f["prices"][p.name]["billed"] / none["prices"][p.name]["billed"]
            )
    return {
        "about": fam.about,
        "dev_traces": len(dev_traces),
        "test_traces": len(test_traces),
        "overhead_tokens": sorted({t.overhead_tokens for t in test_traces}),
        "dev_peer_retention": dev_peer,
        "dev": dev,
        "chosen": {f: options[f][i].setting for f, i in chosen.items()},
        "test": test,
        "pinned_share": pinned,
        "elapsed_s": time.perf_counter() - started,
    }


def trail_target(name: str, fam: dict[str, Any]) -> Target | None:
    """Issue 34's: ``summarize_trail``'s share of the conversation tokens ÷ 0.35, on test,
    when it keeps >= 0.95 of what the agent used (else inf); for τ-bench only."""
    row = fam["test"].get("summarize_trail")
    if name != "tau-airline" or row is None:
        return None
    least, most = TRAIL_TARGET
    share = row["conversation_vs_none"]
    return Target(
        "identifier_trail_tau_airline",
        share / most if row["retention"] >= least else float("inf"),
        1.0,
        False,
        f"summarize_trail [{row['setting']}]: retention {row['retention']:.3f} (target >="
        f" {least}) at {share:.3f} of the conversation tokens (target <= {most})",
    )


def targets(name: str, fam: dict[str, Any], prices: Sequence[PriceModel]) -> list[Target]:
    """Per price model: our cheapest at >= the best peer's retention ÷ that peer's bill
    (``bench.economics.verdict``); and the identifier trail's (``trail_target``)."""
    out = [t for t in [trail_target(name, fam)] if t is not None]
    for p in prices:
        c = compare(fam["test"], p.name, best_peer(fam["test"], p.name))
        ours = c.ours or f"none of ours (best {c.best_ours:.3f})"
        out.append(
            Target(
                f"economics_{name}_{p.name}".replace("-", "_").replace(".", "_"),
                c.ratio,
                TARGET_RATIO,
                False,
                f"{ours} / {c.peer} billed ({p.name}), at retention >= {c.peer_retention:.3f}",
            )
        )
    return out


async def run_all(
    quick: bool,
    workdir: Path,
    only: Sequence[str] = (),
    trials: tuple[int, ...] = TAU_TRIALS,
    triggers: tuple[float, ...] | None = None,
    ratio: float = RATIO,
) -> tuple[dict[str, Any], list[Target]]:
    prices = QUICK_PRICE_MODELS if quick else PRICE_MODELS
    sidecar = await bench_server(workdir / "economics.db", ratio)
    figures: dict[str, Any] = {}
    found: list[Target] = []
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}", default_timeout=120.0) as client:
            for fam in families(quick, trials):
                if only and fam.name not in only:
                    continue
                figures[fam.name] = await run_family(client, fam, prices, quick, triggers, ratio)
                report(fam.name, figures[fam.name], prices)
                for target in targets(fam.name, figures[fam.name], prices):
                    say(f"  {target.description}")
                    found.append(target)
    finally:
        await sidecar.stop(0.5)
    return figures, found


def report(name: str, fam: dict[str, Any], prices: Sequence[PriceModel]) -> None:
    say(f"  chosen on dev: {fam['chosen']}")
    head = "".join(f"{p.name[:16]:>18}" for p in prices)
    say(f"  {'test: policy':<24}{'retention':>10}{'conv/none':>10}{head}   (billed ÷ none)")
    for policy, f in fam["test"].items():
        say(
            f"  {policy:<24}{f['retention']:>10.3f}{f['conversation_vs_none']:>10.3f}"
            + "".join(f"{f['prices'][p.name]['vs_none']:>18.3f}" for p in prices)
        )
    say(f"  ({name} took {fam['elapsed_s']:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few traces of each family")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    parser.add_argument("--plot", type=Path, help="also draw the retention-vs-bill plot here")
    parser.add_argument(
        "--triggers",
        help="our triggers as multiples of each family's scale, comma-separated (default 0.5,1,2)",
    )
    parser.add_argument(
        "--trials",
        default=",".join(map(str, TAU_TRIALS)),
        help="τ-bench trials of each task, comma-separated (default all four, 0-3)",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="run only this trace family (repeatable)"
    )
    parser.add_argument(
        "--summary-ratio",
        type=float,
        default=RATIO,
        help=f"input tokens per summary token of every fake summarizer (default {RATIO:g};"
        " bench.economics.summary_size)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="run the trace families side by side, this many processes at a time (default 1)",
    )
    args = parser.parse_args(argv)
    known = [f.name for f in families(False)]
    if unknown := sorted(set(args.only) - set(known)):
        parser.error(f"--only: no trace family {', '.join(unknown)} (known: {', '.join(known)})")
    logging.basicConfig(level=logging.WARNING)
    say(f"mode: {'quick' if args.quick else 'full'}; {NOTE}")
    started = time.perf_counter()
    trials = tuple(int(t) for t in args.trials.split(","))
    triggers = tuple(float(t) for t in args.triggers.split(",")) if args.triggers else None
    with tempfile.TemporaryDirectory(prefix="bench-economics-") as tmp:
        if args.jobs > 1:
            names = [
                f.name for f in families(args.quick, trials) if not args.only or f.name in args.only
            ]
            common = [*(["--quick"] if args.quick else []), "--trials", args.trials]
            common += ["--triggers", args.triggers] if args.triggers else []
            common += ["--summary-ratio", str(args.summary_ratio)]
            try:
                figures, targets = run_families(names, common, args.jobs, Path(tmp), say)
            except FamilyFailed as exc:
                say(str(exc))
                return 1
        else:
            figures, found = asyncio.run(
                run_all(args.quick, Path(tmp), args.only, trials, triggers, args.summary_ratio)
            )
            for target in found:
                say(target.line())
            targets = {t.name: t.to_json() for t in found}
    total = time.perf_counter() - started
    say(f"total {total:.1f} s")
    prices = QUICK_PRICE_MODELS if args.quick else PRICE_MODELS
    result = {
        "mode": "quick" if args.quick else "full",
        "command": " ".join(
            ["python -m bench.economics", *(argv if argv is not None else sys.argv[1:])]
        ),
        "note": NOTE,
        "summary_ratio": args.summary_ratio,
        "price_models": {p.name: _price_json(p) for p in prices},
        "total_s": total,
        "traces": figures,
        "targets": targets,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    say(f"results written to {args.json}")
    if args.plot is not None:
        from bench.economics.plot import draw

        draw(result, args.plot)
        say(f"plot written to {args.plot}")
    return 0


def _price_json(p: PriceModel) -> dict[str, Any]:
    return {
        "read": p.read,
        "write": p.write,
        "output": p.output,
        "min_prefix": p.min_prefix,
        "increment": p.increment,
        "ttl_s": p.ttl_s,
        "breakpoints": p.breakpoints,
        "checked": p.checked,
        "source": p.source,
    }


if __name__ == "__main__":
    sys.exit(main())
