"""README examples run exactly as printed, against a server started as the README starts it.

Each example is the fenced block right under its heading, written to a file
and run as a script with the interpreter a user of this checkout would have.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conformance.runner import serve

ROOT = Path(__file__).resolve().parents[2]
BINARY = str(Path(sys.executable).with_name("compaction-sidecar"))


def example(readme: Path, heading: str, language: str) -> str:
    """The first ``language`` block after ``heading``, verbatim."""
    text = readme.read_text()
    after = text[text.index(f"\n{heading}\n") :]
    start = after.index(f"```{language}\n") + len(f"```{language}\n")
    return after[start : after.index("```\n", start)]


def test_the_python_clients_ten_lines_run_against_make_serves_defaults(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(example(ROOT / "clients/python/README.md", "## Ten lines", "python"))
    with serve(BINARY, []) as server:  # make serve's settings, on a free port
        for _ in range(2):  # and again: the example can be re-run against the same server
            done = subprocess.run(
                [sys.executable, str(script)],
                env={**os.environ, "COMPACTION_ADDR": server.address},
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
            )
            assert done.returncode == 0, done.stderr
    assert "Where is my order?" in done.stdout
    assert "It ships today." in done.stdout
