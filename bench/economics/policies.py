"""The policies replayed: none, ours (each family with the settings dev may choose from), peers.

Ours are families with a small grid of settings, scaled to the trace
family's ``scale`` (about the conversation size where compaction starts to
matter: 3,000 tokens on τ-bench, 40,000 on the long coding task, a
fraction of the window on the synthetic transcripts). Settings are chosen
on the dev split (``bench.economics.select``) and only the chosen one is
replayed on test. Our strategies cut at tool pairs, not turns, so a single
long turn can be compacted.

The peers run their documented defaults, never tuned:

- ADK ``EventsCompactionConfig(compaction_interval=3, overlap_size=1)`` and
  its token mode as ADK's docs configure it (``token_threshold=4000,
  event_retention_size=5``): in full runs ADK's own ``Runner`` in its venv
  (``bench.economics.adk_peer``), in the quick mode the emulation through
  our server by ``adk_mapping.adk_policy`` (no worker start);
- LangChain's own ``SummarizationMiddleware`` as its docs configure it
  (``trigger=("tokens", 4000)``, ``keep=("messages", 20)``) and
  ``ContextEditingMiddleware(ClearToolUsesEdit())`` with its defaults, run
  for real through ``create_agent`` (``bench.economics.langchain_peer``);
- Anthropic's ``clear_tool_uses_20250919`` defaults (trigger 100,000 input
  tokens, keep 3 tool uses), re-applied to the whole history on every
  request as the API does (``bench.economics.anthropic_edit``): no policy on
  our server.

Every summary, ours and the peers', is a deterministic fake at one stated
length rule (``bench.economics.summary_size``): the conversation it reads
over the ratio, within our policy's own budget (``SUMMARY_TOKENS``) or the
peers' ``PEER_CAP``. ``summarize`` gives its trail the default share (an
eighth); ``summarize_no_trail`` none; ``summarize_trail`` all of a 400- or
512-token summary but ``TRAIL_PROSE`` tokens, on earlier triggers
(``TRAIL_TRIGGERS``), keeping 2 events: the family issue 34's target is held
to, and the one dev keeps it if it can be kept (``TRAIL_DEV_FLOOR``).

``clear_at_least`` is clearing as Anthropic's ``clear_at_least`` meters it
(``min_cleared_tokens``): a pass that would clear less than a share of the
trigger is not made, so the prompt cache is broken less often for more.

``recall_first`` is the one family whose agent searches: a tight token
budget (Letta's shape: little in the prompt, the rest a search away), the
agent recalling by ``bench.economics.recall``'s answer-blind rule, every
search billed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from bench.economics.summary_size import PEER_CAP
from sidecar.adapters.adk_mapping import adk_policy
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy, Strategy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import Boundary

SUMMARY_TOKENS = 512
KEEP_TOOL_USES = 3
PEER_TOKENS = 4000
"""The token threshold ADK's and LangChain's docs configure."""
TRIGGERS = (0.5, 1.0, 2.0)
"""Our triggers: these multiples of the trace family's scale."""
ANTHROPIC_TRIGGER = 100_000
TRAIL_TRIGGERS = (1 / 6, 1 / 4)
"""``summarize_trail``'s triggers, as multiples of the scale: a pass as soon as the
conversation is worth one, the trail carrying what the agent will use."""
RECALL_TRIGGERS = (0.25, 0.5)
"""``recall_first``'s triggers, as multiples of the scale; each keeps a fifth of its trigger."""
TRAIL_PROSE = 10
"""What a ``summarize_trail`` summary keeps for prose; the rest of it is its trail."""
TRAIL_TARGET = (0.95, 0.35)
"""Issue 34's target on τ-bench's test split: this retention at most this share of the
conversation tokens of sending everything."""
TRAIL_DEV_FLOOR = 0.97
"""``summarize_trail``'s setting is the cheapest on dev at this retention or more: the
target's 0.95 and a margin for the split (dev and test differed by up to 0.015)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A policy under test: name, kind ("baseline", "ours", "peer"), policy, setting label.

    ``edit``: the peer whose requests are rebuilt from the whole history on
    every call rather than read from our server (``anthropic_clear``);
    ``recall``: the agent searches what compaction moved out
    (``bench.economics.recall``).
    """

    name: str
    kind: str
    policy: CompactionPolicy | None
    setting: str = ""
    edit: str = ""
    recall: bool = False


_P = Boundary.TOOL_PAIR


def _summarize(events: int) -> Summarize:
    return Summarize(max_events_to_keep=events, max_summary_tokens=SUMMARY_TOKENS, boundary=_P)


def _clear(uses: int = KEEP_TOOL_USES) -> ClearToolResults:
    return ClearToolResults(keep_tool_uses=uses, boundary=_P)


def _trail(summary_tokens: int) -> Summarize:
    return Summarize(
        max_events_to_keep=2,
        overlap=1,
        max_summary_tokens=summary_tokens,
        identifier_trail_tokens=summary_tokens - TRAIL_PROSE,
        boundary=_P,
    )


# Each family: what a pass keeps (its own unit) -> the strategy, for a trigger of t tokens.
_FAMILIES: dict[str, tuple[str, tuple[float, ...], Callable[[int, float], Strategy]]] = {
    "token_budget": ("budget x trigger", (0.25, 0.5),
                     lambda t, k: TokenBudget(max_tokens=int(t * k), boundary=_P)),
    "turn_window": ("turns", (1, 3), lambda t, k: TurnWindow(max_turns=int(k))),
    "summarize": ("events kept", (4, 10), lambda t, k: _summarize(int(k))),
    "summarize_no_trail": ("events kept", (4, 10),
                           lambda t, k: replace(_summarize(int(k)), identifier_trail_tokens=0)),
    "summarize_trail": (f"2 events kept, summary tokens (all but {TRAIL_PROSE} the trail)",
                        (400, 512), lambda t, k: _trail(int(k))),
    "clear_tool_results": ("tool uses kept", (1, 3), lambda t, k: _clear(int(k))),
    # Anthropic's clear_at_least: a pass that clears less breaks the prompt cache for little.
    "clear_at_least": ("3 tool uses kept, clearing at least x trigger", (0.25, 0.5),
                       lambda t, k: replace(_clear(), min_cleared_tokens=int(t * k))),
    "clear_then_budget": ("budget x trigger", (0.25, 0.5),
                          lambda t, k: Pipeline((_clear(), TokenBudget(max_tokens=int(t * k),
                                                                       boundary=_P)))),
    "clear_then_summarize": ("events kept", (4, 10),
                             lambda t, k: Pipeline((_clear(), _summarize(int(k))))),
}  # fmt: skip


def grid(
    scale: int, triggers: tuple[float, ...] = TRIGGERS, first_only: bool = False
) -> dict[str, list[Entry]]:
    """Each family of ours with every setting dev chooses from, plus ``recall_first`` (one);
    ``first_only``: the first keep setting of each family (the quick mode's)."""
    out: dict[str, list[Entry]] = {}
    for family, (unit, keeps, make) in _FAMILIES.items():
        own = TRAIL_TRIGGERS[:1] if first_only else TRAIL_TRIGGERS
        out[family] = [
            Entry(
                family,
                "ours",
                CompactionPolicy(TokenCount(int(scale * t)), make(int(scale * t), k)),
                f"trigger {int(scale * t)} tokens, {unit} {k:g}",
            )
            for t in (own if family == "summarize_trail" else triggers)
            for k in (keeps[:1] if first_only else keeps)
        ]
    # Letta-style: little in the prompt, the rest a recall away.
    out["recall_first"] = [
        Entry(
            "recall_first",
            "ours",
            CompactionPolicy(
                TokenCount(max(200, int(scale * t))),
                TokenBudget(max_tokens=max(100, int(scale * t) // 5), boundary=_P),
            ),
            f"trigger {max(200, int(scale * t))}, budget {max(100, int(scale * t) // 5)} tokens,"
            " recall",
            recall=True,
        )
        for t in ((0.25,) if first_only else RECALL_TRIGGERS)
    ]
    return out


def peers(real_adk: bool = False) -> list[Entry]:
    """The peers' documented defaults; ADK's own Runner if ``real_adk``, else its emulation."""
    adk = [
        Entry("adk_interval", "peer", None, "ADK's own Runner", edit="adk_interval"),
        Entry("adk_tokens", "peer", None, "ADK's own Runner", edit="adk_tokens"),
    ]
    return [*(adk if real_adk else _adk_emulated()), *_others()]


def _adk_emulated() -> list[Entry]:
    return [
        Entry(
            "adk_interval",
            "peer",
            adk_policy(compaction_interval=3, overlap_size=1, max_summary_tokens=PEER_CAP),
            "emulated",
        ),
        Entry(
            "adk_tokens",
            "peer",
            adk_policy(
                token_threshold=PEER_TOKENS,
                event_retention_size=5,
                max_summary_tokens=PEER_CAP,
            ),
            "emulated",
        ),
    ]


def _others() -> list[Entry]:
    return [
        Entry(
            "langchain_summarization",
            "peer",
            None,
            "LangChain's own middleware",
            edit="langchain_summarization",
        ),
        Entry(
            "langchain_clear", "peer", None, "LangChain's own middleware", edit="langchain_clear"
        ),
        Entry("anthropic_clear", "peer", None, "API semantics", edit="anthropic_clear"),
    ]
