"""What the documented commands leave in the checkout is ignored by git, so a tree stays clean."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def npm_pack_tarball() -> str:
    """What ``npm pack`` writes in clients/typescript (``@scope/name`` as ``scope-name``)."""
    package = json.loads((ROOT / "clients/typescript/package.json").read_text())
    name = package["name"].removeprefix("@").replace("/", "-")
    return f"clients/typescript/{name}-{package['version']}.tgz"


@pytest.mark.parametrize("path", [npm_pack_tarball(), "compaction.db", "compaction.db-wal"])
def test_what_the_commands_leave_behind_is_ignored(path: str) -> None:
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, check=False)
    assert done.returncode == 0, f"{path} is not ignored by .gitignore"
