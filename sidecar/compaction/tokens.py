"""An event's tokens: its text as formatted for accounting, plus its redacted reasoning.

The text is counted by a ``sidecar.tokenizer`` estimator (the default unless
one is given); what an event sends back that is not text is counted here.
"""

from __future__ import annotations

from sidecar.compaction.formatting import format_event
from sidecar.model import Event
from sidecar.tokenizer import TokenEstimator, default_estimator

REDACTED_BYTES_PER_TOKEN = 4


def opaque_tokens(event: Event) -> int:
    """Tokens of what an event sends back that is not text: its redacted reasoning.

    Signatures are opaque tokens the provider checks, not prompt text, and
    count nothing; a redacted block's data is the reasoning itself,
    encrypted, and is counted at one token per 4 bytes (the provider bills
    the reasoning it decrypts; the session's calibration corrects the rest).
    """
    if not event.reasoning:
        return 0
    return sum(len(r.signature) // REDACTED_BYTES_PER_TOKEN for r in event.reasoning if r.redacted)


def count_event(event: Event, estimator: TokenEstimator | None = None) -> int:
    """Tokens of ``event`` as formatted for accounting, plus its redacted reasoning."""
    return (estimator or default_estimator()).count(format_event(event)) + opaque_tokens(event)
