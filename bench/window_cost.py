"""Operations that change little on a big window, and what another session pays meanwhile.

One SQLite file holds, built directly (``SqliteStore.append``, token counts
set), one session per size in ``Scale.window_sizes`` (10,000 / 100,000 /
200,000 active events in full mode) and a small one. The server is a child
process over that file (``bench.server_process``). For each size, in turn:

- a Compact archiving 2 events (sliding_window keeping all but the first turn);
- the RestoreCompaction undoing it (2 events back, nothing else changed);
- a Compact with clear_tool_results and nothing to clear,

three times over (``REPEATS``, the medians compared). Each is timed from
this process; meanwhile the small session's context is read every 10 ms,
and its p99 is set against its p99 with the server quiet, measured in the
same run. The targets: each operation on the largest window ÷ the same on
the smallest (work proportional to what changes would make it about 1),
and the small session's p99 while the largest is worked on ÷ its quiet p99
(the loop is never held by a window: at most 10).

Each pass is planned from the window's head (``sidecar.compaction.head``)
and answers without the window past 1,000 events (``active_events_omitted``),
so what it costs is what it changes, and the stores' writes and the planning
run off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import grpc

from bench.common import Log, Outcome, Scale, Target, median, percentile
from bench.server_process import server_process
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import policy_pb2
from sidecar.model import Event, Role
from sidecar.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

OPS_BOUND = 1.5
REPEATS = 3
"""Rounds of the three operations per window, their medians compared: one Compact of
~0.1 s swung the ratio between 1.35 and 1.91 from run to run."""
CONTEXT_BOUND = 10.0
PROBE_EVERY_S = 0.01
T = TypeVar("T")


def _event(i: int) -> Event:
    text = f"message {i} about the incident and the deploy"
    role = Role.USER if i % 2 == 0 else Role.ASSISTANT
    return Event(id=f"e{i}", role=role, text=text, token_count=len(text) // 4)


async def _build(path: Path, sizes: tuple[int, ...]) -> None:
    store = SqliteStore(str(path))
    await store.open()
    try:
        for size in sizes:
            for start in range(0, size, 2_000):
                batch = [_event(i) for i in range(start, min(size, start + 2_000))]
                await store.append(f"big-{size}", batch, create_if_missing=True)
        await store.append("small", [_event(i) for i in range(20)], create_if_missing=True)
    finally:
        await store.close()


class Probe:
    """Reads the small session's context every ``PROBE_EVERY_S`` while work runs."""

    def __init__(self, stub: CompactionServiceAsyncStub) -> None:
        self.stub = stub
        self.took: list[float] = []

    async def read(self) -> None:
        started = time.perf_counter()
        await self.stub.GetContext(pb.GetContextRequest(session_id="small"), timeout=60)
        self.took.append(time.perf_counter() - started)

    async def meanwhile(self, work: Awaitable[T]) -> tuple[T, float]:
        """``work``'s answer and its seconds, the probe reading all along.

        The seconds end when the answer comes, not when the probe next looks:
        that was up to a read and a sleep later, 10-20 ms on a 100 ms Compact.
        """
        started = time.perf_counter()

        async def timed() -> tuple[T, float]:
            # Timed where it ends: a done callback may not have run yet when the probe
            # sees the work done, if both happen in one turn of the loop.
            answer = await work
            return answer, time.perf_counter() - started

        task = asyncio.ensure_future(timed())
        while not task.done():
            await self.read()
            await asyncio.sleep(PROBE_EVERY_S)
        return await task


def _compact(session: str, strategy: policy_pb2.Strategy) -> pb.CompactRequest:
    policy = policy_pb2.CompactionPolicy(strategy=strategy)
    return pb.CompactRequest(session_id=session, policy=policy, force=True)


async def _operations(
    stub: CompactionServiceAsyncStub, probe: Probe, size: int
) -> dict[str, float]:
    """Each operation's median seconds over ``REPEATS``: the restore leaves the window as
    the compact found it, so each round starts from the same window."""
    session = f"big-{size}"
    window = policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=size - 2))
    clearing = policy_pb2.Strategy(clear_tool_results=policy_pb2.ClearToolResults())
    seconds: dict[str, list[float]] = {"compact_s": [], "restore_s": [], "noop_clearing_s": []}
    for _ in range(REPEATS):
        compacted, compact_s = await probe.meanwhile(
            stub.Compact(_compact(session, window), timeout=600)
        )
        if compacted.result.archived_event_count != 2:
            raise RuntimeError(f"the compaction of {session} archived {compacted.result}")
        restored, restore_s = await probe.meanwhile(
            stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id=session), timeout=600)
        )
        if len(restored.result.restored_event_ids) != 2:
            raise RuntimeError(f"the restore of {session} brought back the wrong events")
        cleared, clearing_s = await probe.meanwhile(
            stub.Compact(_compact(session, clearing), timeout=600)
        )
        if cleared.result.compacted:
            raise RuntimeError(f"the clearing of {session} found something to clear")
        for name, value in (
            ("compact_s", compact_s),
            ("restore_s", restore_s),
            ("noop_clearing_s", clearing_s),
        ):
            seconds[name].append(value)
    return {name: median(values) for name, values in seconds.items()}


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    sizes = scale.window_sizes
    db = workdir / "window.db"
    started = time.perf_counter()
    await _build(db, sizes)
    log(
        f"window cost: active windows of {', '.join(f'{s:,}' for s in sizes)} events"
        f" (built in {time.perf_counter() - started:.1f} s), server in its own process"
    )
    options = [("grpc.max_receive_message_length", 256 << 20)]
    by_size: dict[int, dict[str, float]] = {}
    async with (
        server_process(workdir, database=db) as server,
        grpc.aio.insecure_channel(server.address, options=options) as channel,
    ):
        stub: CompactionServiceAsyncStub = pb_grpc.CompactionServiceStub(channel)
        probe = Probe(stub)
        for _ in range(20):
            await probe.read()
        probe.took.clear()
        quiet_until = time.perf_counter() + scale.window_quiet_s
        while time.perf_counter() < quiet_until:
            await probe.read()
            await asyncio.sleep(PROBE_EVERY_S)
        quiet = list(probe.took)
        for size in sizes:
            probe.took.clear()
            figures = await _operations(stub, probe, size)
            figures["context_p50_ms"] = median(probe.took) * 1000
            figures["context_p99_ms"] = percentile(probe.took, 99) * 1000
            figures["context_max_ms"] = max(probe.took) * 1000
            by_size[size] = figures
            log(
                f"  {size:>7,} events: compact 2 {figures['compact_s']:.2f} s,"
                f" restore {figures['restore_s']:.2f} s,"
                f" no-op clearing {figures['noop_clearing_s']:.2f} s;"
                f" another session's GetContext p50 {figures['context_p50_ms']:.0f} ms,"
                f" p99 {figures['context_p99_ms']:.0f} ms, max {figures['context_max_ms']:.0f} ms"
            )
    quiet_p99_ms = percentile(quiet, 99) * 1000
    log(
        f"  quiet: another session's GetContext p50 {median(quiet) * 1000:.1f} ms,"
        f" p99 {quiet_p99_ms:.1f} ms ({len(quiet)} reads)"
    )
    small, large = by_size[sizes[0]], by_size[sizes[-1]]
    label = f"{sizes[-1]:,} vs {sizes[0]:,} active events"
    targets = [
        Target(
            f"window_{op}_large_vs_small",
            large[f"{op}_s"] / small[f"{op}_s"],
            OPS_BOUND,
            at_least=False,
            description=f"{what} on {label}",
        )
        for op, what in (
            ("restore", "RestoreCompaction of 2 events"),
            ("noop_clearing", "a clearing with nothing to clear"),
            ("compact", "a Compact archiving 2 events"),
        )
    ]
    targets.append(
        Target(
            "window_ops_context_p99_vs_quiet",
            large["context_p99_ms"] / quiet_p99_ms,
            CONTEXT_BOUND,
            at_least=False,
            description="another session's GetContext p99 while the largest window is worked on"
            " vs its quiet p99",
        )
    )
    return Outcome(
        figures={
            "sizes": list(sizes),
            "by_size": {str(s): f for s, f in by_size.items()},
            "quiet_context_p50_ms": median(quiet) * 1000,
            "quiet_context_p99_ms": quiet_p99_ms,
        },
        targets=targets,
    )
