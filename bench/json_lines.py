"""The loop every worker process of the benchmark runs, and how its parent stops one.

A worker (``bench.adk_worker``, ``bench.client_worker``) reads one JSON
command a line on stdin (``{"op": NAME, ...}``), awaits ``worker.NAME(...)``
and writes its JSON reply a line on stdout; an exception becomes
``{"error": ...}``, which its parent turns into a failed run. ``quit`` or the
end of input ends it. Standard library only: ``bench.adk_worker`` runs it in
ADK's own venv.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


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
