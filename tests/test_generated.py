"""Generated code is generated: the committed stubs must match what protos/ produces."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_python_stubs_are_up_to_date(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    committed = ROOT / "sidecar" / "gen"
    fresh = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    existing = sorted(
        p.relative_to(committed)
        for p in committed.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert fresh == existing, "run `make protos`: generated files added or removed"
    stale = [str(p) for p in fresh if not filecmp.cmp(out / p, committed / p, shallow=False)]
    assert not stale, f"run `make protos`: stale generated files {stale}"
