"""The demo: a real server on a free port, the transcript replayed through the client."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_prints_every_strategy_and_shrinks_the_prompt() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sidecar.cli", "demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for name in ("sliding_window", "turn_window", "token_budget", "summarize"):
        assert f"strategy {name}:" in out
    totals = re.findall(r"tokens: (\d+) appended in total -> (\d+) in the next prompt", out)
    assert len(totals) == 4
    for appended, kept in totals:
        assert int(kept) < int(appended) / 2
    assert "compaction-sidecar serving on 127.0.0.1:" in out
    assert re.search(r"after event +\d+: summarize archived \d+ events", out)
    # The summary turn is shown as such, and keeps the exact tool names first.
    assert re.search(
        r"S +\d+ Assistant: Tools used: query_metrics \| search_logs \| read_file", out
    )
    assert re.search(r"\([1-9]\d* archived events mention commit a1b2c3\)", out)
