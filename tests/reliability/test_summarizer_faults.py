"""A slow, failing or blank summarizer never holds appends up and never changes data wrongly.

Clients load sessions whose policy summarizes (small windows, so a pass is
scheduled every few appends) on an in-process server with a fake summarizer:

- slow: answers after 2 s. Appends must not wait for it: the LLM call runs
  outside the session lock. Shown two ways: under the load, the median append
  takes under 1 s, half the summarizer's 2 s (an append that waited for it
  takes up to 2 s; typical is a few milliseconds); and, deterministically, a
  summarizer held until the test lets it go while appends to the very session
  it summarizes are acknowledged. (A p99 bound failed on a loaded CI machine,
  where one stall of the whole process delays every append in flight.)
  Summaries land.
- failing: raises SummarizerUnavailable. Nothing is stored by any pass; a
  forced Compact answers UNAVAILABLE.
- blank: answers whitespace. The pass is skipped; nothing is stored.

In every case the whole history is then checked (``history.py``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import grpc
import pytest

from sidecar.errors import SummarizerUnavailable
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse
from tests.reliability.budget import BUDGET, FIGURES
from tests.reliability.history import History, check_history
from tests.reliability.load import LoadClient, Mix, background, policy_message
from tests.server.harness import address, running

SLOW_S = 2.0
MEDIAN_BOUND_S = SLOW_S / 2  # an append held behind the summarizer takes up to SLOW_S
HELD_APPEND_S = 20.0  # an append behind a held summarizer would never be answered

SUMMARIZING = {
    "trigger": {"event_count": 10},
    "strategy": {
        "summarize": {"max_events_to_keep": 4, "overlap": 1, "max_summary_tokens": 16},
        "boundary": "BOUNDARY_TURN",
    },
}


class FaultySummarizer:
    """Answers slowly, fails, or answers blank; counts its calls."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.calls = 0
        self.held: asyncio.Event | None = None  # set: a slow answer waits for this instead
        self.entered = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        self.entered.set()
        if self.fault == "slow":
            if self.held is not None:
                await self.held.wait()
            else:
                await asyncio.sleep(SLOW_S)
            return SummaryResponse(text="The user asked questions; the tools answered 42.")
        if self.fault == "failing":
            raise SummarizerUnavailable("the model is down (injected)")
        return SummaryResponse(text="  \n ")


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def appends_go_on_while_held(stub: Any, summarizer: FaultySummarizer) -> None:
    """Hold the summarizer; the session it summarizes still takes appends meanwhile."""
    summarizer.held = asyncio.Event()
    summarizer.entered.clear()
    session = "held-summary"
    await stub.CreateSession(
        pb.CreateSessionRequest(session_id=session, policy=policy_message(SUMMARIZING))
    )

    async def append(n: int) -> None:
        events = [
            event_pb2.Event(id=f"h{n}-u", role=event_pb2.ROLE_USER, text=f"question {n}"),
            event_pb2.Event(id=f"h{n}-a", role=event_pb2.ROLE_ASSISTANT, text=f"answer {n}"),
        ]
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id=session, events=events), timeout=HELD_APPEND_S
        )

    n = 0
    while not summarizer.entered.is_set():  # the trigger fires within a few turns
        assert n < 50, "the held session's trigger never asked the summarizer"
        await append(n)
        n += 1
        await asyncio.sleep(0.01)
    for more in range(3):  # each within HELD_APPEND_S while the summary is held
        await append(n + more)
    summarizer.held.set()
    summarizer.held = None


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def stored_compactions(db_path: Path) -> tuple[int, int, int]:
    """(compactions, archived events, synthetic events) in the file."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        (compactions,) = db.execute("SELECT count(*) FROM compactions").fetchone()
        (archived,) = db.execute("SELECT count(*) FROM events WHERE archived = 1").fetchone()
        (synthetic,) = db.execute("SELECT count(*) FROM events WHERE synthetic = 1").fetchone()
    finally:
        db.close()
    return compactions, archived, synthetic


@pytest.mark.parametrize("fault", ["slow", "failing", "blank"])
async def test_a_faulty_summarizer_never_blocks_appends_nor_stores_a_bad_summary(
    tmp_path: Path, fault: str
) -> None:
    summarizer = FaultySummarizer(fault)
    history = History()
    sessions = [f"{fault}-{i}" for i in range(2)]
    async with running(tmp_path, summarizer=summarizer, default_policy="none") as sidecar:
        target = address(sidecar)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            for session in sessions:
                await stub.CreateSession(
                    pb.CreateSessionRequest(session_id=session, policy=policy_message(SUMMARIZING))
                )
            mix = Mix(compact=0.0, stale_version=0.0, bad_batch=0.0, lost_ack=0.1, context=0.2)
            clients = [
                LoadClient(f"c{i}", sessions[i % 2], target, history, seed=i, mix=mix)
                for i in range(4)
            ]
            async with background(clients):
                await asyncio.sleep(BUDGET.summarizer_load_s)
            await sidecar.engine.wait_idle()
            if fault == "slow":
                await appends_go_on_while_held(stub, summarizer)
                await sidecar.engine.wait_idle()
            if fault == "failing":
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.Compact(pb.CompactRequest(session_id=sessions[0], force=True))
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            if fault == "blank":
                reply = await stub.Compact(pb.CompactRequest(session_id=sessions[0], force=True))
                assert not reply.result.compacted
        report = await check_history(target, history, tmp_path / "sidecar.db")
    latencies = [t for c in clients for t in c.latencies]
    assert len(latencies) > 20
    assert summarizer.calls > 0, "the summarizer was never asked: the test proves nothing"
    assert median(latencies) < MEDIAN_BOUND_S, (
        f"median append latency {median(latencies):.3f} s with a {fault} summarizer"
        f" (p99 {p99(latencies):.3f} s, max {max(latencies):.3f} s)"
    )
    print(f"{fault} summarizer: {len(latencies)} appends, p99 {p99(latencies) * 1000:.1f} ms")
    compactions, archived, synthetic = stored_compactions(tmp_path / "sidecar.db")
    if fault == "slow":
        assert compactions > 0  # the slow summaries did land
        assert synthetic > 0
    else:
        assert (compactions, archived, synthetic) == (0, 0, 0)
    FIGURES["histories_checked"] += report.sessions
    FIGURES["operations_checked"] += report.operations
    FIGURES["snapshots_checked"] += report.snapshots
    FIGURES["acknowledged_events"] += report.acknowledged
    FIGURES["lost_acks_retried"] += history.lost_acks
