"""Prompt-cache rules and prices: what a session's model calls are billed, in input tokens.

Pure functions over the calls a replay recorded. A call's prompt is the
fixed overhead (system prompt and tool schemas) and then the window. The
provider serves from its cache the prefix the call shares with the previous
call — compared event by event on id, cleared flag and token count, so a
compaction, a clearing or a summary invalidates everything from its first
change on — when the previous call is within the cache's TTL and the shared
prefix reaches the provider's minimum. With a write premium (Anthropic,
``cache_control`` on the last message) every uncached token of a prompt past
the minimum is written to the cache at that premium.

Billed input tokens = uncached + cached * read + written * write, plus the
summarizer's calls: their input at the full price and their output at the
output price (as a multiple of the input price), since a summary is paid
like any other model call. All in units of one uncached input token, so
sessions compare across providers by their multipliers alone. Output
tokens of the agent's own calls are the same under every policy and left
out, except those of the calls a policy adds: a ``recall`` tool call the
agent makes for a fact no longer in its context (``Call.output``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Key = tuple[str, bool, int]
"""An event of a window as the cache sees it: id, cleared flag, token count."""


@dataclass(frozen=True, slots=True)
class PriceModel:
    """A provider's cache rules, as multiples of its uncached input price.

    ``read``: a cached token; ``write``: a token written to the cache (1: no
    premium, the token is billed as uncached); ``output``: an output token
    (the summarizer's); ``min_prefix``: the shortest prefix the cache serves;
    ``increment``: hits come in multiples of this past the minimum;
    ``ttl_s``: how long an unused prefix stays cached.
    """

    name: str
    read: float
    write: float
    output: float
    min_prefix: int = 1024
    increment: int = 1
    ttl_s: float = 300.0


# Anthropic prompt caching (docs.anthropic.com, "Prompt caching", pricing table):
# 5-minute cache writes 1.25 x base input, reads 0.1 x; minimum 1,024 tokens
# (Sonnet, Opus); TTL 5 minutes, refreshed on each hit. Output: Sonnet 4.5,
# $15 vs $3 per million.
ANTHROPIC = PriceModel("anthropic", read=0.1, write=1.25, output=5.0)
# Gemini implicit caching (ai.google.dev/gemini-api/docs/caching): automatic,
# no write charge, from 1,024 tokens on 2.5 Flash. Its launch (May 2025) passed
# on a 75 % discount, which is the 0.25 x here; Vertex AI's context-cache
# overview now states 90 % (0.1 x, the Anthropic figure without the write
# premium) -- pass ``read=0.1`` to price that. The TTL is not published
# (best effort); 5 minutes is assumed. Output: 2.5 Flash, $2.50 vs $0.30.
GEMINI = PriceModel("gemini", read=0.25, write=1.0, output=2.5 / 0.3)
# OpenAI prompt caching (platform.openai.com/docs/guides/prompt-caching):
# automatic from 1,024 tokens, hits in 128-token increments, no write charge;
# cached input 0.5 x on gpt-4o ($1.25 vs $2.50; the gpt-5 family lists 0.1 x);
# cleared after 5-10 minutes idle. Output: gpt-4o, $10 vs $2.50.
OPENAI = PriceModel("openai", read=0.5, write=1.0, output=4.0, increment=128)
PRICE_MODELS = (ANTHROPIC, GEMINI, OPENAI)


@dataclass(frozen=True, slots=True)
class Call:
    """One model call of a replay: when it was made and the window it was sent.

    ``summary_input`` / ``summary_output``: the summarizer tokens of the
    passes that landed since the previous call (paid for this call's window).
    ``output``: output tokens this call adds that other policies' calls do
    not make (the ``recall`` tool call a call answering its result follows).
    """

    at_s: float
    window: tuple[Key, ...]
    summary_input: int = 0
    summary_output: int = 0
    output: int = 0

    @property
    def window_tokens(self) -> int:
        return sum(k[2] for k in self.window)


@dataclass(frozen=True, slots=True)
class Bill:
    """One call's prompt split by how it is billed, and the total in input tokens."""

    prompt: int
    cached: int
    written: int
    uncached: int
    summarizer: float
    billed: float


def shared_prefix_tokens(previous: Sequence[Key], current: Sequence[Key]) -> int:
    """Tokens of the leading events ``current`` shares with ``previous``."""
    tokens = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        tokens += a[2]
    return tokens


def bill(calls: Sequence[Call], prices: PriceModel, overhead: int) -> list[Bill]:
    """Each call's bill under ``prices``, the cache judged against the call before it."""
    bills: list[Bill] = []
    previous: Call | None = None
    for call in calls:
        prompt = overhead + call.window_tokens
        cached = 0
        if previous is not None and call.at_s - previous.at_s <= prices.ttl_s:
            prefix = overhead + shared_prefix_tokens(previous.window, call.window)
            if prefix >= prices.min_prefix:
                past = (prefix - prices.min_prefix) // prices.increment * prices.increment
                cached = prices.min_prefix + past
        rest = prompt - cached
        written = rest if prices.write != 1.0 and prompt >= prices.min_prefix else 0
        uncached = rest - written
        summarizer = call.summary_input + call.summary_output * prices.output
        billed = (
            uncached
            + cached * prices.read
            + written * prices.write
            + summarizer
            + call.output * prices.output
        )
        bills.append(Bill(prompt, cached, written, uncached, summarizer, billed))
        previous = call
    return bills
