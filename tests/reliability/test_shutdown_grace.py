"""SIGTERM under load: ``serve`` exits within ``--shutdown-grace-s`` and a small margin.

The grace is a bound on the whole drain, not on each of its steps: streams
still sending, watchers that never end on their own, summaries waiting on a
model that does not answer, and the store's close all fit in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.reliability.budget import FIGURES, LONG, measured
from tests.reliability.serve import ROOT
from tests.server.harness import free_port
from tests.summarizer.fake_gemini import answer, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

GRACE_S = 3.0
MARGIN_S = 3.0  # the process's own exit (threads, interpreter) on a loaded 2-core machine
STREAMS, WATCHERS, SUMMARIES = (8, 8, 6) if LONG else (4, 4, 3)
LOAD_S = 2.0

SUMMARIZE = policy_pb2.CompactionPolicy(
    strategy=policy_pb2.Strategy(
        summarize=policy_pb2.Summarize(max_events_to_keep=2, overlap=1, shadow_prompt="Summary")
    )
)


def _serve(port: int, db: Path, gemini_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GEMINI_API_KEY": "test-key",
        "COMPACTION_GEMINI_BASE_URL": gemini_url,
        "COMPACTION_GEMINI_API_VERSION": "v1beta",
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidecar.cli",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--store",
                f"sqlite:///{db}",
                "--default-policy",
                "none",
                "--summarizer",
                "gemini",
                "--gemini-model",
                "gemini-test-flash",
                "--gemini-timeout-s",
                "120",
                "--summary-timeout-s",
                "120",
                "--shutdown-grace-s",
                str(GRACE_S),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _event(name: str, n: int) -> event_pb2.Event:
    role = event_pb2.ROLE_USER if n % 2 == 0 else event_pb2.ROLE_ASSISTANT
    return event_pb2.Event(id=f"{name}-{n}", role=role, text=f"step {n} of {name} " * 300)


async def _ready(stub: Stub, deadline_s: float = 60.0) -> None:
    give_up = time.monotonic() + deadline_s
    while True:
        try:
            await stub.ListSessions(pb.ListSessionsRequest(), timeout=1)
            return
        except grpc.aio.AioRpcError:
            if time.monotonic() > give_up:
                raise
            await asyncio.sleep(0.1)


async def _quietly(call: object) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
        await call  # type: ignore[misc]


async def test_sigterm_under_load_exits_within_the_grace(tmp_path: Path) -> None:
    slow = replace(answer("never in time"), delay_s=600.0)  # a model that does not answer
    with running(default=slow) as gemini:
        port = free_port()
        process = _serve(port, tmp_path / "s.db", gemini.url, tmp_path / "serve.log")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub: Stub = pb_grpc.CompactionServiceStub(channel)
                await _ready(stub)
                for i in range(SUMMARIES):
                    await stub.CreateSession(
                        pb.CreateSessionRequest(session_id=f"sum{i}", policy=SUMMARIZE)
                    )
                    events = [_event(f"sum{i}", n) for n in range(8)]
                    await stub.AppendEvents(
                        pb.AppendEventsRequest(session_id=f"sum{i}", events=events)
                    )

                async def flood(i: int) -> AsyncIterator[pb.StreamEventsRequest]:
                    n = 0
                    while True:
                        yield pb.StreamEventsRequest(
                            request_id=str(n),
                            session_id=f"flood{i}",
                            create_if_missing=True,
                            events=[_event(f"flood{i}", n)],
                        )
                        n += 1
                        if n % 50 == 0:
                            await asyncio.sleep(0)

                async def drain(call: grpc.aio.StreamStreamCall) -> None:  # type: ignore[type-arg]
                    try:
                        async for _ in call:
                            pass
                    except grpc.aio.AioRpcError:
                        pass

                calls = []
                for i in range(SUMMARIES):
                    compact = stub.Compact(pb.CompactRequest(session_id=f"sum{i}", force=True))
                    calls.append(asyncio.ensure_future(_quietly(compact)))
                give_up = time.monotonic() + 60
                while len(gemini.received) < SUMMARIES and time.monotonic() < give_up:  # noqa: ASYNC110 - another thread's list
                    await asyncio.sleep(0.05)
                calls += [
                    asyncio.ensure_future(drain(stub.StreamEvents(flood(i))))
                    for i in range(STREAMS)
                ]
                for i in range(WATCHERS):
                    watched = f"sum{i % SUMMARIES}"
                    watch = stub.WatchSession(pb.WatchSessionRequest(session_id=watched))
                    calls.append(asyncio.ensure_future(drain(watch)))  # type: ignore[arg-type]
                await asyncio.sleep(LOAD_S)
                assert process.poll() is None
                assert len(gemini.received) == SUMMARIES, "the summaries were not in flight"
                sent = time.monotonic()
                process.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(process.wait, 120)
                took = time.monotonic() - sent
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    measured("shutdown_under_load_s", took)
    FIGURES["sigterms_under_load"] += 1
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert code == 0, log[-3000:]
    assert took <= GRACE_S + MARGIN_S, f"exited {took:.1f} s after SIGTERM, grace {GRACE_S} s"
    assert "Traceback" not in log, log[-3000:]
