"""Target 7: unary AppendEvents latency, quiet and while 8 clients stream to other sessions.

The server is a child process (``bench.server_process``); the load is another
(``python -m bench.latency ADDRESS CLIENTS SECONDS``): each of its clients
keeps one StreamEvents stream busy on a session of its own with up to
``WINDOW`` unacknowledged messages, for at most ``SECONDS``. This process only
probes: sequential unary AppendEvents (one 300-2000 byte event each) on a
session of its own, first with no load, then under it. Keeping the load out of
the probing process means its event loop measures the server, not itself.

The bound is issue 17's: p99 under load within 10x the quiet p50. The server
schedules SQLite's one writer fairly between sessions (``fair_queue.py``), so
the probe's append waits for about the group being committed and its own, not
for the streams' backlog. What is left is the one Python process: its event
loop and writer thread share the GIL and, on two cores, the CPU with the load
generator, so a 16-event group that costs 2-3 ms of CPU takes several times
that in wall time under the flood.

The server and the load are already processes of their own; the ``_deployed``
target moves the probe out of the benchmark's process too (``bench.deployed``:
a client process of its own, as an agent's), right after this process's probe
under the same load, so neither the benchmark's heap nor its bookkeeping sits
in the probe's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from bench.common import Log, Outcome, Scale, Target, median, pb_event, percentile
from bench.deployed import client_process
from bench.server_process import server_process
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

TARGET_RATIO = 10.0
WINDOW = 16
LOAD_MAX_S = 300.0
ROOT = Path(__file__).resolve().parent.parent


async def probe_appends(stub: CompactionServiceAsyncStub, count: int, session: str) -> list[float]:
    out: list[float] = []
    for i in range(count):
        request = pb.AppendEventsRequest(
            session_id=session, events=[pb_event(i)], create_if_missing=True
        )
        began = time.perf_counter()
        await stub.AppendEvents(request)
        out.append(time.perf_counter() - began)
    return out


# --- the load generator (child process) -------------------------------------------------


async def _load_client(stub: CompactionServiceAsyncStub, client: int, stop: asyncio.Event) -> int:
    window = asyncio.Semaphore(WINDOW)
    acks = 0

    async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
        i = 0
        while not stop.is_set():
            await window.acquire()
            yield pb.StreamEventsRequest(
                request_id=str(i),
                session_id=f"load-{client}",
                events=[pb_event(i)],
                create_if_missing=True,
            )
            i += 1

    call = stub.StreamEvents(requests())
    async for reply in call:
        if reply.WhichOneof("result") == "error":
            raise RuntimeError(f"load append failed: {reply.error.message}")
        acks += 1
        window.release()
        if stop.is_set():
            call.cancel()  # type: ignore[no-untyped-call, unused-ignore]
            break
    return acks


async def load_main(address: str, clients: int, seconds: float) -> None:
    """Stream from ``clients`` clients until stdin closes or ``seconds`` pass; print acks."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = CompactionServiceStub(channel)
        tasks = [asyncio.create_task(_load_client(stub, c, stop)) for c in range(clients)]
        print("started", flush=True)
        reader = loop.run_in_executor(None, sys.stdin.readline)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(reader, min(seconds, LOAD_MAX_S))
        started = time.perf_counter()
        stop.set()
        acks = 0
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                acks += await task
        print(json.dumps({"acks": acks, "stop_s": time.perf_counter() - started}), flush=True)


# --- the benchmark (parent process) -----------------------------------------------------


@contextlib.asynccontextmanager
async def load_process(
    address: str, clients: int
) -> AsyncIterator[Callable[[], Awaitable[dict[str, Any]]]]:
    """The load generator streaming to ``address`` from ``clients`` clients, started.

    Yields ``stop``: it ends the load and returns its summary (``acks``). A
    load still running when the block ends is killed.
    """
    load = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.latency",
        address,
        str(clients),
        str(LOAD_MAX_S),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert load.stdin is not None
    assert load.stdout is not None
    stdin, stdout = load.stdin, load.stdout

    async def stop() -> dict[str, Any]:
        stdin.write(b"stop\n")
        await stdin.drain()
        summary: dict[str, Any] = json.loads(await asyncio.wait_for(stdout.readline(), 30))
        await asyncio.wait_for(load.wait(), 30)
        return summary

    try:
        if (await stdout.readline()).strip() != b"started":
            raise RuntimeError("load generator did not start")
        yield stop
    finally:
        if load.returncode is None:
            load.kill()
            await load.wait()


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    calls, clients = scale.probe_calls, scale.load_clients
    async with server_process(workdir) as server, client_process() as client:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = CompactionServiceStub(channel)
            await probe_appends(stub, 50, "warm")
            quiet = await probe_appends(stub, calls, "probe-quiet")
            await client.call("probe", server, count=50, session="d-warm")
            d_quiet = await client.call("probe", server, count=calls, session="d-probe-quiet")
            async with load_process(server.address, clients) as stop:
                await asyncio.sleep(0.5)  # let the streams reach a steady state
                began = time.perf_counter()
                loaded = await probe_appends(stub, calls, "probe-loaded")
                d_loaded = await client.call("probe", server, count=calls, session="d-probe-loaded")
                probe_s = time.perf_counter() - began
                summary = await stop()
    q50, q99 = percentile(quiet, 50) * 1000, percentile(quiet, 99) * 1000
    l50, l99 = percentile(loaded, 50) * 1000, percentile(loaded, 99) * 1000
    dq50, dq99, dl50, dl99 = (
        percentile(reply["seconds"], q) * 1000
        for reply, q in ((d_quiet, 50), (d_quiet, 99), (d_loaded, 50), (d_loaded, 99))
    )
    load_rate = summary["acks"] / (probe_s + 0.5)
    log(
        f"latency: unary AppendEvents, {calls} calls each; "
        f"quiet p50 {q50:.2f} ms p99 {q99:.2f} ms; "
        f"with {clients} streaming clients (~{load_rate:.0f} appends/s) "
        f"p50 {l50:.2f} ms p99 {l99:.2f} ms"
    )
    log(
        f"  probe in a process of its own: quiet p50 {dq50:.2f} ms p99 {dq99:.2f} ms; "
        f"loaded p50 {dl50:.2f} ms p99 {dl99:.2f} ms; server CPU per quiet append "
        f"{d_quiet['cpu_s']['server'] / calls * 1e6:.0f} us"
    )
    return Outcome(
        figures={
            "calls": calls,
            "load_clients": clients,
            "load_window": WINDOW,
            "quiet_p50_ms": q50,
            "quiet_p99_ms": q99,
            "quiet_median_ms": median(quiet) * 1000,
            "loaded_p50_ms": l50,
            "loaded_p99_ms": l99,
            "load_appends_per_s": load_rate,
            "deployed_quiet_p50_ms": dq50,
            "deployed_quiet_p99_ms": dq99,
            "deployed_loaded_p50_ms": dl50,
            "deployed_loaded_p99_ms": dl99,
            "deployed_quiet_server_cpu_us_per_append": d_quiet["cpu_s"]["server"] / calls * 1e6,
        },
        targets=[
            Target(
                "append_p99_under_load_vs_quiet_p50",
                l99 / q50,
                TARGET_RATIO,
                False,
                f"unary AppendEvents p99 with {clients} clients streaming / p50 with none",
            ),
            Target(
                "append_p99_under_load_vs_quiet_p50_deployed",
                dl99 / dq50,
                TARGET_RATIO,
                False,
                f"as deployed (probe, load and server a process each): unary AppendEvents "
                f"p99 with {clients} clients streaming / p50 with none",
            ),
        ],
    )


if __name__ == "__main__":
    asyncio.run(load_main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
