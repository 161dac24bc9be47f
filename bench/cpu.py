"""CPU per message of a streamed append, against the bare echo stream (a diagnostic, no target).

``python -m bench.cpu [MESSAGES] [ROUNDS]`` streams the same messages through
the echo server and the sidecar (one session), both in this process as in
``bench.appends``, and prints each side's rate, the CPU time the process
spent per message (user + system, every thread: gRPC's, the SQLite writer's,
the token counters') and the CPU used per second of wall time. The rate
ratio of ``bench.appends`` is bounded by these: a side that needs more CPU
per message than two cores can give at the echo's rate cannot keep up.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.appends import echo_rate, requests_for, service_rate
from bench.echo import echo_server
from bench.service import sidecar_server
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def main(messages: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        async with echo_server() as echo_address, sidecar_server(Path(directory)) as sidecar:
            async with (
                grpc.aio.insecure_channel(echo_address) as echo_channel,
                grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel,
            ):
                stub = CompactionServiceStub(channel)
                await service_rate(stub, requests_for(500, 1, "warm"))
                for r in range(rounds):
                    for name in ("echo", "sidecar"):
                        requests = requests_for(messages, 1, f"{name}{r}")
                        cpu, wall = _cpu_s(), time.perf_counter()
                        if name == "echo":
                            rate = await echo_rate(echo_channel, requests)
                        else:
                            rate = await service_rate(stub, requests)
                        cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
                        print(
                            f"round {r + 1} {name:8} {rate:7.0f} msg/s  "
                            f"{cpu / messages * 1e6:5.0f} us CPU per message  "
                            f"{cpu / wall:.2f} cores busy"
                        )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(args + [5000, 3][len(args) :])))
