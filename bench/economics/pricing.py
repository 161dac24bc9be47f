"""Named, dated price models and their cache rules: what a session's model calls are billed.

Pure functions over the calls a replay recorded. A call's prompt is the
pinned overhead (tool list and system prompt, always first) and then the
window, event by event. Two kinds of cache:

- **Automatic prefix caching** (OpenAI, Gemini implicit caching): a call
  reads from the cache the longest prefix it shares with any earlier call
  still within the TTL, when that prefix reaches the model's minimum
  (OpenAI: in 128-token steps past it). A write premium (gpt-5.6) is paid
  on every uncached token of a prompt long enough to be cached.
- **Breakpoints** (Anthropic, ``cache_control``): the agent marks the end of
  the system prompt and the last block (2 of the 4 breakpoints allowed).
  An entry exists only where an earlier call put a breakpoint and its prefix
  reached the minimum; a call reads the longest entry ending at one of the
  20 blocks before its last breakpoint, or else the system prompt's entry,
  and writes the rest up to its breakpoint at the write premium. One event
  is taken as one block. A hit refreshes the entry's TTL.

Events compare on (id, cleared flag, token count), so a compaction, a
clearing or a summary changes the prefix from its first change on.

Billed = uncached + cached * read + written * write, plus the summarizer's
calls (input at 1, output at ``output``), all in units of one uncached
input token of the agent's model. ``summarizer_usd`` prices the summarizer
calls at another (cheaper) model instead, for the column the peers' docs
imply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Key = tuple[str, bool, int]
"""An event of a window as the cache sees it: id, cleared flag, token count."""

LOOKBACK_BLOCKS = 20
"""Anthropic: a breakpoint finds an earlier entry at most this many blocks before it."""


@dataclass(frozen=True, slots=True)
class PriceModel:
    """One model's prices and cache rules, as read on ``checked`` from ``source``.

    ``read``, ``write``, ``output``: multiples of the uncached input price
    (``write`` 1: no premium); ``min_prefix``: the shortest prefix cached;
    ``increment``: hits come in multiples of this past the minimum;
    ``ttl_s``: how long an unused entry lives; ``breakpoints``: Anthropic's
    rules (else automatic prefix caching); ``input_usd`` / ``output_usd``: list
    prices per million tokens, for pricing a summarizer on another model.
    """

    name: str
    read: float
    write: float
    output: float
    min_prefix: int
    input_usd: float
    output_usd: float
    checked: str
    source: str
    increment: int = 1
    ttl_s: float = 300.0
    breakpoints: bool = False


_ANTHROPIC_DOCS = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
_ANTHROPIC_PRICES = "https://www.anthropic.com/pricing"
# 5-minute writes 1.25 x, reads 0.1 x, TTL 5 minutes refreshed on each hit, up to 4
# breakpoints, 20-block lookback; minimum 1,024 tokens on Sonnet 4.5, 4,096 on Opus 4.5
# and Haiku 4.5. Sonnet 4.5 $3 / $15, Opus 4.5 $5 / $25 per million.
SONNET_45 = PriceModel(
    "claude-sonnet-4.5", 0.1, 1.25, 5.0, 1024, 3.0, 15.0, "2026-12-02",
    f"{_ANTHROPIC_DOCS} ; {_ANTHROPIC_PRICES}", breakpoints=True,
)  # fmt: skip
OPUS_45 = PriceModel(
    "claude-opus-4.5", 0.1, 1.25, 5.0, 4096, 5.0, 25.0, "2026-12-02",
    f"{_ANTHROPIC_DOCS} ; {_ANTHROPIC_PRICES}", breakpoints=True,
)  # fmt: skip
_OPENAI_DOCS = "https://developers.openai.com/api/docs/guides/prompt-caching"
_OPENAI_PRICES = "https://developers.openai.com/api/docs/pricing"
# Automatic from 1,024 tokens, hits in 128-token steps, no write charge, in-memory
# retention 5-10 minutes idle. gpt-4o: cached 0.5 x ($1.25 vs $2.50), output $10.
GPT_4O = PriceModel(
    "gpt-4o", 0.5, 1.0, 4.0, 1024, 2.5, 10.0, "2026-12-02",
    f"{_OPENAI_DOCS} ; {_OPENAI_PRICES}", increment=128,
)  # fmt: skip
# The gpt-5 family before 5.6: cached 0.1 x, no write charge (gpt-5.1: $1.25 / $0.125, $10 out).
GPT_51 = PriceModel(
    "gpt-5.1", 0.1, 1.0, 8.0, 1024, 1.25, 10.0, "2026-12-02",
    f"{_OPENAI_DOCS} ; {_OPENAI_PRICES}", increment=128,
)  # fmt: skip
# gpt-5.6 (June 2026): cache writes 1.25 x, reads 0.1 x, a 30-minute minimum cache life.
# Output taken at the gpt-5 family's 8 x (not checked against a 5.6 price sheet).
GPT_56 = PriceModel(
    "gpt-5.6", 0.1, 1.25, 8.0, 1024, 5.0, 40.0, "2026-12-02",
    f"{_OPENAI_DOCS} ; {_OPENAI_PRICES} ; "
    "https://github.com/coder/mux/issues/3705 (cache_write_tokens observed 2026-07-09)",
    increment=128, ttl_s=1800.0,
)  # fmt: skip
_GEMINI_DOCS = "https://ai.google.dev/gemini-api/docs/caching"
_GEMINI_VERTEX = (
    "https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/"
    "context-cache-overview"
)
_GEMINI_PRICES = "https://ai.google.dev/gemini-api/docs/pricing"
# Implicit caching: automatic, no write charge, 90 % off cached tokens; minimum 2,048 tokens
# on 2.5 Flash and 4,096 on the 3.5 Flash models (the caching page, updated 2026-07-07). TTL
# not published: 5 minutes assumed. 2.5 Flash $0.30 / $2.50; 3.5 Flash $1.50 / $9.
GEMINI_25_FLASH = PriceModel(
    "gemini-2.5-flash", 0.1, 1.0, 2.5 / 0.3, 2048, 0.30, 2.50, "2026-12-02",
    f"{_GEMINI_DOCS} ; {_GEMINI_VERTEX} ; {_GEMINI_PRICES}",
)  # fmt: skip
GEMINI_35_FLASH = PriceModel(
    "gemini-3.5-flash", 0.1, 1.0, 6.0, 4096, 1.50, 9.0, "2026-12-02",
    f"{_GEMINI_DOCS} ; {_GEMINI_PRICES}",
)  # fmt: skip
PRICE_MODELS = (SONNET_45, OPUS_45, GPT_4O, GPT_51, GPT_56, GEMINI_25_FLASH, GEMINI_35_FLASH)
QUICK_PRICE_MODELS = (SONNET_45, GPT_56, GEMINI_35_FLASH)
"""--quick: one model of each provider."""

# The cheap models the peers' docs summarize with: ADK's examples use a Gemini Flash
# (ours too: the sidecar's summarizer is Gemini's), LangChain's gpt-4o-mini.
GPT_4O_MINI_USD = (0.15, 0.60)
GEMINI_FLASH_USD = (GEMINI_25_FLASH.input_usd, GEMINI_25_FLASH.output_usd)


@dataclass(frozen=True, slots=True)
class Call:
    """One model call of a replay: when it was made and the window it was sent.

    ``summary_input`` / ``summary_output``: the summarizer tokens of the
    passes that landed since the previous call (paid for this call's window).
    ``output``: output tokens this call adds that other policies' calls do not.
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


def _automatic(calls: Sequence[Call], prices: PriceModel, overhead: int) -> list[int]:
    """Each call's cached tokens under automatic prefix caching."""
    cached: list[int] = []
    live: list[Call] = []  # earlier calls whose prefix is still cached
    for call in calls:
        live = [c for c in live if call.at_s - c.at_s <= prices.ttl_s]
        best = max((shared_prefix_tokens(c.window, call.window) for c in live), default=-1)
        hit = 0
        if best >= 0 and overhead + best >= prices.min_prefix:
            past = (overhead + best - prices.min_prefix) // prices.increment * prices.increment
            hit = prices.min_prefix + past
        cached.append(hit)
        live = [*live[-7:], call]  # the newest few: a prefix is shared with the latest most
    return cached


def _breakpoints(calls: Sequence[Call], prices: PriceModel, overhead: int) -> list[int]:
    """Each call's cached tokens under Anthropic's breakpoints and 20-block lookback."""
    entries: dict[tuple[Key, ...], float] = {}  # a cached prefix -> when last used
    cached: list[int] = []
    for call in calls:
        entries = {k: t for k, t in entries.items() if call.at_s - t <= prices.ttl_s}
        window, hit, used = call.window, 0, None
        for end in range(len(window), max(0, len(window) - LOOKBACK_BLOCKS) - 1, -1):
            if window[:end] in entries:
                used = window[:end]
                hit = overhead + sum(k[2] for k in used)
                break
        if used is None and () in entries:
            used, hit = (), overhead
        if used is not None:
            entries[used] = call.at_s
        cached.append(hit)
        if overhead >= prices.min_prefix:
            entries.setdefault((), call.at_s)
        if overhead + call.window_tokens >= prices.min_prefix:
            entries[window] = call.at_s
    return cached


def bill(
    calls: Sequence[Call],
    prices: PriceModel,
    overhead: int,
    summarizer_usd: tuple[float, float] | None = None,
) -> list[Bill]:
    """Each call's bill under ``prices``; the summarizer at ``summarizer_usd`` if given."""
    rule = _breakpoints if prices.breakpoints else _automatic
    hits = rule(calls, prices, overhead)
    if summarizer_usd is None:
        rate_in, rate_out = 1.0, prices.output
    else:
        rate_in = summarizer_usd[0] / prices.input_usd
        rate_out = summarizer_usd[1] / prices.input_usd
    bills = []
    for call, cached in zip(calls, hits, strict=True):
        prompt = overhead + call.window_tokens
        rest = prompt - cached
        written = rest if prices.write != 1.0 and prompt >= prices.min_prefix else 0
        uncached = rest - written
        summarizer = call.summary_input * rate_in + call.summary_output * rate_out
        billed = (
            uncached
            + cached * prices.read
            + written * prices.write
            + summarizer
            + call.output * prices.output
        )
        bills.append(Bill(prompt, cached, written, uncached, summarizer, billed))
    return bills
