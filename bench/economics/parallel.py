"""The trace families run side by side, one process each: ``--jobs N``.

A family's replays share nothing with another's (each process starts its own
server on its own SQLite file), and one process is held to one core by the
GIL, so a full run on a machine of N cores takes about as long as its
longest family rather than their sum. Each family runs as its own
``python -m bench.economics --only NAME --json PART``, with the rest of the
command line as given; the parts are merged in the families' order, and each
family's log is printed whole when it ends (so logs never interleave).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


class FamilyFailed(RuntimeError):
    """A family's process exited non-zero; its log's tail says why."""


def _run_one(name: str, common: Sequence[str], workdir: Path) -> tuple[dict[str, Any], str]:
    part = workdir / f"{name}.json"
    argv = [sys.executable, "-m", "bench.economics", *common, "--only", name, "--json", str(part)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        tail = "\n".join(log.splitlines()[-20:])
        raise FamilyFailed(f"family {name} exited with {done.returncode}:\n{tail}")
    loaded: dict[str, Any] = json.loads(part.read_text())
    if name not in loaded["traces"]:
        raise FamilyFailed(f"family {name} wrote no figures")
    return loaded, log


def run_families(
    names: Sequence[str],
    common: Sequence[str],
    jobs: int,
    workdir: Path,
    say: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run each family of ``names`` in its own process, ``jobs`` at a time, longest first
    (the order given); answer the merged figures and targets, in the order given."""
    parts: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {name: pool.submit(_run_one, name, common, workdir) for name in names}
        for name, future in futures.items():
            loaded, log = future.result()
            say(log.rstrip())
            parts[name] = loaded
    figures = {name: parts[name]["traces"][name] for name in names}
    targets: dict[str, Any] = {}
    for name in names:
        targets.update(parts[name]["targets"])
    return figures, targets
