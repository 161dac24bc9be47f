"""Summarizers whose timing the test controls."""

from __future__ import annotations

import asyncio

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
