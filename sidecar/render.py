"""Readable terminal rendering of events: kept, archived, cleared and summary events told apart."""

from __future__ import annotations

from collections.abc import Iterable

from sidecar.compaction.formatting import format_event
from sidecar.model import Event

WIDTH = 100


def event_line(event: Event, width: int = WIDTH) -> str:
    """One line per event: a marker, the role-labelled text, and its token count (``~``
    before an estimate whose exact count has not landed)."""
    if event.synthetic:
        # a summary turn written by the service; lower case once a newer one replaced it
        marker = "s" if event.archived else "S"
    elif event.archived:
        marker = "-"  # archived: out of the prompt, still in the log
    elif event.cleared:
        marker = "c"  # kept, but the model sees its tool results as a placeholder
    else:
        marker = " "
    text = " ".join(format_event(event).split())
    room = width - 20
    if len(text) > room:
        text = text[: room - 1] + "…"
    count = f"~{event.token_count}" if event.token_count_estimated else str(event.token_count)
    return f"{marker} {event.position or '':>5} {text:<{room}} {count:>5} tok"


def event_lines(events: Iterable[Event], width: int = WIDTH) -> list[str]:
    return [event_line(e, width) for e in events]


LEGEND = (
    "legend: ' ' kept   '-' archived   'S' summary turn written by the sidecar"
    "   's' an earlier summary turn, archived"
    "\n        'c' kept, tool results cleared: the model sees a placeholder, the log the original"
    "\n        '~N tok' an estimate: the server counts exactly where a decision needs it"
)
