"""Fair share: a quiet session is served while eight streams flood other sessions.

The flood is ``bench.latency``'s load generator in a process of its own: eight
StreamEvents calls, each on a session of its own, each keeping sixteen appends
unacknowledged. This process probes with sequential unary appends to a
session of its own, first with no load, then under it, and prints both.

What is asserted is what holds on any machine: every probe is answered and
stored exactly once, nothing the flood had acknowledged is missing, and no
probe waits anywhere near a starved request's time. The ratio of the loaded
p99 to the quiet p50 is a benchmark figure (``make bench``, target
``append_p99_under_load_vs_quiet_p50``), measured there against the same run.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.postgres_server import free_port
from tests.reliability.budget import LONG, measured
from tests.reliability.serve import ROOT, ServeProcess

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

FLOODING_STREAMS = 8
PROBES = 600 if LONG else 80
STARVED_S = 2.0  # a probe this late was queued behind the flood, not beside it


async def probe(stub: CompactionServiceAsyncStub, session: str, calls: int) -> list[float]:
    took = []
    for n in range(calls):
        request = pb.AppendEventsRequest(
            session_id=session,
            create_if_missing=True,
            events=[event_pb2.Event(id=f"{session}-{n}", role=event_pb2.ROLE_USER, text="q" * 600)],
        )
        started = time.perf_counter()
        await stub.AppendEvents(request, timeout=30)
        took.append(time.perf_counter() - started)
    return took


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


async def test_a_quiet_session_is_served_beside_a_flood(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path / "sidecar.db", free_port(), tmp_path / "serve.log")
    server.start()
    flood = None
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: CompactionServiceAsyncStub = pb_grpc.CompactionServiceStub(channel)
            await probe(stub, "warm", 20)
            quiet = await probe(stub, "quiet", PROBES)
            flood = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.latency",
                server.address,
                str(FLOODING_STREAMS),
                "300",
                cwd=ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            assert flood.stdin is not None
            assert flood.stdout is not None
            started = await asyncio.wait_for(flood.stdout.readline(), 60)
            assert started.strip() == b"started", started
            await asyncio.sleep(0.5)  # the streams are at full speed
            loaded = await probe(stub, "loaded", PROBES)
            flood.stdin.write(b"stop\n")
            await flood.stdin.drain()
            summary = json.loads(await asyncio.wait_for(flood.stdout.readline(), 60))
            assert await asyncio.wait_for(flood.wait(), 30) == 0

            q50, l50, l99 = (
                percentile(quiet, 50) * 1000,
                percentile(loaded, 50) * 1000,
                percentile(loaded, 99) * 1000,
            )
            print(
                f"quiet append p50 {q50:.1f} ms; while {FLOODING_STREAMS} streams flooded"
                f" ({summary['acks']:,} acks): p50 {l50:.1f} ms, p99 {l99:.1f} ms,"
                f" max {max(loaded) * 1000:.1f} ms"
            )
            measured("fair_share_quiet_p50_ms", q50)
            measured("fair_share_loaded_p50_ms", l50)
            measured("fair_share_loaded_p99_ms", l99)
            assert max(loaded) < STARVED_S, sorted(loaded)[-5:]

            for session in ("quiet", "loaded"):
                got = await stub.GetSession(pb.GetSessionRequest(session_id=session))
                assert got.total_event_count == PROBES
            stored = 0
            for c in range(FLOODING_STREAMS):
                got = await stub.GetSession(pb.GetSessionRequest(session_id=f"load-{c}"))
                stored += got.total_event_count
            # Every ack is stored; an append cancelled with its stream may be stored unacked.
            assert stored >= summary["acks"] > 0
    finally:
        if flood is not None and flood.returncode is None:
            flood.kill()
            await flood.wait()
        server.stop()
