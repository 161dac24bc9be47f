"""Recall: an agent's search of its own session's archived history, as compact text for a model.

Compaction moves events out of the prompt but never deletes them: they stay
in the log and SearchEvents finds them. The recall tools (``adk_recall``,
``langchain_recall``) let the model ask for them back; this module is what
both share — one bounded search of one session, and the text the model gets.

The answer is bounded three ways: in tokens (``max_tokens``, counted with the
service's estimator), in hits (``max_hits``, best first) and in time (a
deadline on the search). What did not fit is counted, never silently dropped:
the answer says how many more matched.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC

from sidecar.client import (
    AsyncClient,
    Client,
    ClientError,
    DeadlineExceededError,
    InvalidArgumentError,
    ResourceExhaustedError,
    SearchHit,
    UnavailableError,
)
from sidecar.compaction.formatting import format_event
from sidecar.model import Event
from sidecar.tokenizer import TokenEstimator, default_estimator

DEFAULT_MAX_TOKENS = 1_000
DEFAULT_MAX_HITS = 20
DEFAULT_TIMEOUT_S = 5.0
MIN_MAX_TOKENS = 100  # room for the header, one hit and the count of the rest

# Bytes bounds besides tokens: the server's snippets are a few words, but a hit's text and
# the model's query are the model's and the log's to make as long as they like.
_MAX_SNIPPET_CHARS = 400
_MAX_QUERY_ECHO_CHARS = 80
_ELLIPSIS = "…"
_NO_QUERY = "Nothing to search for: give a few words the passage would contain."

# What the model is told when the search could not answer; errors it can act on only.
_RECOVERABLE: tuple[type[ClientError], ...] = (
    InvalidArgumentError,  # the query: too long, too many words
    ResourceExhaustedError,  # the search ran past the server's time limit
    DeadlineExceededError,
    UnavailableError,
)


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """How much a recall searches and returns.

    ``max_tokens`` bounds the whole answer (at least ``MIN_MAX_TOKENS``);
    ``max_hits`` the hits considered, best first; ``timeout_s`` is the
    search's deadline. ``include_active`` searches the active window too
    (by default only what compaction moved out, which the model cannot see).
    """

    max_tokens: int = DEFAULT_MAX_TOKENS
    max_hits: int = DEFAULT_MAX_HITS
    timeout_s: float = DEFAULT_TIMEOUT_S
    include_active: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_MAX_TOKENS}, got {self.max_tokens}")
        if self.max_hits < 1:
            raise ValueError(f"max_hits must be at least 1, got {self.max_hits}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")


TOOL_DESCRIPTION = (
    "Search the earlier part of this conversation that is no longer shown to you"
    " (moved out of your context to save space) and return the best matching passages,"
    " each with its role and time. Use it when you need a detail from earlier that you"
    " cannot see: a number, a name, a decision. `query`: a few distinctive words the"
    " passage would contain; every word must appear in it."
)


def recall(
    client: Client, session_id: str, query: str, settings: RecallSettings | None = None
) -> str:
    """Search ``session_id``'s archived events for ``query``; the answer as compact text.

    The query is plain terms (never query syntax). A query the server refuses,
    a search past its deadline or a service unavailable is answered with a
    sentence saying so, for the model to act on; other errors (a missing or
    wrong token, a refused permission) raise.
    Each page's call has the deadline; a page holds up to ``max_hits + 1``
    hits unless they pass the server's message size.
    """
    settings = settings or RecallSettings()
    if not query.strip():
        return _NO_QUERY
    try:
        found = client.search(
            query,
            session_id=session_id,
            include_active=settings.include_active,
            page_size=settings.max_hits + 1,
            timeout_s=settings.timeout_s,
        )
        hits = list(itertools.islice(found, settings.max_hits + 1))
    except _RECOVERABLE as exc:
        return _failed(exc)
    return _answer(query, hits, settings)


async def arecall(
    client: AsyncClient, session_id: str, query: str, settings: RecallSettings | None = None
) -> str:
    """``recall`` with an ``AsyncClient``."""
    settings = settings or RecallSettings()
    if not query.strip():
        return _NO_QUERY
    hits: list[SearchHit] = []
    try:
        found = client.search(
            query,
            session_id=session_id,
            include_active=settings.include_active,
            page_size=settings.max_hits + 1,
            timeout_s=settings.timeout_s,
        )
        async for hit in found:
            hits.append(hit)
            if len(hits) > settings.max_hits:
                break
    except _RECOVERABLE as exc:
        return _failed(exc)
    return _answer(query, hits, settings)


def _answer(query: str, hits: Sequence[SearchHit], settings: RecallSettings) -> str:
    """The text for up to ``max_hits + 1`` hits: one more than shown means "at least"."""
    return format_recall(
        query,
        [(h.event, h.snippet) for h in hits[: settings.max_hits]],
        max_tokens=settings.max_tokens,
        more_beyond=len(hits) > settings.max_hits,
        archived_only=not settings.include_active,
    )


# -- the text ---------------------------------------------------------------------------


def format_recall(
    query: str,
    hits: Iterable[tuple[Event, str]],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    more_beyond: bool = False,
    archived_only: bool = True,
    estimator: TokenEstimator | None = None,
) -> str:
    """The model's answer for ``hits`` (event and snippet, best first), in ``max_tokens``.

    A header naming the query, then a line per hit — time, role, snippet with
    the matched terms marked — in rank order until the next would pass
    ``max_tokens``, then how many matched but were not shown (``more_beyond``:
    the search had more than ``hits``, so "at least"). The best hit is always
    shown, cut to fit when it is too long alone. No hits: a sentence saying
    nothing matched.
    """
    count = (estimator or default_estimator()).count
    echo = _cut_chars(" ".join(query.split()), _MAX_QUERY_ECHO_CHARS)
    echo = _cut_tokens(echo, max_tokens // 5, count)
    where = "archived history" if archived_only else "history"
    lines = [_line(event, snippet) for event, snippet in hits]
    if not lines:
        return f'Nothing in this session\'s {where} matches "{echo}".'
    header = f'From this session\'s {where}, matching "{echo}" (best first):'
    # Room kept for the count of what is left out, at its longest.
    reserve = count("\n" + _rest(len(lines), more_beyond=True))
    shown: list[str] = []
    used = count(header)
    for line in lines:
        cost = count("\n" + line)
        if used + cost + reserve > max_tokens:
            break
        shown.append(line)
        used += cost
    if not shown:
        shown.append(_cut_tokens(lines[0], max_tokens - used - reserve - 1, count))

    def text() -> str:
        left = len(lines) - len(shown)
        tail = [_rest(left, more_beyond)] if left or more_beyond else []
        return "\n".join([header, *shown, *tail])

    # The tokens of a whole are not always the sum of its parts': the whole is checked.
    while (over := count(answer := text()) - max_tokens) > 0:
        if len(shown) > 1:
            shown.pop()
        else:
            cut = _cut_tokens(shown[0], count(shown[0]) - over - 1, count)
            if cut == shown[0]:
                break  # nothing left to cut: the header alone is over (not at MIN_MAX_TOKENS)
            shown[0] = cut
    return answer


def _line(event: Event, snippet: str) -> str:
    """``- 2026-12-01 16:09 UTC user: …my **order** is 4417…``, on one line."""
    stamp = event.create_time
    when = (stamp.astimezone(UTC) if stamp.tzinfo else stamp).strftime("%Y-%m-%d %H:%M UTC")
    body = snippet or format_event(event)
    # The indexed text opens with the role's label ("User: ...", "Tool [responses: ..."),
    # which the line already names.
    label = event.role.value.capitalize()
    for prefix in (f"{label}: ", f"{label} "):
        if body.startswith(prefix):
            body = body.removeprefix(prefix)
            break
    body = _cut_chars(" ".join(body.split()), _MAX_SNIPPET_CHARS)
    return f"- {when} {event.role.value}: {body}"


def _rest(left: int, more_beyond: bool) -> str:
    """How many matched but are not shown; "at least" when the search had more still."""
    if more_beyond:
        return f"At least {left + 1} more matched; search with more specific words to see them."
    return f"{left} more matched; search with more specific words to see them."


def _cut_chars(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + _ELLIPSIS


def _cut_tokens(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` that, with an ellipsis, counts at most ``budget``."""
    if count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:  # bisection: count is monotonic enough in the prefix's length
        middle = (low + high + 1) // 2
        if count(text[:middle] + _ELLIPSIS) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _ELLIPSIS


def _failed(exc: ClientError) -> str:
    """What the model is told instead of hits: what went wrong, and what it can do."""
    detail = _cut_chars(str(exc), _MAX_QUERY_ECHO_CHARS * 3)
    if isinstance(exc, InvalidArgumentError):
        return f"The search refused the query ({detail}); use fewer, plainer words."
    if isinstance(exc, ResourceExhaustedError):
        return f"The search was too broad ({detail}); use rarer words."
    if isinstance(exc, DeadlineExceededError):
        return "The search did not answer by its deadline; try again, or with rarer words."
    return "The history search is unavailable right now; try again later."
