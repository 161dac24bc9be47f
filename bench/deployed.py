"""As deployed: the load generator, the server and the echo baseline each in a process of its own.

The in-process rows of ``make bench`` run the client and the server (the
sidecar or the echo) in one interpreter, so they share its GIL and event loop;
an agent never calls the sidecar that way. The ``_deployed`` rows run the real
CLI (``compaction-sidecar serve``, ``bench.server_process``), the echo server
as ``python -m bench.echo`` and the client as ``python -m bench.client_worker``,
each its own process, and the benchmark only sends the client its commands and
reads back the rates it timed. ADK is a library inside the agent's process, so
its baseline stays in its own worker (``bench.adk_worker``).

Each command's reply carries, besides the client's figures, the CPU time
(user + system, every thread, from /proc/<pid>/stat) the client and the server
spent on it: ``cpu_s`` maps ``client`` and ``server`` to seconds.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from bench.common import median
from bench.json_lines import ask, started
from bench.server_process import ServerProcess, cpu_seconds


@dataclass(frozen=True, slots=True)
class EchoProcess:
    pid: int
    address: str


Served = EchoProcess | ServerProcess


class ClientProcess:
    """One running ``bench.client_worker``; ``call`` sends a command and awaits its reply."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self.pid = process.pid

    async def call(self, op: str, server: Served, **args: Any) -> dict[str, Any]:
        """Run ``op`` against ``server``; the reply gains ``cpu_s`` of client and server."""
        before = cpu_seconds(self.pid), cpu_seconds(server.pid)
        reply: dict[str, Any] = await ask(
            self._process, "client", {"op": op, "address": server.address, **args}
        )
        after = cpu_seconds(self.pid), cpu_seconds(server.pid)
        reply["cpu_s"] = {"client": after[0] - before[0], "server": after[1] - before[1]}
        return reply


@asynccontextmanager
async def client_process() -> AsyncIterator[ClientProcess]:
    """``python -m bench.client_worker`` from the repo root; stopped afterwards."""
    async with started(sys.executable, "bench.client_worker") as process:
        yield ClientProcess(process)


@asynccontextmanager
async def echo_process() -> AsyncIterator[EchoProcess]:
    """``python -m bench.echo`` on a free loopback port; stopped afterwards."""
    async with started(sys.executable, "bench.echo") as process:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        if not line:
            raise RuntimeError(f"echo server exited with code {await process.wait()}")
        yield EchoProcess(process.pid, line.decode().strip())


def per_message_us(replies: list[dict[str, Any]], side: str, messages: int) -> float:
    """Median over rounds of ``side``'s CPU per message, in microseconds."""
    return median([r["cpu_s"][side] / messages * 1e6 for r in replies])
