"""Draw ``docs/economics.png``: billed input tokens over the session, per policy.

One panel per transcript and price model, from the results ``bench.economics``
wrote: the running total of billed input tokens (in units of one uncached
input token) after each model call. Ours are solid, the peers' defaults
dashed, no compaction grey; a policy whose prompts outgrew the window is
marked in the legend. matplotlib is a bench-only dependency (the ``bench``
extra).
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

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_RESULTS = ROOT / "bench" / "results-economics.json"
DEFAULT_OUT = ROOT / "docs" / "economics.png"
_STYLE = {"ours": "-", "peer": "--", "baseline": ":"}


def draw(result: dict[str, Any], out: Path) -> None:
    """Write the plot of ``result`` (what ``bench.economics`` wrote) to ``out``."""
    transcripts: dict[str, Any] = result["transcripts"]
    prices = list(result["price_models"])
    fig, axes = plt.subplots(
        len(transcripts), len(prices), figsize=(6 * len(prices), 4.5 * len(transcripts)),
        squeeze=False,
    )  # fmt: skip
    for row, (name, data) in enumerate(transcripts.items()):
        for col, price in enumerate(prices):
            ax = axes[row][col]
            for policy, f in data["policies"].items():
                curve = f["prices"][price]["curve"]
                label = policy + (" (over window)" if f["over_window_calls"] else "")
                ax.plot(
                    [p[0] for p in curve],
                    [p[1] / 1e6 for p in curve],
                    _STYLE[f["kind"]],
                    color="grey" if f["kind"] == "baseline" else None,
                    label=label,
                    linewidth=1.2,
                )
            ax.set_title(f"{name}: {data['turns']} turns, {price} prices")
            ax.set_xlabel("model call")
            ax.set_ylabel("billed input tokens (M, cumulative)")
            ax.set_yscale("log")
            ax.grid(True, alpha=0.3)
            if col == 0:
                ax.legend(fontsize=6, ncol=2)
    fig.suptitle(
        f"Billed input tokens over the session ({result['mode']} run). {result['note']}",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
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
