"""bench.latency_stages: its hooks still find the server's stages, in order, for every probe.

The hooks wrap private names of the server; a renamed one stops the traced
server from starting, or leaves a probe without its marks, and this fails.
"""

from __future__ import annotations

from pathlib import Path

from bench.latency_stages import measure, report


async def test_every_probe_is_timed_through_the_server(tmp_path: Path) -> None:
    result = await measure(40, tmp_path)
    quiet, loaded = result["quiet"], result["loaded"]
    assert quiet["calls"] == loaded["calls"] == 40
    # With no load the writer is idle and a probe commits on the loop's thread; under
    # the flood it is busy, and probes are queued for its thread (how many depends on
    # how busy the machine leaves the flood: the test suite's other worker competes).
    assert quiet["queued"] < quiet["calls"] // 2
    assert loaded["queued"] > quiet["queued"]
    assert result["load_acks"] > 0
    stages = loaded["stages_ms"]
    assert "    the rest: waiting for the GIL" in stages
    assert stages["round trip"]["p50"] >= stages["the store's write"]["p50"] > 0
    lines: list[str] = []
    report(result, lines.append)
    assert lines[0].startswith("quiet: 40 probes")
