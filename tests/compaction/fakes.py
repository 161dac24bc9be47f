"""A scripted summarizer for tests: records what it was asked, answers what it is told."""

from __future__ import annotations

from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse


class FakeSummarizer:
    def __init__(self, answer: str = "SUMMARY", *, error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return SummaryResponse(text=self.answer, input_tokens=100, output_tokens=7)
