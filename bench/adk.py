"""The parent side of the ADK baseline: find ADK's virtualenv, run ``bench.adk_worker`` in it.

google-adk cannot share our virtualenv (every release pins ``google-genai<3``;
we pin 3.3.0), so ``make bench-adk-venv`` builds ``.venv-adk`` from
``bench/requirements-adk.txt`` and the worker runs there. ``BENCH_ADK_PYTHON``
points at another interpreter. Without one, only tiny mode (the smoke test) may
go on, and it says which targets it skipped; every other mode fails.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.common import Scale
from bench.json_lines import ROOT, ask, started

DEFAULT_PYTHON = ROOT / ".venv-adk" / "bin" / "python"


def adk_python() -> Path | None:
    """The interpreter that has google-adk, or None when there is none."""
    configured = os.environ.get("BENCH_ADK_PYTHON")
    path = Path(configured) if configured else DEFAULT_PYTHON
    return path if path.exists() else None


def missing_reason() -> str:
    where = os.environ.get("BENCH_ADK_PYTHON") or str(DEFAULT_PYTHON)
    return f"no google-adk interpreter at {where} (make bench-adk-venv, or set BENCH_ADK_PYTHON)"


def require(scale: Scale) -> Path | None:
    """The ADK interpreter; None (skip) is allowed in tiny mode only."""
    python = adk_python()
    if python is None and scale.name != "tiny":
        raise RuntimeError(missing_reason())
    return python


class AdkWorker:
    """One running ``bench.adk_worker``; ``call`` sends a command and awaits its reply."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def call(self, op: str, **args: Any) -> dict[str, Any]:
        reply: dict[str, Any] = await ask(self._process, "ADK worker", {"op": op, **args})
        return reply


@asynccontextmanager
async def adk_worker(python: Path) -> AsyncIterator[AdkWorker]:
    """The worker, started from the repo root so ``bench.texts`` imports; stopped afterwards
    (end of input is its signal to close its services and exit)."""
    async with started(python, "bench.adk_worker") as process:
        yield AdkWorker(process)
