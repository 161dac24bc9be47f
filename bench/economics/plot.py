"""Draw ``docs/economics.png``: retention against billed tokens, per policy and peer.

One panel per trace family (rows) and price model (columns), from the
results ``bench.economics`` wrote, test split only: x is the policy's billed
input tokens ÷ no compaction's, y its retention. Ours are circles, the
peers squares, no compaction a black cross; a policy stopped at the model's
window on some trace is drawn hollow and labelled so (it could not run); the
shaded corner is where the target lies (retention at least the best peer's
that runs, billed at most half its).
matplotlib is a bench-only dependency (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt

from bench.economics.verdict import best_peer, runs

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_RESULTS = ROOT / "bench" / "results-economics.json"
DEFAULT_OUT = ROOT / "docs" / "economics.png"
_MARK = {"ours": "o", "peer": "s", "baseline": "x"}


def draw(result: dict[str, Any], out: Path) -> None:
    """Write the plot of ``result`` (what ``bench.economics`` wrote) to ``out``."""
    traces: dict[str, Any] = result["traces"]
    prices = list(result["price_models"])
    fig, axes = plt.subplots(
        len(traces), len(prices), figsize=(3.6 * len(prices), 3.2 * len(traces)), squeeze=False
    )
    for row, (name, fam) in enumerate(traces.items()):
        test = fam["test"]
        for col, price in enumerate(prices):
            ax = axes[row][col]
            peer = best_peer(test, price)
            if peer is not None:
                best = test[peer]
                x0 = 0.5 * best["prices"][price]["vs_none"]
                ax.fill_between([0, x0], best["retention"], 1.02, color="green", alpha=0.12)
            for policy, f in test.items():
                x, y = f["prices"][price]["vs_none"], f["retention"]
                if f["kind"] == "baseline":
                    ax.scatter([x], [y], marker=_MARK["baseline"], color="black", s=22)
                else:
                    color = f"C{list(test).index(policy) % 10}"
                    face = color if runs(f) else "none"
                    ax.scatter([x], [y], marker=_MARK[f["kind"]], edgecolors=color,
                               facecolors=face, s=22)  # fmt: skip
                label = policy if runs(f) else f"{policy} (stopped at the window)"
                ax.annotate(label, (x, y), fontsize=5, xytext=(2, 2), textcoords="offset points")
            ax.set_title(f"{name}, {price}", fontsize=7)
            ax.set_xlabel("billed ÷ no compaction", fontsize=6)
            ax.set_ylabel("retention", fontsize=6)
            ax.tick_params(labelsize=5)
            ax.set_ylim(0, 1.02)
            ax.set_xlim(0, None)
            ax.grid(True, alpha=0.3)
    fig.suptitle(
        f"Retention vs billed input tokens, test split ({result['mode']} run); {result['note']}",
        fontsize=8,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics.plot", description=__doc__)
    parser.add_argument("results", nargs="?", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    draw(json.loads(args.results.read_text()), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
