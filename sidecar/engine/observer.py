"""What the engine reports as it works, for metrics: a protocol and a silent default.

The engine calls these synchronously on its hot paths, so implementations
must be cheap and must not raise.
"""

from __future__ import annotations

from typing import Protocol

from sidecar.model import CompactionResult


class EngineObserver(Protocol):
    def appended(self, events: int) -> None:
        """``events`` new events were stored (retries of stored ones are not counted)."""

    def counts_landed(self, events: int) -> None:
        """``events`` stored with estimated token counts had their exact counts landed."""

    def compaction(self, result: CompactionResult) -> None:
        """A compaction pass ended: compacted, or skipped with its reason (FAILED included)."""

    def summarized(self, seconds: float, input_tokens: int, output_tokens: int) -> None:
        """The summarizer answered after ``seconds``, with its token usage."""

    def summarizer_failed(self, kind: str) -> None:
        """The summarizer call failed; ``kind`` names how (timeout, unavailable, error)."""


class NoObserver:
    """Observes nothing."""

    def appended(self, events: int) -> None:
        pass

    def counts_landed(self, events: int) -> None:
        pass

    def compaction(self, result: CompactionResult) -> None:
        pass

    def summarized(self, seconds: float, input_tokens: int, output_tokens: int) -> None:
        pass

    def summarizer_failed(self, kind: str) -> None:
        pass
