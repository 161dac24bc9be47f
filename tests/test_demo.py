"""The demo: a real server on a free port, the transcript replayed through the client."""

from __future__ import annotations

import re
import subprocess
import sys

STRATEGIES = (
    "sliding_window",
    "turn_window",
    "token_budget",
    "summarize",
    "clear_tool_results",
    "pipeline",
)


def test_demo_prints_every_strategy_and_shrinks_the_prompt() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sidecar.cli", "demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for name in STRATEGIES:
        assert f"strategy {name}:" in out
    totals = re.findall(r"tokens: (\d+) appended in total -> (\d+) in the next prompt", out)
    assert len(totals) == len(STRATEGIES)
    for name, (appended, kept) in zip(STRATEGIES, totals, strict=True):
        # Clearing alone keeps every event (results become placeholders); the rest halve it.
        assert int(kept) < int(appended) * (0.75 if name == "clear_tool_results" else 0.5)
    assert "compaction-sidecar serving on 127.0.0.1:" in out
    assert re.search(r"after event +\d+: summarize archived \d+ events", out)
    # README: a summary keeps identifiers in its trail, and the demo shows it
    assert re.search(r"the summary keeps its identifiers verbatim: Identifiers: \S", out)
    # The summary turn is shown as such, and keeps the exact tool names first.
    assert re.search(
        r"S +\d+ Assistant: Tools used: query_metrics \| search_logs \| read_file", out
    )
    assert re.search(r"\([1-9]\d* archived events mention commit a1b2c3\)", out)

    # Clearing keeps every event and clears results in place (c); a pipeline clears first,
    # summarizes when that is not enough; the last compaction is then undone.
    assert re.search(r"clear_tool_results archived 0 events, cleared [1-9]\d*,", out)
    assert re.search(r"c +\d+ Tool \[responses: \w+ -> \[\w+ result cleared to save context", out)
    assert re.search(r"pipeline archived 0 events, cleared [1-9]\d*,", out)
    pipeline = out[out.index("strategy pipeline:") :]
    assert re.search(r"after event +\d+: summarize archived [1-9]\d* events", pipeline)
    assert "restore: undo the newest compaction of session 'pipeline'" in out
    restored = re.search(r"restored \w+ [0-9a-f]{8}: ([1-9]\d*) events back as they were", out)
    assert restored, out[out.index("restore:") :]
    before, after = re.findall(r"(\d+) tokens to \d+ events, (\d+) tokens", out)[0]
    assert int(after) > int(before)
