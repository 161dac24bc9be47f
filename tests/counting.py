"""The window's exact tokens, from a read that may carry estimates (issue 37).

A server counting where it decides answers estimated counts until their
exact counts land, and holds a usage report against the exact count. A fake
provider that reports a multiple of "our count" must report a multiple of
the exact one: an estimated event is counted here as the server would count
it (a system message, the one event whose count depends on the others, is
never estimated).
"""

from __future__ import annotations

from sidecar.client.results import SessionContext
from sidecar.compaction.tokens import count_event


def exact_tokens(context: SessionContext) -> int:
    """``context.token_count`` with each estimated event's exact count in place of its estimate."""
    return context.token_count + sum(
        count_event(e) - e.token_count for e in context.events if e.token_count_estimated
    )
