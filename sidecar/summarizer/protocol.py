"""The Summarizer protocol: one async call from formatted history to summary text.

A request may name must-keep identifiers; the summary is to end with their
trail line (``trail_line``), whose label and separator are defined here, once,
for the summarizers that write it and for the compaction code that reads it
back (``sidecar.compaction.identifiers.trail_of``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

TRAIL_LABEL = "Identifiers:"
"""The label of a summary's trail line."""
TRAIL_SEPARATOR = ", "


def trail_line(identifiers: Sequence[str]) -> str:
    """The trail line for ``identifiers`` ("" for none)."""
    return f"{TRAIL_LABEL} {TRAIL_SEPARATOR.join(identifiers)}" if identifiers else ""


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
    """Must-keep: the identifiers the summary is to end with (``trail_line``:
    ``Identifiers: a, b``), verbatim, as far as it does not state them already."""


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
