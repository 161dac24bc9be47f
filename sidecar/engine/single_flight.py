"""Single-flight compaction passes: at most one in flight per session.

A summarizing pass keeps the session's lock free during its LLM call, so
appends go on meanwhile and the trigger may fire again on each of them.
Starting a pass for each would make every one but the first superseded. So
the session's running pass is registered here while its task runs, and a
background pass starts only when none is in flight and the engine is not
closing. A background pass never raises: its failure is logged, counted and
published to the session's watchers, and the session is left unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sidecar.engine.host import EngineHost
from sidecar.engine.results import CAUSE, skipped
from sidecar.model import Cause, CompactionResult, SkipReason

# The engine's logger: log pipelines filter on its name (see sidecar.server.logs).
log = logging.getLogger("sidecar.engine.engine")


class SingleFlight:
    """The in-flight pass of each session; an entry lives while its task runs."""

    def __init__(self, host: EngineHost) -> None:
        self._host = host
        self._in_flight: dict[str, asyncio.Task[CompactionResult]] = {}
        self.closing = False

    def __len__(self) -> int:
        return len(self._in_flight)

    def busy(self, session_id: str) -> bool:
        """No new pass may start: one is in flight for the session, or the engine is closing."""
        return self.closing or session_id in self._in_flight

    def running(self, session_id: str) -> asyncio.Task[CompactionResult] | None:
        """The session's in-flight pass, if there is one."""
        return self._in_flight.get(session_id)

    def schedule(
        self,
        session_id: str,
        work: Callable[[], Coroutine[Any, Any, CompactionResult]],
        strategy: str,
    ) -> bool:
        """Start ``work`` in the background unless a pass is in flight (single-flight)."""
        if self.busy(session_id):
            return False
        self.start(session_id, self.in_background(session_id, work(), strategy))
        return True

    def start(
        self, session_id: str, work: Coroutine[Any, Any, CompactionResult]
    ) -> asyncio.Task[CompactionResult]:
        """Run ``work`` as the session's in-flight pass."""
        task = asyncio.create_task(work)
        self._in_flight[session_id] = task
        task.add_done_callback(lambda _: self._in_flight.pop(session_id, None))
        return task

    async def in_background(
        self, session_id: str, work: Coroutine[Any, Any, CompactionResult], strategy: str
    ) -> CompactionResult:
        """A background pass: its result is published, and a failure logged and counted,
        never raised.

        The append that started it answered ``compaction_scheduled``, which
        promises a result on the session's watchers and streams: a pass that
        changed nothing (another compaction landed first, nothing to
        summarize) is published as such. A landed one was published as it landed.
        """
        CAUSE.set(Cause.BACKGROUND)  # this task's own context: the caller's is untouched
        try:
            result = await work
        except Exception as exc:  # the pass failed; the session is unchanged
            log.warning(
                "background compaction of %s failed: %s",
                session_id,
                exc,
                extra={"session_id": session_id, "strategy": strategy},
            )
            result = skipped(strategy, SkipReason.FAILED, 0, error=str(exc))
            self._host.observer.compaction(result)
            self._host.watchers.publish(session_id, result)
            return result
        if not result.compacted:
            self._host.watchers.publish(session_id, result)
        return result

    async def wait_idle(self) -> None:
        """Wait until no pass is in flight."""
        while self._in_flight:
            await asyncio.wait(list(self._in_flight.values()))

    async def close(self, grace_s: float) -> None:
        """Start no more passes; let those in flight finish within ``grace_s``, cancel the rest."""
        self.closing = True
        tasks = list(self._in_flight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
