"""Identifiers: the exact strings an agent acts on, found in a span of events.

One definition, used by summaries (their ``Identifiers:`` trail), placeholders
(a cleared result's pointers) and the loss report of every pass. An
identifier is a token an agent would have to repeat verbatim to act on it:

- ids, keys and codes: a name carrying a digit (``ZFA04Y``, ``HAT136``,
  ``call_7``, a git sha), an inner capital (``getUserDetails``, ``iPhone``)
  or one of ``_ . / : @ # - \\`` between its parts (``mia_li_3668``,
  ``src/app.py:42``, ``https://x.org/a?b=1``, ``ana@example.com``);
- numbers of three digits or more (``7447``, ``1,250.00``) and dates
  (``2024-05-20``, ``2024-05-20T10:00Z``).

Plain words are not (``Hello``, ``USA``), nor are hyphenated English words
(``one-way``, ``follow-up``) unless a tool call was given them, nor short
ordinals and units (``20th``, ``5pm``), initialisms (``e.g.``), or the keys of
a JSON (or Python-literal) tool result or argument object: ``first_name`` is
the schema, not the data.

Ranking: an identifier a later assistant action (its text or tool-call
arguments) used ranks first, then the one seen most recently, then the one
seen most often, then the one seen first. Every pass is bounded whatever the
span: at most ``MAX_EVENT_CHARS`` of each text is read, at most
``MAX_SPAN_CHARS`` in all (newest events first), at most ``MAX_IDENTIFIER_CHARS``
an identifier, and at most ``limit`` are returned. Presence in a window is a
token match: ``ZFA04Y`` is held by ``... ZFA04Y.`` but not by ``ZFA04YX``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from sidecar.compaction.formatting import format_event
from sidecar.model import Event, Role
from sidecar.summarizer.protocol import TRAIL_LABEL, TRAIL_SEPARATOR

MAX_EVENT_CHARS = 8 << 10
"""How much of one text (a message, a tool result, a call's arguments) is read."""
MAX_SPAN_CHARS = 64 << 10
"""How much of a span is read in all, newest events first."""
MAX_WINDOW_CHARS = 256 << 10
"""How much of a window is read to tell whether it still holds an identifier."""
MAX_IDENTIFIER_CHARS = 96
"""Longer tokens (encoded blobs, signatures) are not identifiers anyone repeats."""
MAX_IDENTIFIERS = 64
"""The most identifiers a span yields by default."""

# A token: word runs joined by connectors, optionally led by a path or tag mark,
# never ending in punctuation (``ZFA04Y.`` at a sentence end is ``ZFA04Y``).
_CONNECTOR = r"[-_./:@#\\?=&%+~]"
_TOKEN = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![^\W_])"  # 1,250.00
    rf"|(?:[/~#@]|\.{{1,2}}/)?[^\W_]+(?:{_CONNECTOR}+[^\W_]+)*"
)
# The keys of a JSON or Python-literal object: ``"first_name":`` or ``'id':``.
_KEY = re.compile(r"""["'][^"'\\\n]{1,128}["']\s*:""")
_DIGIT = re.compile(r"\d")
_DIGITS3 = re.compile(r"\d{3}")
_NUMBER = re.compile(r"[\d.,]+")
_ORDINAL_OR_UNIT = re.compile(r"\d{1,2}[a-z]{1,3}")
_HYPHENATED_WORDS = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)+")
_SPLIT = re.compile(_CONNECTOR + "+")


@dataclass(frozen=True, slots=True)
class Identifier:
    """One identifier of a span: how often and how lately it was seen, and if it was used.

    ``last_seen`` is the index in the span of the newest event holding it
    (-1 for one carried over from an earlier trail); ``used`` means an
    assistant action after its first appearance repeated it.
    """

    text: str
    count: int
    last_seen: int
    used: bool


def is_identifier(token: str, *, action: bool = False) -> bool:
    """Whether ``token`` (one match of the tokenizer) is an identifier.

    ``action``: the token is a tool call's argument, where a hyphenated
    word (a kebab-case name, an option) is data the agent chose.
    """
    if len(token) < 3 or len(token) > MAX_IDENTIFIER_CHARS:
        return False
    if token.isalpha():  # most tokens are words: settled without a regex split
        return _inner_capital(token)
    if token.isdigit():
        return True
    if _NUMBER.fullmatch(token):
        return bool(_DIGITS3.search(token.replace(",", "")))
    body = token.lstrip("/~#@$.")
    parts = [p for p in _SPLIT.split(body) if p]
    if len(parts) > 1:
        if all(len(p) == 1 and p.isalpha() for p in parts):
            return False  # e.g, i.e, U.S
        # one-way, follow-up: English, unless a tool call was given it.
        return action or not _HYPHENATED_WORDS.fullmatch(body)
    if _DIGIT.search(body):
        return len(body) >= 3 and not _ORDINAL_OR_UNIT.fullmatch(body)
    if _inner_capital(body):
        return True
    return token != body and len(body) >= 2  # a tag or path mark: #general, /tmp


def _inner_capital(word: str) -> bool:
    """``getUserDetails``, ``iPhone``, ``OOMKilled``: a capital past the start, not all capitals,
    nor a plural initialism (``IDs``, ``URLs``: English)."""
    if word.isupper() or (word[-1] == "s" and word[:-1].isupper()):
        return False
    return any(c.isupper() for c in word[1:])


def find(text: str, *, structured: bool = False, action: bool = False) -> list[str]:
    """The identifiers of ``text`` in order of first appearance, each once.

    ``structured``: ``text`` may be a JSON or Python-literal object (a tool
    result, a call's arguments), whose keys are left out.
    """
    head = text[:MAX_EVENT_CHARS]
    if structured:
        head = _KEY.sub(" ", head)
    return [t for t in dict.fromkeys(_TOKEN.findall(head)) if is_identifier(t, action=action)]


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    structured: bool
    action: bool
    structural: tuple[str, ...] = ()
    """The call's id and tool name, which a (cleared) result may repeat: wiring, not data."""


def _texts(event: Event) -> Iterator[_Text]:
    """The texts of an event identifiers are found in, with how to read each."""
    acting = event.role is Role.ASSISTANT and not event.synthetic  # a summary is no action
    if event.text:
        yield _Text(event.text, structured=False, action=acting)
    for call in event.tool_calls:
        yield _Text(call.arguments_json, structured=True, action=True)
    for result in event.tool_results:
        yield _Text(
            result.content, structured=True, action=False, structural=(result.call_id, result.name)
        )


def action_chars(event: Event) -> int:
    """How much of the span budget ``_action_tokens`` spends reading ``event``."""
    if event.role is not Role.ASSISTANT or event.synthetic:
        return 0
    return sum(min(len(piece.text), MAX_EVENT_CHARS) for piece in _texts(event))


def rank(identifiers: Iterable[Identifier], limit: int = MAX_IDENTIFIERS) -> list[Identifier]:
    """The best ``limit`` of ``identifiers``: used first, then newest, most frequent, first seen.

    Input order breaks ties (it is the order of first appearance).
    """
    indexed = list(enumerate(identifiers))
    indexed.sort(key=lambda item: (not item[1].used, -item[1].last_seen, -item[1].count, item[0]))
    return [identifier for _, identifier in indexed[: max(0, limit)]]


def of_span(
    events: Sequence[Event],
    *,
    limit: int = MAX_IDENTIFIERS,
    budget: int = MAX_SPAN_CHARS,
    later: Sequence[Event] = (),
) -> list[Identifier]:
    """The ranked identifiers of ``events`` (in log order), at most ``limit``.

    Reads newest first, within ``budget`` characters in all. ``later`` events
    (the window after the span) only mark identifiers as used when one of
    their assistant actions repeats them; they are read within the budget too.
    """
    found: dict[str, list[int]] = {}  # text -> [count, last_seen, first_seen]
    acted: dict[str, int] = {}  # text -> the newest index of an assistant action using it
    left = budget
    for index in range(len(events) - 1, -1, -1):
        if left <= 0:
            break
        for piece in _texts(events[index]):
            text = piece.text[: min(left, MAX_EVENT_CHARS)]
            left -= len(text)
            for token in find(text, structured=piece.structured, action=piece.action):
                if token in piece.structural:
                    continue
                seen = found.get(token)
                if seen is None:
                    found[token] = [1, index, index]
                else:
                    seen[0] += 1
                    seen[2] = index
                if piece.action and token not in acted:
                    acted[token] = index
    later_actions = _action_tokens(later, left)
    out = [
        Identifier(
            text=token,
            count=count,
            last_seen=last,
            used=token in later_actions or acted.get(token, -1) > first,
        )
        for token, (count, last, first) in found.items()
    ]
    out.sort(key=lambda i: found[i.text][2])  # first appearance: rank breaks ties by it
    return rank(out, limit)


def _action_tokens(events: Sequence[Event], budget: int) -> set[str]:
    """Tokens of the assistant actions (text, call arguments) of ``events``, within ``budget``."""
    tokens: set[str] = set()
    for event in events:
        if event.role is not Role.ASSISTANT or event.synthetic:
            continue
        for piece in _texts(event):
            if budget <= 0:
                return tokens
            text = piece.text[: min(budget, MAX_EVENT_CHARS)]
            budget -= len(text)
            tokens.update(_TOKEN.findall(text))
    return tokens


class Presence:
    """What a window holds, to tell whether it still holds an identifier.

    Built from the window's events as token accounting renders them (so a
    placeholder counts, a cleared original does not) and any extra texts
    (a summary), reading at most ``budget`` characters in all. An identifier
    is held where it occurs with no letter or digit right before or after it:
    ``app.py`` is held by ``app.py:42``, ``ZFA04`` is not by ``ZFA04Y``. Each
    question is a scan of the window in C, not a pass of Python over its tokens.
    """

    __slots__ = ("_text",)

    def __init__(
        self,
        events: Iterable[Event] = (),
        texts: Iterable[str] = (),
        budget: int = MAX_WINDOW_CHARS,
    ) -> None:
        pieces: list[str] = []
        left = budget
        for text in itertools.chain(texts, (format_event(e) for e in events)):
            if left <= 0:
                break
            pieces.append(text[:left])
            left -= len(pieces[-1]) + 1
        self._text = "\n".join(pieces)

    def holds(self, identifier: str) -> bool:
        text = self._text
        # A letter or digit edge must not run on into the text; a mark (``#W1``, ``/tmp``) may.
        open_start = identifier[:1].isalnum()
        start = 0
        for _ in range(_FIND_TRIES):
            at = text.find(identifier, start)
            if at < 0:
                return False
            end = at + len(identifier)
            flanked = (open_start and at and text[at - 1].isalnum()) or (
                end < len(text) and text[end].isalnum()
            )
            if not flanked:
                return True
            start = at + 1
        # Many flanked occurrences (a number inside longer ones): one regex scan settles it.
        before = r"(?<![^\W_])" if open_start else ""
        pattern = rf"{before}{re.escape(identifier)}(?![^\W_])"
        return re.search(pattern, text[start:]) is not None


_FIND_TRIES = 8


def missing(identifiers: Iterable[str], presence: Presence) -> list[str]:
    """Those of ``identifiers`` that ``presence`` does not hold, in order."""
    return [i for i in identifiers if not presence.holds(i)]


def trail_of(summary: str) -> list[str]:
    """The identifiers of a summary's trail (its last ``Identifiers:`` line); [] for none."""
    tail = summary[-(MAX_EVENT_CHARS):]
    at = tail.rfind(TRAIL_LABEL)
    if at < 0 or (at > 0 and tail[at - 1] != "\n"):
        return []
    line = tail[at + len(TRAIL_LABEL) :].split("\n", 1)[0]
    return [i for i in (p.strip() for p in line.split(TRAIL_SEPARATOR)) if i]


MAX_POINTERS = 5
"""How many identifiers a cleared result's placeholder names."""
MAX_POINTER_CHARS = 120
"""How long a placeholder's list of identifiers may be, separators included."""


def newest_actions(events: Sequence[Event], budget: int = MAX_SPAN_CHARS) -> dict[str, int]:
    """For each token of an assistant action of ``events``, the newest index using it.

    Read newest first within ``budget`` characters: built once per pass, it
    answers "did a later action use this?" for every event of the window.
    """
    newest: dict[str, int] = {}
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.role is not Role.ASSISTANT or event.synthetic:
            continue
        for piece in _texts(event):
            if budget <= 0:
                return newest
            text = piece.text[: min(budget, MAX_EVENT_CHARS)]
            budget -= len(text)
            for token in _TOKEN.findall(text):
                newest.setdefault(token, index)
    return newest


def pointers(
    text: str,
    *,
    index: int = -1,
    actions: Mapping[str, int] | None = None,
    leave_out: Iterable[str] = (),
    limit: int = MAX_POINTERS,
    max_chars: int = MAX_POINTER_CHARS,
) -> list[str]:
    """The identifiers a placeholder for ``text`` (a tool result) names, best first.

    Those a later action used (``actions`` after ``index``) first, then in
    order of appearance; never more than ``limit``, nor more than
    ``max_chars`` joined, whatever ``text`` holds: a pointer list is bounded
    by construction.
    """
    skip = set(leave_out)
    found = [i for i in find(text, structured=True) if i not in skip]
    if actions:
        found.sort(key=lambda i: actions.get(i, -1) <= index)  # stable: used ones first
    chosen: list[str] = []
    size = 0
    for identifier in found:
        cost = len(identifier) + (len(TRAIL_SEPARATOR) if chosen else 0)
        if len(chosen) >= limit:
            break
        if size + cost > max_chars:
            continue  # a shorter one may still fit
        chosen.append(identifier)
        size += cost
    return chosen
