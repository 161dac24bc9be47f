"""Target 3b: GetContext (200-event window) vs Google ADK's ``get_session`` on the same session.

Both sides hold one session of ``adk_context_events`` events of 300-2000 bytes
(10,000 in full mode). The sidecar's is built through its store and compacted
once with a 200-event sliding window (as in ``context``); GetContext returns
the active window over gRPC. ADK's sessions are built with ``append_event`` in
``bench.adk_worker`` (SqliteSessionService and DatabaseSessionService, WAL
files), and ``get_session`` with ADK's default config loads every event: that
is the target's baseline. ``get_session`` limited to the 200 most recent events
(``GetSessionConfig(num_recent_events=200)``) is reported too, not targeted.
Figures are median latencies.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from bench import adk
from bench.common import Log, Outcome, Scale, Target, median, model_event
from bench.service import sidecar_server
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

TARGET_RATIO = 50.0
SESSION = "bench-adk-context"
BATCH = 1000
SERVICES = {"sqlite": "SqliteSessionService", "database": "DatabaseSessionService"}
TARGETS = tuple(f"get_context_vs_adk_{service}_get_session" for service in SERVICES)


def sizes_for(total: int, window: int) -> list[int]:
    """Session sizes at which both sides are measured: a curve ending at ``total``."""
    return sorted({n for n in (total // 10, total // 4, total // 2, total) if n > window})


async def _get_context_latencies(
    stub: CompactionServiceAsyncStub, request: pb.GetContextRequest, count: int
) -> tuple[list[float], int]:
    out: list[float] = []
    active = 0
    for _ in range(count):
        began = time.perf_counter()
        reply = await stub.GetContext(request)
        out.append(time.perf_counter() - began)
        active = len(reply.events)
    return out, active


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    python = adk.require(scale)
    if python is None:
        reason = adk.missing_reason()
        log(f"GetContext vs ADK get_session: skipped, {reason}")
        return Outcome(skipped=dict.fromkeys(TARGETS, reason))
    total, window = scale.adk_context_events, scale.context_window
    calls, adk_calls = scale.context_calls, scale.adk_get_calls
    sizes = sizes_for(total, window)
    policy = CompactionPolicy(trigger=None, strategy=SlidingWindow(max_events=window))
    request = pb.GetContextRequest(session_id=SESSION)
    curve: list[dict[str, object]] = []
    build_s = dict.fromkeys(SERVICES, 0.0)
    log(
        f"GetContext vs ADK get_session: sessions of {', '.join(map(str, sizes))} events, "
        f"{window}-event window; ADK sessions built with append_event (WAL files)"
    )
    async with (
        sidecar_server(workdir) as sidecar,
        adk.adk_worker(python) as worker,
        grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel,
    ):
        stub = CompactionServiceStub(channel)
        for service in SERVICES:
            path = str(workdir / f"adk-{service}.db")
            await worker.call("open", service=service, name=service, path=path, wal=True)
        built = 0
        for size in sizes:
            for start in range(built, size, BATCH):
                batch = [model_event(i) for i in range(start, min(size, start + BATCH))]
                await sidecar.engine.store.append(SESSION, batch, create_if_missing=True)
            await sidecar.engine.compact(SESSION, policy=policy, force=True)
            for service in SERVICES:
                reply = await worker.call(
                    "append", name=service, session=SESSION, start=built, count=size - built
                )
                build_s[service] += reply["seconds"]
            built = size
            await _get_context_latencies(stub, request, max(5, calls // 20))  # warm up
            service_s: list[float] = []
            full: dict[str, list[float]] = {s: [] for s in SERVICES}
            recent: dict[str, list[float]] = {s: [] for s in SERVICES}
            for service in SERVICES:  # warm up
                await worker.call("get", name=service, session=SESSION, calls=1, recent=None)
            # Blocks alternate the sides; GetContext gets many more calls (it is ~100x faster).
            per_block = max(3, min(20, calls // adk_calls))
            for _ in range(adk_calls):
                got_s, active = await _get_context_latencies(stub, request, per_block)
                service_s += got_s
                for service in SERVICES:
                    got = await worker.call(
                        "get", name=service, session=SESSION, calls=1, recent=None
                    )
                    if got["events"] != size:
                        raise RuntimeError(
                            f"ADK {service} get_session loaded {got['events']} of {size} events"
                        )
                    full[service] += got["seconds"]
                    got = await worker.call(
                        "get", name=service, session=SESSION, calls=1, recent=window
                    )
                    recent[service] += got["seconds"]
            point = {
                "events": size,
                "active_events": active,
                "get_context_ms": median(service_s) * 1000,
                "adk_get_session_ms": {s: median(v) * 1000 for s, v in full.items()},
                "adk_get_session_recent_ms": {s: median(v) * 1000 for s, v in recent.items()},
            }
            curve.append(point)
            log(
                f"  {size} events: GetContext {point['get_context_ms']:.2f} ms "
                f"({active} events); "
                + "; ".join(
                    f"{SERVICES[s]}.get_session {median(full[s]) * 1000:.1f} ms "
                    f"(recent {window}: {median(recent[s]) * 1000:.1f} ms)"
                    for s in SERVICES
                )
            )
    last = curve[-1]
    service_ms = float(str(last["get_context_ms"]))
    full_ms = {s: median(v) * 1000 for s, v in full.items()}
    log("  ADK build time: " + ", ".join(f"{SERVICES[s]} {build_s[s]:.1f} s" for s in SERVICES))
    return Outcome(
        figures={
            "session_events": total,
            "window": window,
            "get_context_calls_per_size": len(service_s),
            "adk_get_session_calls_per_size": adk_calls,
            "get_context_median_ms": service_ms,
            "adk_get_session_median_ms": full_ms,
            "curve": curve,
            "adk_build_s": build_s,
        },
        targets=[
            Target(
                f"get_context_vs_adk_{service}_get_session",
                full_ms[service] / service_ms,
                TARGET_RATIO,
                True,
                f"ADK {SERVICES[service]}.get_session latency (loads all {total} events) / "
                f"GetContext latency ({window}-event window)",
            )
            for service in SERVICES
        ],
    )
