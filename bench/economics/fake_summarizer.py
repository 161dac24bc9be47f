"""The benchmark's summarizer for our policies: the extractive rule at the calibrated length.

The server under test is started with ``CalibratedSummarizer`` in place of
its plain extractive one (``bench.economics.measure``), so our summaries
follow the same length rule as the peers' fakes (``summary_size``): the
prose is cut or padded to the conversation's tokens over the ratio, within
the policy's own budget; a trail the request asks for follows it whole. Its
usage is billed as the extractive summarizer's: the instruction (with the
must-keep list) and the history in, the summary out.
"""

from __future__ import annotations

from dataclasses import replace

from bench.economics.summary_size import RATIO, fit, target_size
from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse, trail_line
from sidecar.tokenizer import default_estimator, truncate_to_tokens


def sized(text: str, input_tokens: int, cap: int, ratio: float = RATIO) -> str:
    """``text`` at the calibrated length for ``input_tokens`` read, at most ``cap`` tokens."""
    estimator = default_estimator()
    return fit(
        text,
        target_size(input_tokens, cap, ratio),
        estimator.count,
        lambda t, n: truncate_to_tokens(t, n, estimator),
    )


class CalibratedSummarizer:
    """``ExtractiveSummarizer`` whose prose is sized by ``summary_size`` (``ratio``)."""

    def __init__(self, ratio: float = RATIO) -> None:
        self.ratio = ratio
        self._extractive = ExtractiveSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        estimator = default_estimator()
        answer = await self._extractive.summarize(request)
        if not answer.text.strip():
            return answer
        trail = trail_line(request.identifiers)
        prose = answer.text.removesuffix(f"\n{trail}") if trail else answer.text
        prose = sized(
            prose, estimator.count(request.history), request.max_output_tokens, self.ratio
        )
        text = f"{prose}\n{trail}" if trail else prose
        return replace(answer, text=text, output_tokens=estimator.count(text))
