"""Where a quiet session's unary append spends its time while 8 streams flood others.

``bench.latency`` measures the probe's round trip (issue 37's loaded p99
within ten times the quiet p50); this says where that time goes. The same probe
and load run against the CLI server started with hooks that timestamp each
probe append (a session whose id holds ``probe``) on its way through the
server: the handler, the store's write, and, when the write is queued for
the SQLite writer's thread, the wait for its group, the group's commit (wall
time, the thread's CPU, and its wait for a CPU from the kernel's run queue,
``/proc/self/task/<tid>/schedstat``) and the hand-back to the event loop.
What the commit's wall time holds beyond its CPU and run-queue wait is the
writer thread waiting for the GIL. The rest of the round trip, outside the
handler, is gRPC's receiving and sending on the event loop.

    python -m bench.latency_stages [--calls N] [--out FILE]

The hooks wrap private names of the server (``CompactionServicer.AppendEvents``,
``SqliteWriter``, ``FairQueue.take_group``, ``sqlite_writer._settle_all``);
``tests/test_bench_latency_stages.py`` runs a short measurement so that a
renamed one fails there rather than here.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import grpc

from bench.common import percentile
from bench.latency import load_process, probe_appends
from bench.server_process import server_process
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

CLIENTS = 8
ROOT = Path(__file__).resolve().parent.parent
# The stages, as (name, start mark, end mark); every probe has the first
# block's marks, a queued one the second's too.
HANDLER_STAGES = (
    ("handler, before the store's write", "h0", "w0"),
    ("the store's write", "w0", "w1"),
    ("handler, after the write", "w1", "h1"),
)
QUEUED_STAGES = (
    ("  queued until its group is taken", "q", "t"),
    ("  its group's commit", "c0", "c1"),
    ("  commit to the loop settling it", "c1", "s"),
    ("  settled to the handler resuming", "s", "w1"),
)
# The order of a probe's marks: committed on the loop's thread, or queued for the writer's.
INLINE_MARKS = ("h0", "w0", "w1", "h1")
QUEUED_MARKS = ("h0", "w0", "q", "t", "c0", "c1", "s", "w1", "h1")


# --- the server (child process) ---------------------------------------------------------


def _run_time_of_this_thread() -> float:
    """Seconds this thread has waited on the kernel's run queue so far."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def install_hooks(out: TextIO) -> None:
    """Time each probe append's stages in this process's server; a JSON line each to ``out``.

    The probes are sequential, so one record is in flight at a time.
    """
    from sidecar.server import servicer
    from sidecar.store import fair_queue, sqlite_writer

    now = time.perf_counter
    record: dict[str, Any] = {}
    futures: set[int] = set()
    bodies: set[int] = set()

    handler = servicer.CompactionServicer.AppendEvents

    async def append_events(self: Any, request: Any, context: Any) -> Any:
        if "probe" not in request.session_id:
            return await handler(self, request, context)
        record.clear()
        futures.clear()
        bodies.clear()
        record.update(session=request.session_id, h0=now())
        try:
            return await handler(self, request, context)
        finally:
            record["h1"] = now()
            out.write(json.dumps(record) + "\n")

    write = sqlite_writer.SqliteWriter.write

    async def timed_write(self: Any, body: Any, *, session_id: str = "", **kw: Any) -> Any:
        if "probe" not in session_id or "h0" not in record:
            return await write(self, body, session_id=session_id, **kw)
        record["w0"], inline_before = now(), self.inline_writes
        try:
            return await write(self, body, session_id=session_id, **kw)
        finally:
            record.update(w1=now(), inline=self.inline_writes > inline_before)

    submit_many = sqlite_writer.SqliteWriter.submit_many

    def timed_submit_many(self: Any, writes: Sequence[tuple[Any, str, int]]) -> Any:
        queued = submit_many(self, writes)
        for (body, session_id, _), done in zip(writes, queued, strict=True):
            if "probe" in session_id:
                futures.add(id(done))
                bodies.add(id(body))
                record["q"] = now()
        return queued

    take_group = fair_queue.FairQueue.take_group

    def timed_take_group(self: Any) -> list[Any]:
        group = take_group(self)
        if any(id(done) in futures for _, done in group):
            record.update(t=now(), group=len(group))
        return group

    commit = sqlite_writer.SqliteWriter._commit

    def timed_commit(db: Any, group_bodies: list[Any]) -> Any:
        if not any(id(body) in bodies for body in group_bodies):
            return commit(db, group_bodies)
        began, cpu, waited = now(), time.thread_time(), _run_time_of_this_thread()
        try:
            return commit(db, group_bodies)
        finally:
            record.update(
                c0=began,
                c1=now(),
                cpu=time.thread_time() - cpu,
                run_queue=_run_time_of_this_thread() - waited,
            )

    settle_all = sqlite_writer._settle_all

    def timed_settle_all(settled: list[Any]) -> None:
        if any(id(done) in futures for done, _ in settled):
            record["s"] = now()
        settle_all(settled)

    servicer.CompactionServicer.AppendEvents = append_events  # type: ignore[method-assign]
    sqlite_writer.SqliteWriter.write = timed_write  # type: ignore[method-assign]
    sqlite_writer.SqliteWriter.submit_many = timed_submit_many  # type: ignore[method-assign]
    fair_queue.FairQueue.take_group = timed_take_group  # type: ignore[method-assign]
    sqlite_writer.SqliteWriter._commit = staticmethod(timed_commit)  # type: ignore[method-assign, assignment]
    sqlite_writer._settle_all = timed_settle_all


def serve(trace: str, argv: Sequence[str]) -> int:
    """The CLI server (``argv``: its arguments) with the hooks writing to ``trace``."""
    from sidecar.cli import main

    with open(trace, "a", buffering=1) as out:
        install_hooks(out)
        return main(list(argv))


# --- the measurement (parent process) ---------------------------------------------------


def _stages(records: list[dict[str, Any]], round_trips: list[float]) -> dict[str, Any]:
    """Each stage's p50 / p90 / p99 in ms over the probes, and how many were queued."""
    ms = 1000.0

    def spread(values: list[float]) -> dict[str, float]:
        return {f"p{q}": percentile(values, q) * ms for q in (50, 90, 99)}

    if len(records) != len(round_trips):
        raise RuntimeError(f"{len(records)} probes timed by the server, {len(round_trips)} sent")
    for r in records:
        marks = QUEUED_MARKS if "c1" in r else INLINE_MARKS
        if any(r[a] > r[b] for a, b in itertools.pairwise(marks)):
            raise RuntimeError(f"a probe's marks out of order: {r}")
    queued = [r for r in records if "c1" in r]
    stages = {
        "round trip": spread(round_trips),
        "gRPC in and out (outside the handler)": spread(
            [rt - (r["h1"] - r["h0"]) for rt, r in zip(round_trips, records, strict=True)]
        ),
    }
    for name, start, end in HANDLER_STAGES:
        stages[name] = spread([r[end] - r[start] for r in records])
    if queued:
        for name, start, end in QUEUED_STAGES:
            stages[name] = spread([r[end] - r[start] for r in queued])
        stages["    its CPU"] = spread([r["cpu"] for r in queued])
        stages["    its wait for a CPU"] = spread([r["run_queue"] for r in queued])
        stages["    the rest: waiting for the GIL"] = spread(
            [max(0.0, r["c1"] - r["c0"] - r["cpu"] - r["run_queue"]) for r in queued]
        )
    return {
        "calls": len(records),
        "queued": len(queued),
        "appends in its group (median)": percentile([r["group"] for r in queued], 50)
        if queued
        else 0,
        "stages_ms": stages,
    }


async def measure(calls: int, workdir: Path) -> dict[str, Any]:
    """The probe's stages with no load, then while ``CLIENTS`` streams flood other sessions."""
    trace = workdir / "trace.jsonl"
    entry = (
        "-c",
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench.latency_stages import main;"
        " sys.exit(main(sys.argv[1:]))",
        "serve",
        str(trace),
        "--",
    )
    async with server_process(workdir, entry=entry) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = CompactionServiceStub(channel)
            await probe_appends(stub, 50, "warm")
            quiet = await probe_appends(stub, calls, "probe-quiet")
            async with load_process(server.address, CLIENTS) as stop:
                await asyncio.sleep(0.5)  # the streams' steady state, as bench.latency
                loaded = await probe_appends(stub, calls, "probe-loaded")
                load = await stop()
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    return {
        "load_acks": load["acks"],
        "quiet": _stages([r for r in records if r["session"] == "probe-quiet"], quiet),
        "loaded": _stages([r for r in records if r["session"] == "probe-loaded"], loaded),
    }


def report(result: dict[str, Any], print_: Callable[[str], None] = print) -> None:
    for phase in ("quiet", "loaded"):
        part = result[phase]
        print_(
            f"{phase}: {part['calls']} probes, {part['queued']} queued for the writer's thread"
            f" (median {part['appends in its group (median)']} appends in their group)"
        )
        print_(f"  {'ms':40s} {'p50':>7s} {'p90':>7s} {'p99':>7s}")
        for name, spread in part["stages_ms"].items():
            print_(f"  {name:40s} {spread['p50']:7.2f} {spread['p90']:7.2f} {spread['p99']:7.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        return serve(args[1], args[args.index("--") + 1 :])
    parser = argparse.ArgumentParser(prog="python -m bench.latency_stages", description=__doc__)
    parser.add_argument("--calls", type=int, default=400, help="probes with no load, then loaded")
    parser.add_argument("--out", type=Path, help="write the stages as JSON here too")
    options = parser.parse_args(args)
    with tempfile.TemporaryDirectory(prefix="latency-stages-") as workdir:
        result = asyncio.run(measure(options.calls, Path(workdir)))
    report(result)
    if options.out:
        options.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
