"""The judge: how much of what the agent goes on to use is still in the context it is sent.

For each assistant step of a replayed trace, the identifiers its action uses
(its text and its tool calls' argument values) that first appeared in an
earlier user message or tool result, and not in the system prompt: those the
step could only have taken from its context. Retention is the share of them
present in the context the step was sent (GetContext's window as returned:
events, summary turns, cleared results' placeholders).

An identifier is a token that a model cannot rebuild from the gist: a URL;
a number of 3 or more digits; or a word of 3 or more characters with a digit,
a capital after a lowercase letter, or (4 characters or more) one of
``_ . / : - @`` inside it (``mia_li_3668``, ``HAT136``, ``2024-05-20``,
``src/a.py``, ``camelCase``, ``one-way``).
Identifiers compare case-folded, and a context holds one when the same token
appears in its text (so ``136`` is not held by ``HAT136``).

Written apart from ``sidecar.compaction.identifiers`` on purpose: the judge
must not be the code whose summaries and placeholders it grades.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

_SPLIT = re.compile(r"[\s\"'`{}\[\]()<>,;|=*!?]+")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"'`<>()\[\]{},]+", re.IGNORECASE)
_EDGE = ".:-/@_#$%&+~^\\"
_INNER = re.compile(r"[A-Za-z0-9][_./:@-]+[A-Za-z0-9]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_NUMBER = re.compile(r"^\d{3,}$")


def _words(text: str) -> Iterable[tuple[str, bool]]:
    """The tokens of ``text`` with whether each is a URL: URLs first, whole; the rest split."""
    for url in _URL.findall(text):
        yield url.rstrip(".:"), True
    for raw in _SPLIT.split(_URL.sub(" ", text)):
        word = raw.strip(_EDGE)
        if word:
            yield word, False


# Every policy's replay of a trace judges the same user messages, tool results and
# actions, and each step re-reads the events its predecessors were sent: both token
# sets are kept per text, a bounded number of them (the bench's working set is far less).
_TEXTS_KEPT = 1 << 15


@functools.lru_cache(maxsize=_TEXTS_KEPT)
def tokens(text: str) -> frozenset[str]:
    """Every token of ``text``, case-folded, edge punctuation off (a URL kept whole)."""
    return frozenset(word.casefold() for word, _ in _words(text))


def is_identifier(word: str) -> bool:
    """Whether ``word`` (one token, edges stripped) is an identifier as the module defines it."""
    if _NUMBER.match(word):
        return True
    if len(word) < 3 or word.isdigit():
        return False
    if any(c.isdigit() for c in word) or _CAMEL.search(word):
        return True
    return len(word) >= 4 and bool(_INNER.search(word))


@functools.lru_cache(maxsize=_TEXTS_KEPT)
def identifiers(text: str) -> frozenset[str]:
    """The identifiers of ``text``, case-folded."""
    return frozenset(word.casefold() for word, url in _words(text) if url or is_identifier(word))


def _values(node: Any) -> Iterable[str]:
    """The scalar values of a JSON document, keys left out (they are the tool's schema)."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _values(value)
    elif isinstance(node, list):
        for value in node:
            yield from _values(value)
    elif isinstance(node, bool) or node is None:
        return
    elif isinstance(node, float) and node.is_integer():
        yield str(int(node))
    else:
        yield str(node)


def action_text(text: str, arguments_json: Sequence[str]) -> str:
    """What an assistant step's action says: its text and its tool calls' argument values."""
    parts = [text]
    for arguments in arguments_json:
        try:
            parts.extend(_values(json.loads(arguments)))
        except ValueError:
            parts.append(arguments)
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Step:
    """One assistant step as judged: what it used from its past, and what of that it was sent."""

    index: int
    used: frozenset[str]
    held: frozenset[str]

    @property
    def missing(self) -> frozenset[str]:
        return self.used - self.held


class Judge:
    """Follows one trace in order: where each identifier first appeared, and each step's use.

    Feed it the trace's messages in order (``system`` once, first; ``source``
    for a user message or tool result; ``step`` for an assistant action,
    given the context it was sent, then ``assistant`` with the same action so
    that its own identifiers count as first seen there).
    """

    def __init__(self) -> None:
        self._first: dict[str, str] = {}
        self.steps: list[Step] = []

    def _see(self, text: str, where: str) -> None:
        for found in identifiers(text):
            self._first.setdefault(found, where)

    def system(self, text: str) -> None:
        self._see(text, "system")

    def source(self, text: str) -> None:
        """A user message or a tool result: what a later step may take from its context."""
        self._see(text, "source")

    def assistant(self, action: str) -> None:
        self._see(action, "assistant")

    def used(self, action: str) -> frozenset[str]:
        """The identifiers ``action`` uses that it could only have taken from its context."""
        return frozenset(i for i in identifiers(action) if self._first.get(i) == "source")

    def held(self, action: str, context: Iterable[str]) -> frozenset[str]:
        """Of what ``action`` uses, what the texts of ``context`` hold; records nothing."""
        used = self.used(action)
        if not used:
            return used
        seen: set[str] = set()
        for text in context:
            seen |= tokens(text)
        return frozenset(i for i in used if i in seen)

    def step(self, action: str, context: Iterable[str]) -> Step:
        """Judge one assistant action against the texts of the context it was sent."""
        judged = Step(len(self.steps), self.used(action), self.held(action, context))
        self.steps.append(judged)
        return judged


@dataclass(frozen=True, slots=True)
class Retention:
    """Identifiers used and held, summed over steps: retention is their ratio (1 when none)."""

    used: int = 0
    held: int = 0
    steps: int = 0
    steps_using: int = 0

    @property
    def ratio(self) -> float:
        return self.held / self.used if self.used else 1.0

    def __add__(self, other: Retention) -> Retention:
        return Retention(
            self.used + other.used,
            self.held + other.held,
            self.steps + other.steps,
            self.steps_using + other.steps_using,
        )


def retention(steps: Iterable[Step]) -> Retention:
    """The identifiers used and held over ``steps``."""
    total = Retention()
    for s in steps:
        total += Retention(len(s.used), len(s.held), 1, 1 if s.used else 0)
    return total
