"""Summarizers and stores whose timing the test controls."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Literal

from sidecar.model import Event, Session
from sidecar.store.protocol import CountsLanded
from sidecar.store.sqlite import SqliteStore
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse


class GatedSummarizer:
    """Answers only when the test opens the gate; counts its calls."""

    def __init__(self, answer: str = "SUMMARY") -> None:
        self.answer = answer
        self.calls = 0
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.calls += 1
        self.started.set()
        await self.gate.wait()
        return SummaryResponse(text=self.answer)


class Pause:
    """A place a store call stops at: ``reached`` once a call is there, ``go`` lets it on."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.go = asyncio.Event()


class PausingStore(SqliteStore):
    """A SQLite store whose next call stops where the test set a ``Pause``.

    ``landing``: a landing, before its write; ``landed``: a landing, after its
    write, before its caller hears of it; ``read``: a read of the active
    window, after it read, before its caller hears of it.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._pauses: dict[str, Pause] = {}

    def pause(self, where: Literal["landing", "landed", "read"]) -> Pause:
        self._pauses[where] = pause = Pause()
        return pause

    async def _stop(self, where: str) -> None:
        pause = self._pauses.pop(where, None)
        if pause is not None:
            pause.reached.set()
            await pause.go.wait()

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        await self._stop("landing")
        landed = await super().land_counts(session_id, exact, incarnation=incarnation)
        await self._stop("landed")
        return landed

    async def active_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        read = await super().active_window(session_id)
        await self._stop("read")
        return read
