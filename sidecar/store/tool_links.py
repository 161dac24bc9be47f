"""Tool links: each event's tool calls and results, indexed by call id.

A pass planned on the window's head (``sidecar.compaction.head``) must know
whether a result past the head answers a call inside it: such a result pulls
the cut back to its call's turn. Found by walking the window, that is the
whole window's cost for a pass that archives two events; found by index, it
is the head's. So both stores keep a ``tool_links`` row per tool call and per
tool result of every event (``kind`` 0 and 1), keyed by the call id's
``link_key`` and the event's id, written with the event.

The key is a 64-bit hash of the call id, not the id: ids are bounded only
by the event's size, and PostgreSQL text cannot hold the NUL a client may put
in one. Two ids may share a key; a shared key only ever makes a result look
like it answers a call it does not, which keeps more of the window, never
less: no tool result is kept without its call.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from hashlib import blake2b

from sidecar.compaction.head import WindowHead
from sidecar.model import Event, Session

CALL = 0
RESULT = 1


def link_key(call_id: str) -> int:
    """The signed 64-bit key of ``call_id`` (a column both stores index)."""
    digest = blake2b(call_id.encode(errors="surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def links_of(event: Event) -> Iterator[tuple[int, int]]:
    """``(kind, key)`` of each of ``event``'s tool calls and results."""
    for call in event.tool_calls:
        yield CALL, link_key(call.id)
    for result in event.tool_results:
        yield RESULT, link_key(result.call_id)


def links_of_content(content: str) -> Iterator[tuple[int, int]]:
    """``links_of`` an event stored as ``content`` (the codec's JSON): for back-filling."""
    fields = json.loads(content)
    for call in fields.get("c", ()):
        yield CALL, link_key(call[0])
    for result in fields.get("r", ()):
        yield RESULT, link_key(result[0])


def head_calls(head: Sequence[Event]) -> dict[int, set[str]]:
    """The call ids of ``head``'s real events, by ``link_key``: what a head read looks up."""
    by_key: dict[int, set[str]] = {}
    for event in head:
        if event.is_real:
            for call in event.tool_calls:
                by_key.setdefault(link_key(call.id), set()).add(call.id)
    return by_key


def window_head(
    session: Session,
    head: tuple[Event, ...],
    *,
    calls: int,
    pinned: tuple[Event, ...] = (),
    answered: frozenset[str] = frozenset(),
    called: frozenset[str] = frozenset(),
) -> WindowHead:
    """The ``WindowHead`` a store read: ``head`` with the session's counters for the rest."""
    counters = session.counters
    if len(head) >= counters.active_events:
        return WindowHead(head, True, counters.real_events, counters.turns, 0, tool_calls=calls)
    synthetic = sum(e.token_count for e in (*head, *pinned) if e.synthetic)
    return WindowHead(
        events=head,
        complete=False,
        real_events=counters.real_events,
        turns=counters.turns,
        conversation_tokens=counters.tokens - counters.system_tokens - synthetic,
        pinned_after=pinned,
        answered_after=answered,
        called_after=called,
        tool_calls=calls,
    )
