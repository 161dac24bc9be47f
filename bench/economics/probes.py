"""Planted-fact probes: a value stated once, look-alike decoys, a paraphrased question later.

The synthetic transcripts (``bench.economics.transcripts``) plant a few facts
each. A probe is one of them, built so that neither the judge nor a search
can pass it by matching words:

- **the fact**, stated once early in a user message (``Lisbon hotel booking
  reference BK-204519``);
- **decoys**: values of the same shape stated in other turns, about
  something else or the same thing at another time (the Porto hotel's
  reference, the Lisbon restaurant's), so a context or a search that holds
  only a look-alike fails;
- **the question**, much later, in other words than the statement's (``the
  confirmation number for where I'm staying in Portugal's capital``), and
  an answer that states the value, which is what the judge scores.

A probe's outcome, at its answer's step: ``held`` (the value was in the
context it was sent), ``recalled`` (held only after the agent's searches),
``decoy`` (the context held a look-alike but not the value: an agent would
likely answer wrong), ``missing`` (neither).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.economics.retention import tokens

OUTCOMES = ("held", "recalled", "decoy", "missing")


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    """What a transcript plants: ``statement`` and each decoy's statement have ``{v}`` for their
    value; ``question`` asks for the fact without its statement's wording."""

    name: str
    value: str
    statement: str
    question: str
    decoys: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Probe:
    """A planted fact: where it is stated, where its decoys are, where it is asked for."""

    name: str
    value: str
    decoys: tuple[str, ...]
    planted_turn: int
    decoy_turns: tuple[int, ...]
    needed_turn: int


@dataclass(frozen=True, slots=True)
class ProbeCheck:
    """A probe as the replay checks it: the id of the event that answers it, the value, the
    decoys' values."""

    answer_id: str
    value: str
    decoys: tuple[str, ...]


class Plan:
    """Where each probe is stated, decoyed and asked: statements in the first fifth, decoys
    between a statement and its question, the question 40-90 % of the transcript later. A
    short transcript (the quick mode's) takes the first specs whose turns fit in it."""

    def __init__(self, rng: random.Random, turns: int, specs: Sequence[ProbeSpec]) -> None:
        self.probes: list[Probe] = []
        self._said: dict[int, str] = {}
        self._asked: dict[int, ProbeSpec] = {}
        fitting, room = [], turns - 1  # turn 0 opens the transcript
        for spec in specs:
            room -= 2 + len(spec.decoys)
            if room < 0:
                break
            fitting.append(spec)
        for i, spec in enumerate(fitting):
            planted = self._free(2 + i * max(1, turns // (5 * len(fitting))), turns)
            needed = self._free(
                min(planted + int(turns * (0.4 + 0.5 * rng.random())), turns - 1), turns
            )
            self._said[planted] = spec.statement.format(v=spec.value)
            self._asked[needed] = spec
            decoy_turns = []
            for statement, value in spec.decoys:
                at = self._free(rng.randint(1, max(1, needed - 1)), turns)
                self._said[at] = statement.format(v=value)
                decoy_turns.append(at)
            self.probes.append(
                Probe(spec.name, spec.value, tuple(v for _, v in spec.decoys), planted,
                      tuple(decoy_turns), needed)
            )  # fmt: skip

    def _free(self, turn: int, turns: int) -> int:
        """``turn``, or the next one no statement or question takes (wrapping round)."""
        for step in range(turns):
            candidate = (turn + step) % turns
            if candidate and candidate not in self._said and candidate not in self._asked:
                return candidate
        raise ValueError(f"no free turn for a probe among {turns}")

    def message(self, turn: int) -> str | None:
        """The user's message of ``turn`` when it states a fact or a decoy, or asks for one."""
        if turn in self._said:
            return self._said[turn]
        if turn in self._asked:
            return self._asked[turn].question
        return None

    def answer(self, turn: int) -> str | None:
        """The assistant's answer of ``turn`` when it answers a probe: it states the value."""
        spec = self._asked.get(turn)
        return None if spec is None else f"The {spec.name} is {spec.value}."

    def planted(self, turn: int) -> Probe | None:
        return next((p for p in self.probes if p.planted_turn == turn), None)


def outcome(check: ProbeCheck, context: Iterable[str], before: Iterable[str] = ()) -> str:
    """``check``'s outcome against the texts of the context its answer was sent; ``before``:
    the context before the agent's searches, if it searched."""
    seen = _seen(context)
    value = check.value.casefold()
    if value in seen:
        return "recalled" if before and value not in _seen(before) else "held"
    if any(d.casefold() in seen for d in check.decoys):
        return "decoy"
    return "missing"


def _seen(texts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    for text in texts:
        seen |= tokens(text)
    return seen
