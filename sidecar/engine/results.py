"""What the engine's calls hand back: an append's result, and a skipped pass's.

They sit below the engine and its runners (``step_runner``,
``pipeline_runner``, ``single_flight``) so that each can build them without
importing the engine.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from sidecar.model import Cause, CompactionResult, Event, Session, SkipReason

CAUSE: contextvars.ContextVar[Cause] = contextvars.ContextVar("cause", default=Cause.UNKNOWN)
"""What set off the pass running in this context, recorded with every plan it lands.

Set where a pass starts (an append's trigger, a Compact, a background task)
rather than passed down through every runner: a background task copies the
context it was started in and then sets its own.
"""


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append stored, and what it set off."""

    events: tuple[Event, ...]
    session: Session
    compaction: CompactionResult | None = None
    compaction_scheduled: bool = False
    written: int = 0
    """How many of ``events`` this append stored (the others were retries)."""
    usage_ignored_reason: str = ""
    """Why the append's usage report was not taken into the calibration, when it was not."""


def skipped(
    strategy: str,
    reason: SkipReason | None,
    version: int,
    *,
    error: str = "",
    dropped: tuple[int, tuple[str, ...]] = (0, ()),
) -> CompactionResult:
    """The result of a pass that changed nothing, with why (``would_drop_identifiers``:
    with the loss report, ``dropped``, that refused it)."""
    return CompactionResult(
        compacted=False,
        strategy=strategy,
        skipped_reason=reason,
        version=version,
        error=error,
        identifiers_dropped=dropped[0],
        dropped_identifiers=dropped[1],
    )
