"""Run every benchmark: ``python -m bench.run [--quick | --tiny] [--json OUT]``.

Each benchmark measures the sidecar and its baseline in the same run, prints
its figures and one ``TARGET <name>: measured ratio X.XX (target >= Y) PASS|MISS``
line per target. All figures and ratios go to a JSON file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from bench import (
    adk_appends,
    adk_context,
    appends,
    clearing_cost,
    compaction_cost,
    context,
    context_tokens,
    latency,
    memory,
    rendering,
    tokens,
    window_cost,
)
from bench.common import FULL, QUICK, TINY, Log, Outcome, Scale, Target

Benchmark = Callable[[Scale, Path, Log], Awaitable[Outcome]]

BENCHMARKS: dict[str, Benchmark] = {
    "appends": appends.run,
    "context": context.run,
    "compaction_cost": compaction_cost.run,
    "clearing_cost": clearing_cost.run,
    "rendering": rendering.run,
    "context_tokens": context_tokens.run,
    "adk_appends": adk_appends.run,
    "adk_context": adk_context.run,
    "tokens": tokens.run,
    "memory": memory.run,
    "latency": latency.run,
    "window_cost": window_cost.run,
}

DEFAULT_JSON = Path(__file__).parent / "results.json"


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "grpcio": grpc.__version__,
    }


def say(line: str) -> None:
    print(line, flush=True)


async def run_all(
    scale: Scale, only: list[str]
) -> tuple[dict[str, Any], list[Target], dict[str, str]]:
    figures: dict[str, Any] = {}
    targets: list[Target] = []
    skipped: dict[str, str] = {}
    for name in only:
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
            started = time.perf_counter()
            outcome = await BENCHMARKS[name](scale, Path(tmp), say)
            elapsed = time.perf_counter() - started
        outcome.figures["elapsed_s"] = elapsed
        figures[name] = outcome.figures
        for target in outcome.targets:
            say(target.line())
        for target_name, reason in outcome.skipped.items():
            say(f"SKIP {target_name}: {reason}")
            skipped[target_name] = reason
        targets += outcome.targets
        say(f"  ({name} took {elapsed:.1f} s)")
    return figures, targets, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller runs, under a minute")
    parser.add_argument("--tiny", action="store_true", help="smoke-test size, a few seconds")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    parser.add_argument(
        "--only", action="append", choices=sorted(BENCHMARKS), help="run only these (repeatable)"
    )
    args = parser.parse_args(argv)
    scale = TINY if args.tiny else QUICK if args.quick else FULL
    only: list[str] = args.only or list(BENCHMARKS)
    logging.basicConfig(level=logging.WARNING)
    info = machine()
    say(
        f"machine: nproc={info['nproc']} python={info['python']} ({info['implementation']}) "
        f"grpcio={info['grpcio']} {info['platform']}"
    )
    say(f"mode: {scale.name}")
    started = time.perf_counter()
    figures, targets, skipped = asyncio.run(run_all(scale, only))
    total = time.perf_counter() - started
    say(f"total {total:.1f} s")
    result = {
        "machine": info,
        "mode": scale.name,
        "total_s": total,
        "benchmarks": figures,
        "targets": {t.name: t.to_json() for t in targets},
        "skipped": skipped,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    say(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
