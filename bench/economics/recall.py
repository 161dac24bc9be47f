"""The recall tool as the benchmark's agent uses it: a rule that never looks at the answer.

A policy that moves most of the session out of the prompt (``recall_first``)
leaves the agent the product's ``recall`` tool (``sidecar.adapters.recall``:
SearchEvents over what compaction archived, the answer bounded in tokens).
No model runs here, so when the agent searches, and with which words, is a
fixed rule:

- **when**: a step whose action needs an identifier that is not in its
  context searches first, up to ``max_searches`` times, and stops as soon
  as its context holds everything its action needs. The rule knows *that*
  something is missing, and for a tool call *which argument* it cannot fill
  (a model about to cancel a reservation notices it has no reservation id),
  never *what* the value is: no query word comes from the action's values.
- **with which words**: words of its own context and of its action's shape,
  never the action's values. First the names of the arguments it cannot
  fill, split at ``_`` (``payment_id`` → ``payment``), generic parts
  (``id``, ``name``, ``type``...) dropped; then the rarest content word of
  the newest user message in its context (rarest among the context's own
  words), which is all a reply to the user has to go on. Each query is one
  word: the tool says every word must appear in a passage.
- **what it costs**: each search is a model call of its own (the context
  as it stands, answered with the recall call: its query's tokens as
  output), and its call and answer are appended to the session as an
  assistant tool call and a tool result, so every later call of the turn,
  and of the session until compaction archives them, carries and pays for
  them. They are judged like any event: what the answer brings back is
  held only if the answer text holds it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.economics.retention import identifiers
from sidecar.adapters.recall import RecallSettings
from sidecar.model import Event

TOOL = "recall"
"""The name the agent's recall tool is called by, as the adapters register it."""
_GENERIC = frozenset(
    """id ids name names type types value values data info details detail get list new old
    the and for with from all any this that item items number count amount total""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[A-Za-z][A-Za-z]{3,}")
_STOP = frozenset(
    """that this with have from they them their there what when where which would could should
    about also just like want need make sure please thanks thank okay yes your yours mine
    will been were more some than then into only very much many other does done know""".split()  # noqa: SIM905
)


ANSWER_TOKENS = 300
"""The bound on a recall's answer: chosen on τ-bench's dev split (trial 0) over the tool's
default 1,000: at each of three budgets it kept 0.02 more for 1-4 % less billed (a long answer
crowds a tight window)."""


@dataclass(frozen=True, slots=True)
class RecallRule:
    """How the benchmark's agent recalls: at most ``max_searches`` a step, each answer within
    ``settings`` (``ANSWER_TOKENS``, and the tool's own 20 hits)."""

    max_searches: int = 2
    settings: RecallSettings = field(
        default_factory=lambda: RecallSettings(max_tokens=ANSWER_TOKENS)
    )

    def queries(self, action: Event, context: Sequence[str], lacking: frozenset[str]) -> list[str]:
        """The step's queries, in the order it would try them: the names of the arguments whose
        values hold an identifier in ``lacking`` (what its context lacks), then the rarest word
        of the newest user message in ``context``. No word of a value is ever a query."""
        out: list[str] = []
        for call in action.tool_calls:
            for key, value in _arguments(call.arguments_json):
                if not identifiers(value) & lacking:
                    continue
                for word in key.split("_"):
                    if len(word) >= 4 and word.lower() not in _GENERIC:
                        out.append(word.lower())
        rarest = _rarest_user_word(context)
        if rarest:
            out.append(rarest)
        return list(dict.fromkeys(out))[: self.max_searches]


def _arguments(arguments_json: str) -> list[tuple[str, str]]:
    """Each argument of a tool call as (its name, its value's text), nested ones by their own
    names (a list's items under the list's name)."""
    try:
        document = json.loads(arguments_json or "{}")
    except ValueError:
        return []
    found: list[tuple[str, str]] = []

    def walk(name: str, node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(str(key), value)
        elif isinstance(node, list):
            for value in node:
                walk(name, value)
        elif node is not None:
            found.append((name, str(node)))

    walk("", document)
    return found


def _rarest_user_word(context: Sequence[str]) -> str:
    """The newest user message's content word seen least often in ``context`` (the earliest
    of equals), or "" when there is none."""
    newest = next((t for t in reversed(context) if t.startswith("User: ")), "")
    words: list[str] = [w.lower() for w in _WORD.findall(newest.removeprefix("User: "))]
    words = [w for w in words if w not in _STOP]
    if not words:
        return ""
    seen = Counter(str(w).lower() for text in context for w in _WORD.findall(text))
    return min(words, key=lambda w: (seen[w], words.index(w)))
