"""An event's tokens: its text as formatted for accounting, plus what it sends that is not.

The text is counted by a ``sidecar.tokenizer`` estimator (the default unless
one is given); what an event sends back that is not text — its redacted
reasoning, and what a stand-in left out — is counted here.
"""

from __future__ import annotations

from sidecar.compaction.formatting import format_event
from sidecar.model import Event
from sidecar.tokenizer import TokenEstimator, default_estimator

REDACTED_BYTES_PER_TOKEN = 4

STAND_IN_KEY = "sidecar.stand_in"
"""Metadata of an event stored as its stand-in: the bytes the event itself held.

An event too large to store (past ``--max-event-bytes``) that its framework
keeps and sends whole is stored cut, with this key (``adapters.usage.stand_in``).
"""
MAX_STAND_IN_BYTES = 64 << 20
"""What a stand-in's key is read as at most: past any model's window already."""


def opaque_tokens(event: Event) -> int:
    """Tokens of what an event sends that its stored text does not hold.

    Signatures are opaque tokens the provider checks, not prompt text, and
    count nothing; a redacted block's data is the reasoning itself,
    encrypted, and is counted at one token per 4 bytes (the provider bills
    the reasoning it decrypts; the session's calibration corrects the rest).
    A stand-in (``STAND_IN_KEY``) that is not cleared counts what it left
    out at the same rate: the model is sent the whole event while it is in
    the window, so a trigger must weigh it whole. Cleared, it is sent as its
    placeholder, and counts as that.
    """
    tokens = 0
    if event.reasoning:
        tokens = sum(
            len(r.signature) // REDACTED_BYTES_PER_TOKEN for r in event.reasoning if r.redacted
        )
    if event.metadata and not event.cleared:
        held = stand_in_bytes(event.metadata.get(STAND_IN_KEY, ""))
        if held:
            tokens += max(0, held - event.content_bytes()) // REDACTED_BYTES_PER_TOKEN
    return tokens


def stand_in_bytes(value: str) -> int:
    """The bytes a stand-in's key says its event held (0: not a number of bytes), capped."""
    if not value.isascii() or not value.isdigit():
        return 0
    digits = value.lstrip("0")
    return MAX_STAND_IN_BYTES if len(digits) > 9 else min(int(digits or 0), MAX_STAND_IN_BYTES)


def count_event(event: Event, estimator: TokenEstimator | None = None) -> int:
    """Tokens of ``event`` as formatted for accounting, plus its redacted reasoning."""
    return (estimator or default_estimator()).count(format_event(event)) + opaque_tokens(event)
