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

The same again as deployed (``bench.deployed``), the ``_deployed`` target: the
same session built in a second file, served by the real CLI server in a process
of its own, the echo server in another, and both called, in the same
alternating blocks, by a client in a third.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc

from bench.common import Log, Outcome, Scale, Target, median, model_event, pb_event
from bench.deployed import client_process, echo_process
from bench.echo import CANNED, UNARY, echo_server
from bench.server_process import server_process
from bench.service import sidecar_server
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub
from sidecar.model import CompactionResult
from sidecar.server.app import Sidecar

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


async def _build(sidecar: Sidecar, total: int, window: int) -> CompactionResult:
    """The session: ``total`` events through the store, then one forced sliding-window pass."""
    engine = sidecar.engine
    for start in range(0, total, BATCH):
        batch = [model_event(i) for i in range(start, min(total, start + BATCH))]
        await engine.store.append(SESSION, batch, create_if_missing=True)
    policy = CompactionPolicy(trigger=None, strategy=SlidingWindow(max_events=window))
    return await engine.compact(SESSION, policy=policy, force=True)


async def _deployed(scale: Scale, directory: Path) -> dict[str, list[float]]:
    """The same blocks as deployed: GetContext, echo and after-append latencies, in seconds."""
    database = "deployed.db"
    async with sidecar_server(directory, database) as sidecar:  # builds it, then lets it go
        await _build(sidecar, scale.context_events, scale.context_window)
    calls = scale.context_calls
    async with (
        server_process(directory, database=directory / database) as server,
        echo_process() as echo,
        client_process() as client,
    ):
        warm = max(5, calls // 20)
        await client.call("get_context", server, session=SESSION, calls=warm)
        await client.call("echo_unary", echo, calls=warm)
        service: list[float] = []
        bare: list[float] = []
        per_block = max(1, calls // BLOCKS)
        for _ in range(BLOCKS):
            got = await client.call("get_context", server, session=SESSION, calls=per_block)
            service += got["seconds"]
            bare += (await client.call("echo_unary", echo, calls=per_block))["seconds"]
        after = await client.call(
            "append_then_get", server, session=SESSION, calls=AFTER_APPEND_CALLS
        )
    return {"service": service, "echo": bare, "after_append": after["seconds"]}


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    total, window, calls = scale.context_events, scale.context_window, scale.context_calls
    async with sidecar_server(workdir) as sidecar:
        result = await _build(sidecar, total, window)
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
    deployed = await _deployed(scale, workdir)
    service_ms, echo_ms, canned_ms, after_ms = (
        median(v) * 1000 for v in (service, bare, bare_canned, after_append)
    )
    d_service_ms, d_echo_ms, d_after_ms = (
        median(deployed[k]) * 1000 for k in ("service", "echo", "after_append")
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
    log(
        f"  as deployed (client, server, echo a process each): GetContext {d_service_ms:.3f} ms, "
        f"echo of the same bytes {d_echo_ms:.3f} ms, GetContext just after an append "
        f"{d_after_ms:.3f} ms"
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
            "deployed_get_context_median_ms": d_service_ms,
            "deployed_echo_median_ms": d_echo_ms,
            "deployed_get_context_after_append_median_ms": d_after_ms,
            "deployed_echo_vs_get_context_after_append_ratio": d_echo_ms / d_after_ms,
        },
        targets=[
            Target(
                "get_context_vs_echo",
                echo_ms / service_ms,
                TARGET_RATIO,
                True,
                "bare unary echo latency / GetContext latency (>= 0.5 means within 2x)",
            ),
            Target(
                "get_context_vs_echo_deployed",
                d_echo_ms / d_service_ms,
                TARGET_RATIO,
                True,
                "as deployed (client, server, echo: a process each): bare unary echo "
                "latency / GetContext latency",
            ),
        ],
    )
