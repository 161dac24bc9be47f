"""The benchmark runs end to end at its smallest size; figures are not checked (noisy)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = (
    "streamed_appends_1_session_vs_echo",
    "streamed_appends_100_sessions_vs_echo",
    "get_context_vs_echo",
    "compaction_pass_large_vs_small_log",
)
LINE = re.compile(
    r"^TARGET (\S+): measured ratio (\d+\.\d\d) \(target (>=|<=) [\d.]+\) (PASS|MISS)$"
)


def test_tiny_run_prints_every_target_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--tiny", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = {m.group(1) for line in done.stdout.splitlines() if (m := LINE.match(line))}
    assert printed == set(TARGETS), done.stdout
    assert done.stdout.startswith("machine: nproc=")
    results = json.loads(out.read_text())
    assert results["mode"] == "tiny"
    for name in TARGETS:
        ratio = results["targets"][name]["ratio"]
        assert isinstance(ratio, float)
        assert ratio > 0
