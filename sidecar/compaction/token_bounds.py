"""Bounds on an event's tokens in O(bytes), and the trigger decisions they settle.

Issue 37: counting every append exactly costs the tokenizer (26 MiB once
built, ``sidecar.tokenizer``) and its time on the hot path, yet most trigger
checks are nowhere near their threshold. A byte-level BPE (every tiktoken
encoding) splits the UTF-8 bytes of a text into tokens of at least one and at
most ``longest_token_bytes`` bytes each, so the exact count of an event's
accounting text (``formatting.format_event``) lies between its bytes over the
longest token and its bytes; its redacted reasoning (``tokens.opaque_tokens``)
is counted from bytes alone, exactly, and is added to both ends. Reading the
bytes costs O(bytes) and builds nothing.

A trigger is monotone in the window's tokens: ``token_count`` and
``context_fraction`` compare with ``>=``, the other triggers ignore tokens,
and ``any_of`` / ``all_of`` of monotone triggers are monotone; a policy
resolved against a calibration (``calibration.resolved``) only moves the
thresholds. So when a trigger answers the same at the low and the high end
of the window's tokens it answers that for every count in between, the exact
one included: the check needs no exact count. Only when the two ends straddle
a threshold must the pending events be counted exactly before deciding.

An event appended without an exact count carries its bounds
(``Event.token_bounds``) and an estimate between them (``estimate``); the
session's counters carry the sum of how far those can be off
(``SessionCounters.ends``), so a check reads both ends in O(1).

The bounds settle triggers only. A plan answers token counts
(``tokens_estimated_saved``, the kept window's counters) and compares them
with its limits (``token_budget``'s cut, ``min_saved_tokens``, clearing's
``min_cleared_tokens``, a summary's cost check), so a strategy plans on exact
counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.formatting import format_event
from sidecar.compaction.tokens import opaque_tokens
from sidecar.compaction.triggers import Trigger
from sidecar.model import Event, SessionCounters
from sidecar.tokenizer import DEFAULT_ENCODING, LONGEST_TOKEN_BYTES

CL100K_LONGEST_TOKEN_BYTES = LONGEST_TOKEN_BYTES[DEFAULT_ENCODING]
"""The longest token of ``cl100k_base``, in bytes (a run of spaces; checked by the tests)."""

DEFAULT_BYTES_PER_TOKEN = 4.0
"""What an estimate assumes before any exact count says otherwise: English prose in cl100k
runs at about 4 bytes a token, code and JSON at about 3."""


@dataclass(frozen=True, slots=True)
class TokenBounds:
    """The least and the most tokens an exact count can give."""

    low: int
    high: int


def event_token_bounds(
    event: Event, longest_token_bytes: int = CL100K_LONGEST_TOKEN_BYTES
) -> TokenBounds:
    """Bounds on ``count_event(event)`` for a byte-level BPE whose tokens are at most
    ``longest_token_bytes`` long: each token is one to that many bytes of the text."""
    return _bounds(len(format_event(event).encode()), opaque_tokens(event), longest_token_bytes)


def _bounds(size: int, opaque: int, longest_token_bytes: int) -> TokenBounds:
    return TokenBounds(low=-(-size // longest_token_bytes) + opaque, high=size + opaque)


def estimate(
    event: Event,
    bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN,
    longest_token_bytes: int = CL100K_LONGEST_TOKEN_BYTES,
) -> tuple[int, int, int]:
    """An estimate of ``count_event(event)`` and its bounds, as ``(estimate, low, high)``:
    the accounting text's bytes over ``bytes_per_token`` (plus its redacted reasoning), kept
    within the bounds. O(bytes): no tokenizer."""
    size = len(format_event(event).encode())
    opaque = opaque_tokens(event)
    bounds = _bounds(size, opaque, longest_token_bytes)
    guess = round(size / bytes_per_token) + opaque
    return min(bounds.high, max(bounds.low, guess)), bounds.low, bounds.high


def counters_between(
    counters: SessionCounters,
    pending: Sequence[Event],
    longest_token_bytes: int = CL100K_LONGEST_TOKEN_BYTES,
) -> tuple[SessionCounters, SessionCounters]:
    """The counters once ``pending`` (not counted yet) is appended, at the low and the high
    end of its events' bounds; every field but the tokens is exact at both ends.

    ``counters`` are exact; a pending system message that replaces the latest
    one takes its own bounds' place at each end, so both ends stay bounds.
    """
    low = high = counters
    for event in pending:
        bounds = event_token_bounds(event, longest_token_bytes)
        low = low.after_append(event.evolve(token_count=bounds.low))
        high = high.after_append(event.evolve(token_count=bounds.high))
    return low, high


def settled_fires(trigger: Trigger, low: SessionCounters, high: SessionCounters) -> bool | None:
    """What ``trigger`` decides for every token count from ``low``'s to ``high``'s, or None
    when the two ends decide differently and only an exact count can say.

    ``low`` and ``high`` differ in their tokens only (``counters_between``).
    """
    fires = trigger.fires(low)
    return fires if trigger.fires(high) == fires else None
