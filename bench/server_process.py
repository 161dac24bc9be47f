"""The real server as a child process (``compaction-sidecar serve``), for memory and latency.

The in-process server of ``bench.service`` shares the benchmark's interpreter,
heap and event loop: its RSS cannot be told apart from the client's, and load
generated in the same loop would show up as server latency. Here the server is
its own process, started with the CLI exactly as deployed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

READY_TIMEOUT_S = 30.0
SERVE = ("-c", "import sys; from sidecar.cli import main; sys.exit(main())")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, every thread (/proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; field 3 is fields[0]
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB: VmRSS from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass(frozen=True, slots=True)
class ServerProcess:
    pid: int
    address: str


@asynccontextmanager
async def server_process(
    directory: Path,
    *,
    default_policy: str | None = "none",
    database: Path | None = None,
    entry: Sequence[str] = SERVE,
) -> AsyncIterator[ServerProcess]:
    """``compaction-sidecar serve`` on free loopback ports over a fresh SQLite file.

    ``default_policy=None`` keeps the server's own default policy; ``database``
    serves an existing SQLite file instead of ``directory/server.db``;
    ``entry``: the interpreter's arguments before ``serve`` (the CLI's ``main``).
    """
    policy = [] if default_policy is None else ["--default-policy", default_policy]
    port, health = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *entry,
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--health-listen",
        f"127.0.0.1:{health}",
        "--store",
        f"sqlite:///{database or directory / 'server.db'}",
        *policy,
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.DEVNULL,  # its "listening on" banner; errors go to stderr
    )
    address = f"127.0.0.1:{port}"
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            ready = asyncio.ensure_future(channel.channel_ready())
            exited = asyncio.ensure_future(process.wait())
            await asyncio.wait(
                {ready, exited}, timeout=READY_TIMEOUT_S, return_when="FIRST_COMPLETED"
            )
            ready.cancel()
            exited.cancel()
            if process.returncode is not None:
                raise RuntimeError(f"server exited with code {process.returncode} (see stderr)")
            if not ready.done() or ready.cancelled():
                raise RuntimeError(f"server not ready on {address} in {READY_TIMEOUT_S:g} s")
        yield ServerProcess(process.pid, address)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
