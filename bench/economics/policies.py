"""The policies a transcript is replayed under: none, ours, and the peers' defaults.

Ours follow the README's guidance (Performance: Context economics): a
high-water trigger at ``HIGH`` of the model's window and a deep pass down
to ``LOW`` of it, so passes are rare and each one frees a lot; the
``+min_saved`` variants also refuse a pass that would free less than
``MIN_SAVED`` of the window (``Strategy.min_saved_tokens``). One more,
``recall_first``, keeps about the newest turn (a trigger at ``RECALL_HIGH``,
a budget of ``RECALL_LOW``) and leaves everything older to the ``recall``
tool, as a Letta-style agent pages its archive in: the replay bills each of
its searches.

The peers are emulated through our server with their documented defaults:

- ADK ``EventsCompactionConfig(compaction_interval=3, overlap_size=1)`` and
  its token mode as ADK's docs configure it (``token_threshold=4000,
  event_retention_size=5``), both by ``adk_mapping.adk_policy``;
- LangChain ``SummarizationMiddleware`` as its docs configure it
  (``trigger=("tokens", 4000)``, ``keep=("messages", 20)``, summarizer input
  trimmed to ``trim_tokens_to_summarize=4000``), summarizing whenever it
  fires;
- Anthropic's ``clear_tool_uses_20250919`` defaults: trigger at 100,000
  input tokens of a 200,000-token window (scaled here to the transcript's
  window), keep the last 3 tool uses, no ``clear_at_least``.

Every summarizing policy caps its summary at the same ``SUMMARY_TOKENS``:
the benchmark prices contexts; it does not judge summary quality.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.adapters.adk_mapping import adk_policy
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy, Strategy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount

HIGH = 0.15
"""Our trigger: this fraction of the model's input window."""
LOW = 0.03
"""Our passes keep about this fraction of the window."""
MIN_SAVED = 0.05
"""The ``+min_saved`` variants: a pass must free at least this fraction of the window."""
RECALL_HIGH = 0.02
"""``recall_first``'s trigger: this fraction of the window."""
RECALL_LOW = 0.005
"""``recall_first``'s budget: about the newest turn (token_budget always keeps that whole)."""
SUMMARY_TOKENS = 1024
"""``max_summary_tokens`` of every summarizing policy (the server's default)."""
KEEP_TOOL_USES = 3
PEER_TOKENS = 4000
"""The token threshold ADK's and LangChain's docs configure."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A policy under test: its name, its kind ("baseline", "ours", "peer"), the policy."""

    name: str
    kind: str
    policy: CompactionPolicy | None


def ours(window: int, *, keep_events: int) -> list[Entry]:
    """Our four strategies under one high-water trigger, each with and without min_saved."""
    trigger = TokenCount(int(window * HIGH))
    saved = int(window * MIN_SAVED)
    entries = []
    for suffix, minimum in (("", None), ("+min_saved", saved)):
        summarize = Summarize(
            max_events_to_keep=keep_events,
            max_summary_tokens=SUMMARY_TOKENS,
            min_saved_tokens=minimum,
        )
        clear = ClearToolResults(keep_tool_uses=KEEP_TOOL_USES, min_saved_tokens=minimum)
        budget = TokenBudget(max_tokens=int(window * LOW), min_saved_tokens=minimum)
        strategies: dict[str, Strategy] = {
            "token_budget": budget,
            "summarize": summarize,
            "clear_tool_results": clear,
            "clear_then_summarize": Pipeline((clear, summarize)),
        }
        entries += [
            Entry(f"{name}{suffix}", "ours", CompactionPolicy(trigger, strategy))
            for name, strategy in strategies.items()
        ]
    recall_first = CompactionPolicy(
        TokenCount(int(window * RECALL_HIGH)), TokenBudget(max_tokens=int(window * RECALL_LOW))
    )
    return [*entries, Entry("recall_first", "ours", recall_first)]


def peers(window: int) -> list[Entry]:
    """The peers' documented defaults, emulated through our server."""
    langchain = Summarize(
        max_events_to_keep=20,
        overlap=0,
        max_summary_tokens=SUMMARY_TOKENS,
        max_input_tokens=4000,
        min_saved_tokens=1,
    )
    return [
        Entry(
            "adk_interval",
            "peer",
            adk_policy(compaction_interval=3, overlap_size=1, max_summary_tokens=SUMMARY_TOKENS),
        ),
        Entry(
            "adk_tokens",
            "peer",
            adk_policy(
                token_threshold=PEER_TOKENS,
                event_retention_size=5,
                max_summary_tokens=SUMMARY_TOKENS,
            ),
        ),
        Entry("langchain", "peer", CompactionPolicy(TokenCount(PEER_TOKENS), langchain)),
        Entry(
            "anthropic_clear",
            "peer",
            CompactionPolicy(
                TokenCount(window * 100_000 // 200_000),
                ClearToolResults(keep_tool_uses=KEEP_TOOL_USES),
            ),
        ),
    ]


def entries(window: int, *, keep_events: int) -> list[Entry]:
    """Every policy a transcript is replayed under, no compaction first."""
    return [Entry("none", "baseline", None), *ours(window, keep_events=keep_events), *peers(window)]
