"""A summary's identifier trail: the exact strings the agent may act on next, kept.

A summary ends with one line, ``Identifiers: ZFA04Y, src/app.py:42, ...``:
the top identifiers (``sidecar.compaction.identifiers``) of the span it
archives — the events leaving the window and the previous summary, whose own
trail is folded in — that the kept window does not already hold. It has a
share of the summary's tokens of its own (``identifier_trail_tokens``), so it
never grows past it pass after pass: newer and used identifiers push out the
oldest. The summarizer is given the list as must-keep; whatever its answer
still leaves out is appended to it here, within the same share.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.compaction.identifiers import MAX_IDENTIFIERS, Presence, find, of_span, trail_of
from sidecar.model import Event
from sidecar.summarizer.protocol import TRAIL_LABEL, TRAIL_SEPARATOR, trail_line
from sidecar.tokenizer import TokenEstimator

DEFAULT_TRAIL_SHARE = 8
"""Unset, the trail may take an eighth of ``max_summary_tokens``."""


def default_trail_tokens(max_summary_tokens: int) -> int:
    """The trail's share of a summary of ``max_summary_tokens`` when none is set."""
    return max_summary_tokens // DEFAULT_TRAIL_SHARE


def choose(
    archived: Sequence[Event],
    previous_summary: str,
    kept: Sequence[Event],
    budget: int,
    estimator: TokenEstimator,
) -> tuple[str, ...]:
    """The trail for a pass archiving ``archived`` and ``previous_summary``, keeping ``kept``.

    The archived events' ranked identifiers (a use in the kept window counts)
    come first, then the previous summary's trail in its order, then what else
    the previous summary names: so a trail folds into the next one and its
    oldest identifiers are the first to go. Less what ``kept`` holds, fitted
    to ``budget`` tokens; empty when ``budget`` is 0.
    """
    if budget <= 0:
        return ()
    found = [i.text for i in of_span(archived, later=kept)]
    candidates = dict.fromkeys(
        [*found, *trail_of(previous_summary), *find(previous_summary)][: MAX_IDENTIFIERS * 3]
    )
    window = Presence(kept)
    return fit([c for c in candidates if not window.holds(c)], budget, estimator)


def fit(identifiers: Sequence[str], budget: int, estimator: TokenEstimator) -> tuple[str, ...]:
    """The longest prefix of ``identifiers`` whose trail line counts at most ``budget`` tokens."""
    chosen: list[str] = []
    spent = estimator.count(TRAIL_LABEL)
    for identifier in identifiers:
        cost = estimator.count(TRAIL_SEPARATOR + identifier)
        if spent + cost > budget:
            break
        chosen.append(identifier)
        spent += cost
    while chosen and estimator.count(trail_line(chosen)) > budget:
        chosen.pop()  # pieces counted apart can merge into more tokens joined
    return tuple(chosen)


def completed(summary: str, trail: Sequence[str]) -> str:
    """``summary`` with the identifiers of ``trail`` it left out on its closing trail line.

    Added to its own ``Identifiers:`` line when it ends with one, else on a
    new one; ``trail`` was fitted to the share, so what is added is too.
    """
    held = Presence(texts=[summary])
    missing = [i for i in trail if not held.holds(i)]
    if not missing:
        return summary
    body = summary.rstrip()
    last_line = body.rsplit("\n", 1)[-1]
    if last_line.startswith(TRAIL_LABEL):
        return f"{body}{TRAIL_SEPARATOR}{TRAIL_SEPARATOR.join(missing)}"
    return f"{body}\n{trail_line(missing)}"
