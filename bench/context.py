"""Target 2: GetContext of a 200-event active window in a long session vs a bare unary echo.

The session is built through the server's own store (events with token counts
already set, for speed), then compacted once through the engine with a forced
sliding window, so the log holds ``context_events`` events of which ~200 are
active. The baseline is a unary call to a bare grpc.aio server that echoes the
very bytes GetContext returned. A second baseline (``canned``: small request,
the same bytes back) is reported but not targeted.
Calls alternate in blocks; the figure is the median latency per call.

The target reads an unchanged session, which the server answers from its
last response after one header lookup. An agent reads its context right after
appending: ``after_append`` times GetContext calls each made just after a
one-event append (the append itself untimed), where the server adds the new
event's wire bytes to its last response. It is reported next to the target,
not instead of it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from bench.common import Log, Outcome, Scale, Target, median, model_event, pb_event
from bench.echo import CANNED, UNARY, echo_server
from bench.service import sidecar_server
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

TARGET_RATIO = 0.5
SESSION = "bench-context"
BATCH = 1000
BLOCKS = 5
AFTER_APPEND_CALLS = 40  # the window grows by one per call: 200 -> 240 events


async def _latencies(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    out: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    total, window, calls = scale.context_events, scale.context_window, scale.context_calls
    async with sidecar_server(workdir) as sidecar:
        engine = sidecar.engine
        for start in range(0, total, BATCH):
            batch = [model_event(i) for i in range(start, min(total, start + BATCH))]
            await engine.store.append(SESSION, batch, create_if_missing=True)
        policy = CompactionPolicy(trigger=None, strategy=SlidingWindow(max_events=window))
        result = await engine.compact(SESSION, policy=policy, force=True)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel:
            stub = CompactionServiceStub(channel)
            request = pb.GetContextRequest(session_id=SESSION)
            reply = await stub.GetContext(request)
            payload = reply.SerializeToString()
            log(
                f"GetContext: {total}-event session, {len(reply.events)} active "
                f"({len(result.archived_events)} archived by the pass), "
                f"response {len(payload)} B, {calls} calls each"
            )
            async with (
                echo_server(payload) as echo_address,
                grpc.aio.insecure_channel(echo_address) as echo_channel,
            ):
                echo = echo_channel.unary_unary(UNARY, None, None)
                canned = echo_channel.unary_unary(CANNED, None, None)
                small = request.SerializeToString()

                async def get_context() -> object:
                    return await stub.GetContext(request)

                async def echo_call() -> object:
                    return await echo(payload)

                async def canned_call() -> object:
                    return await canned(small)

                for fn in (get_context, echo_call, canned_call):  # warm up
                    await _latencies(fn, max(5, calls // 20))
                service: list[float] = []
                bare: list[float] = []
                bare_canned: list[float] = []
                per_block = max(1, calls // BLOCKS)
                for _ in range(BLOCKS):
                    service += await _latencies(get_context, per_block)
                    bare += await _latencies(echo_call, per_block)
                    bare_canned += await _latencies(canned_call, per_block)
                after_append: list[float] = []
                for i in range(AFTER_APPEND_CALLS):
                    append = pb.AppendEventsRequest(session_id=SESSION, events=[pb_event(i)])
                    await stub.AppendEvents(append)
                    after_append += await _latencies(get_context, 1)
    service_ms, echo_ms, canned_ms, after_ms = (
        median(v) * 1000 for v in (service, bare, bare_canned, after_append)
    )
    log(
        f"  median latency: GetContext {service_ms:.3f} ms, echo of the same bytes "
        f"{echo_ms:.3f} ms, canned reply of the same bytes {canned_ms:.3f} ms"
    )
    log(
        f"  GetContext just after a one-event append: {after_ms:.3f} ms "
        f"({echo_ms / after_ms:.2f} of the echo's speed; the window grows by one each time, "
        f"to {len(reply.events) + AFTER_APPEND_CALLS} events)"
    )
    return Outcome(
        figures={
            "session_events": total,
            "active_events": len(reply.events),
            "response_bytes": len(payload),
            "calls": len(service),
            "get_context_median_ms": service_ms,
            "echo_median_ms": echo_ms,
            "canned_median_ms": canned_ms,
            "get_context_mean_ms": sum(service) / len(service) * 1000,
            "get_context_after_append_median_ms": after_ms,
            "echo_vs_get_context_after_append_ratio": echo_ms / after_ms,
            "echo_mean_ms": sum(bare) / len(bare) * 1000,
            "canned_vs_get_context_ratio": canned_ms / service_ms,
        },
        targets=[
            Target(
                "get_context_vs_echo",
                echo_ms / service_ms,
                TARGET_RATIO,
                True,
                "bare unary echo latency / GetContext latency (>= 0.5 means within 2x)",
            ),
        ],
    )
