"""The loop every worker process of the benchmark runs, and how its parent drives one.

A worker (``bench.adk_worker``, ``bench.client_worker``) reads one JSON
command a line on stdin (``{"op": NAME, ...}``), awaits ``worker.NAME(...)``
and writes its JSON reply a line on stdout; an exception becomes
``{"error": ...}``, which its parent turns into a failed run. ``quit`` or the
end of input ends it. The parent starts a worker with ``started``, sends it
commands with ``ask`` and stops it on leaving. Standard library only:
``bench.adk_worker`` runs this in ADK's own venv.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


async def serve(worker: Any) -> None:
    """Answer commands until ``quit`` or the end of input; then ``await worker.close()``."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            command: dict[str, Any] = json.loads(line)
            op = command.pop("op")
            if op == "quit":
                return
            try:
                reply = await getattr(worker, op)(**command)
            except Exception as exc:  # reported to the parent, which fails the run
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        await worker.close()


async def stop(process: asyncio.subprocess.Process) -> None:
    """End of input is a worker's signal to exit; killed if it does not within 10 s."""
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), 10)
    except TimeoutError:
        process.kill()
        await process.wait()


@asynccontextmanager
async def started(python: str | Path, module: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m module`` from the repo root, its stdin and stdout piped; stopped on leaving."""
    process = await asyncio.create_subprocess_exec(
        str(python),
        "-m",
        module,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        await stop(process)


async def ask(process: asyncio.subprocess.Process, who: str, command: dict[str, Any]) -> Any:
    """Send ``command``, await the reply; a worker that exits or answers an error raises."""
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None
    assert stdout is not None
    stdin.write((json.dumps(command) + "\n").encode())
    await stdin.drain()
    line = await stdout.readline()
    if not line:
        raise RuntimeError(f"{who} exited (code {await process.wait()}) during {command['op']}")
    reply = json.loads(line)
    if "error" in reply:
        raise RuntimeError(f"{who} {command['op']}: {reply['error']}")
    return reply
