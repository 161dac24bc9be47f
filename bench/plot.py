"""Draw ``docs/bench.png`` from a results file: ``python -m bench.plot [RESULTS] [--out PNG]``.

Four panels, each from the JSON ``bench.run`` wrote, so the picture always
matches a run that printed its figures: read latency against session size
(GetContext's window vs ADK's get_session, the scaling curve), server RSS
against the number of sessions, append rates side by side with their
baselines, and every target's ratio against its bound. A panel whose
benchmark is not in the file says so instead of drawing. matplotlib is a
bench-only dependency (the ``bench`` extra).
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
from matplotlib.axes import Axes
from matplotlib.ticker import NullFormatter

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = Path(__file__).parent / "results.json"
DEFAULT_OUT = ROOT / "docs" / "bench.png"
ADK_NAMES = {"sqlite": "ADK SqliteSessionService", "database": "ADK DatabaseSessionService"}


def _missing(ax: Axes, title: str, what: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, f"not in this run:\n{what}", ha="center", va="center", color="grey")
    ax.set_axis_off()


def read_latency(ax: Axes, bench: dict[str, Any]) -> None:
    title = "Read latency vs session size"
    data = bench.get("adk_context")
    if not data:
        _missing(ax, title, "adk_context")
        return
    curve = data["curve"]
    sizes = [p["events"] for p in curve]
    window = data["window"]
    ax.plot(
        sizes,
        [p["get_context_ms"] for p in curve],
        "o-",
        label=f"sidecar GetContext ({window}-event window)",
    )
    for key, label in ADK_NAMES.items():
        ax.plot(
            sizes, [p["adk_get_session_ms"][key] for p in curve], "s-", label=f"{label}.get_session"
        )
        ax.plot(
            sizes,
            [p["adk_get_session_recent_ms"][key] for p in curve],
            "^--",
            alpha=0.6,
            label=f"{label}.get_session, {window} recent",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("events in the session")
    ax.set_ylabel("median latency (ms)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def memory(ax: Axes, bench: dict[str, Any]) -> None:
    title = "Server RSS vs sessions held"
    data = bench.get("memory")
    if not data:
        _missing(ax, title, "memory")
        return
    xs = [0] + [p["sessions"] for p in data["rss_curve"]]
    ys = [data["fresh_rss_kib"] / 1024] + [p["rss_kib"] / 1024 for p in data["rss_curve"]]
    ax.plot(xs, ys, "o-", label="after traffic")
    ax.plot(
        [xs[-1]],
        [data["idle_rss_kib"] / 1024],
        "D",
        color="green",
        label=f"after {data['idle_s']:g} s idle",
    )
    if "at_rest_rss_kib" in data:  # results from before the at-rest row have none
        ax.plot([0], [data["at_rest_rss_kib"] / 1024], "s", color="tab:orange", label="at rest")
        ax.axhline(data["echo_rss_kib"] / 1024, color="grey", ls=":", label="bare grpc.aio echo")
    ax.set_ylim(0, max(ys) * 1.3)
    ax.set_xlabel("sessions (4 events each)")
    ax.set_ylabel("VmRSS (MiB)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)


def append_rates(ax: Axes, bench: dict[str, Any]) -> None:
    title = "Append rate (events/s, median)"
    bars: list[tuple[str, float, str]] = []
    if "appends" in bench:
        a = bench["appends"]
        bars += [
            ("bare grpc.aio echo", a["echo_median"], "grey"),
            ("StreamEvents, 1 session", a["one_session_median"], "tab:blue"),
            ("StreamEvents, 100 sessions", a["hundred_sessions_median"], "tab:blue"),
        ]
    if "adk_appends" in bench:
        a = bench["adk_appends"]
        bars += [
            ("StreamEvents (ADK run)", a["sidecar_streamed_median"], "tab:blue"),
            ("unary AppendEvents, sequential", a["sidecar_unary_median"], "tab:cyan"),
        ]
        bars += [
            (f"{label}.append_event", a["adk_best"][k], "tab:orange")
            for k, label in ADK_NAMES.items()
        ]
    if not bars:
        _missing(ax, title, "appends, adk_appends")
        return
    names = [b[0] for b in bars]
    ax.barh(names, [b[1] for b in bars], color=[b[2] for b in bars])
    ax.invert_yaxis()
    ax.set_xlabel("events per second")
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)


def targets(ax: Axes, results: dict[str, Any]) -> None:
    title = "Targets: measured / bound (right of 1 is better)"
    items = results.get("targets", {})
    if not items:
        _missing(ax, title, "any target")
        return
    names: list[str] = []
    scores: list[float] = []
    colors: list[str] = []
    for name, t in items.items():
        # Normalise so that > 1 always means the target is met.
        score = t["ratio"] / t["bound"] if t["op"] == ">=" else t["bound"] / t["ratio"]
        names.append(name)
        scores.append(score)
        colors.append("tab:green" if t["pass"] else "tab:red")
    ax.barh(names, scores, color=colors)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # decade labels only; minor ones overlap
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=6)
    ax.set_title(title)
    ax.grid(True, axis="x", which="both", alpha=0.3)


def draw(results: dict[str, Any], out: Path) -> None:
    bench = results.get("benchmarks", {})
    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    read_latency(axes[0][0], bench)
    memory(axes[0][1], bench)
    append_rates(axes[1][0], bench)
    targets(axes[1][1], results)
    m = results.get("machine", {})
    fig.suptitle(
        f"compaction sidecar benchmarks ({results.get('mode', '?')} mode): "
        f"{m.get('nproc', '?')} cores, {m.get('implementation', '')} {m.get('python', '')}, "
        f"grpcio {m.get('grpcio', '?')}"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plot", description=__doc__)
    parser.add_argument("results", nargs="?", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    draw(json.loads(args.results.read_text()), args.out)
    print(f"plot written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
