"""The Summarizer protocol: one async call from formatted history to summary text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What the summarizer is asked: an instruction and the history as data."""

    system_prompt: str
    history: str
    model: str = ""
    max_output_tokens: int = 1024
    # None: the summarizer's own setting (low temperature, thinking off).
    temperature: float | None = None
    thinking_budget: int | None = None
    identifiers: tuple[str, ...] = ()
    """Must-keep: the identifiers the summary is to end with (``Identifiers: a, b``),
    verbatim, as far as it does not state them already."""


@dataclass(frozen=True, slots=True)
class SummaryResponse:
    """The summarizer's answer; a blank ``text`` means "no summary" and skips the pass."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = ""


class Summarizer(Protocol):
    """Produces a summary. Raising leaves the session exactly as it was."""

    async def summarize(self, request: SummaryRequest) -> SummaryResponse: ...
