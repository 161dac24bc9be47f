"""The benchmark runs end to end at its smallest size; figures are not checked (noisy).

The ADK comparisons run in ADK's own process and virtualenv, so ADK's timings
are its own and not the benchmark's. When that interpreter is there (``make
bench-adk-venv``, or ``BENCH_ADK_PYTHON``) their targets must be measured;
when it is not, tiny mode must say ``SKIP`` for exactly those targets, and
every other target must still be measured.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from bench import adk

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (
    "streamed_appends_1_session_vs_echo",
    "streamed_appends_100_sessions_vs_echo",
    "streamed_appends_1_session_vs_echo_deployed",
    "streamed_appends_100_sessions_vs_echo_deployed",
    "get_context_vs_echo",
    "get_context_vs_echo_deployed",
    "compaction_pass_large_vs_small_log",
    "clearing_pass_vs_token_budget_pass",
    "rendered_get_context_vs_get_context",
    "tool_result_appends_bytes_vs_short",
    "service_tokens_per_s_vs_tiktoken",
    "memory_at_rest_vs_50_mib",
    "memory_after_sessions_vs_60_mib",
    "memory_idle_vs_fresh",
    "append_p99_under_load_vs_quiet_p50",
    "append_p99_under_load_vs_quiet_p50_deployed",
    "window_restore_large_vs_small",
    "window_noop_clearing_large_vs_small",
    "window_compact_large_vs_small",
    "window_ops_context_p99_vs_quiet",
)
ADK_TARGETS = (
    "streamed_appends_vs_adk_sqlite",
    "streamed_appends_vs_adk_database",
    "unary_appends_vs_adk_sqlite",
    "unary_appends_vs_adk_database",
    "streamed_appends_vs_adk_sqlite_deployed",
    "streamed_appends_vs_adk_database_deployed",
    "unary_appends_vs_adk_sqlite_deployed",
    "unary_appends_vs_adk_database_deployed",
    "get_context_vs_adk_sqlite_get_session",
    "get_context_vs_adk_database_get_session",
)
LINE = re.compile(
    r"^TARGET (\S+): measured ratio (\d+\.\d\d) \(target (>=|<=) [\d.]+\) (PASS|MISS)$"
)
SKIP = re.compile(r"^SKIP (\S+): (.+)$")


def bench(module: str, *args: str) -> str:
    """Run ``python -m bench.MODULE ARGS`` from the repository; its output, once it succeeded."""
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,  # the whole tiny run: every benchmark, on a loaded machine
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_tiny_run_prints_every_target_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    stdout = bench("run", "--tiny", "--json", str(out))
    lines = stdout.splitlines()
    printed = {m.group(1) for line in lines if (m := LINE.match(line))}
    skipped = {m.group(1) for line in lines if (m := SKIP.match(line))}
    with_adk = adk.adk_python() is not None
    measured = set(TARGETS) | (set(ADK_TARGETS) if with_adk else set())
    assert printed == measured, stdout
    assert skipped == (set() if with_adk else set(ADK_TARGETS)), stdout
    assert stdout.startswith("machine: nproc=")
    results = json.loads(out.read_text())
    assert results["mode"] == "tiny"
    assert set(results["skipped"]) == skipped
    for name in measured:
        ratio = results["targets"][name]["ratio"]
        assert isinstance(ratio, float)
        assert ratio > 0


def test_plot_draws_a_png_from_the_results(tmp_path: Path) -> None:
    """bench.plot turns a results file into a PNG (needs matplotlib: the bench extra)."""
    results = {
        "machine": {"nproc": 2, "python": "3.11.7", "implementation": "CPython", "grpcio": "x"},
        "mode": "tiny",
        "benchmarks": {
            "memory": {
                "fresh_rss_kib": 90_000,
                "rss_curve": [{"sessions": 100, "rss_kib": 95_000}],
                "idle_rss_kib": 94_000,
                "idle_s": 1.0,
            }
        },
        "targets": {
            "memory_idle_vs_fresh": {"ratio": 1.04, "bound": 1.5, "op": "<=", "pass": True}
        },
    }
    source = tmp_path / "results.json"
    source.write_text(json.dumps(results))
    png = tmp_path / "bench.png"
    bench("plot", str(source), "--out", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_diagnostic_prints_both_sides() -> None:
    stdout = bench("cpu", "60", "1")
    sides = re.findall(r"^round 1 (echo|sidecar) +\d+ msg/s +\d+ us CPU per message", stdout, re.M)
    assert sides == ["echo", "sidecar"], stdout
