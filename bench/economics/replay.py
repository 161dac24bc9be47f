"""Replay a transcript through the real server under one policy, recording every model call.

The agent calls the model before each of its own events (the call that
produced it): after the turn's user message, and after each tool loop's
results. Events are appended in the batches the agent would send (the user
message; an answer with its tool results), one AppendEvents each. A pass
the trigger sets off lands before the next call: when an append schedules a
summary in the background, the replay waits for it with a trigger-less
Compact (which waits for the pass in flight and runs none of its own), as
an agent that reads its context after each append would see it.

The window of each call is the server's: GetContext whenever the session's
version moved past what the replay's own appends explain (a compaction or a
clearing), and otherwise the last window read plus the events the append
stored (each with the token count the server gave it), which is what
GetContext answers for a session only appended to. A fact's recall is
checked at the first call of the turn that needs it: in the window's visible
text (a cleared result shows its placeholder), or else among SearchEvents'
top 5 for its topic, the active window included (cleared originals are
searchable there).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from bench.economics.policies import Entry
from bench.economics.pricing import Call, Key
from bench.economics.transcripts import Fact, Transcript
from sidecar.client import AsyncClient, SessionHandle
from sidecar.compaction.formatting import format_event
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.model import Event, Role

SEARCH_TOP = 5
# Compact with no trigger and no force runs nothing: it only waits for the pass in flight.
_WAIT = CompactionPolicy(trigger=None, strategy=TokenBudget())


@dataclass(frozen=True, slots=True)
class Recall:
    """Whether a needed fact was in the context, or found by search, at the turn needing it."""

    fact: Fact
    in_context: bool
    found_by_search: bool


@dataclass(slots=True)
class Replay:
    """What one transcript under one policy did: its calls, recalls and passes."""

    calls: list[Call] = field(default_factory=list)
    recalls: list[Recall] = field(default_factory=list)
    passes: dict[str, int] = field(default_factory=dict)
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0


def cache_key(event: Event) -> Key:
    """The event as the prompt cache compares it."""
    return (event.id, event.cleared, event.token_count)


def _visible(event: Event) -> str:
    calls = " ".join(c.arguments_json for c in event.tool_calls)
    return f"{format_event(event)} {calls}"


class ReplayedSession:
    """The replay's view of one session: its window as the server would answer it."""

    def __init__(self, handle: SessionHandle, version: int) -> None:
        self.handle = handle
        self.version = version
        self.window: list[Event] = []

    async def append(self, events: list[Event]) -> None:
        if not events:
            return
        ack = await self.handle.append(events)
        if ack.compaction_scheduled:
            await self.handle.compact(_WAIT)
        only_ours = ack.version == self.version + 1 and ack.compaction is None
        if only_ours and not ack.compaction_scheduled and not ack.content_omitted:
            self.window.extend(ack.events)
            self.version = ack.version
            return
        context = await self.handle.context()
        self.window = list(context.events)
        self.version = context.version

    async def recall(self, fact: Fact) -> Recall:
        if any(fact.value in _visible(e) for e in self.window):
            return Recall(fact, True, False)
        found = False
        seen = 0
        async for hit in self.handle.search(fact.query, include_active=True, page_size=SEARCH_TOP):
            found = found or fact.value in _visible(hit.event)
            seen += 1
            if seen == SEARCH_TOP:
                break
        return Recall(fact, False, found)


async def replay(
    client: AsyncClient, session_id: str, transcript: Transcript, entry: Entry
) -> Replay:
    """Replay ``transcript`` as session ``session_id`` under ``entry``'s policy."""
    info = await client.create_session(session_id, policy=entry.policy)
    session = ReplayedSession(client.session(session_id), info.version)
    needs: dict[int, list[Fact]] = {}
    for fact in transcript.facts:
        needs.setdefault(fact.needed_turn, []).append(fact)
    out = Replay()
    versions: list[int] = []
    clock = 0.0
    for n, turn in enumerate(transcript.turns):
        if n:
            paused = transcript.pause_every and n % transcript.pause_every == 0
            clock += transcript.pause_s if paused else transcript.turn_gap_s
        batch: list[Event] = []
        first = True
        for event in turn:
            if event.role is Role.ASSISTANT:
                await session.append(batch)
                batch = []
                if first:
                    out.recalls += [await session.recall(f) for f in needs.get(n, [])]
                    first = False
                out.calls.append(Call(clock, tuple(cache_key(e) for e in session.window)))
                versions.append(session.version)
                clock += transcript.call_gap_s
            batch.append(event)
        await session.append(batch)
    await _attribute_passes(session.handle, out, versions)
    return out


async def _attribute_passes(handle: SessionHandle, out: Replay, versions: list[int]) -> None:
    """Count the passes, and charge each one's summarizer tokens to the next call."""
    by_call: dict[int, tuple[int, int]] = {}
    async for record in handle.compactions():
        out.passes[record.strategy] = out.passes.get(record.strategy, 0) + 1
        out.summary_input_tokens += record.summary_input_tokens
        out.summary_output_tokens += record.summary_output_tokens
        if not record.summary_input_tokens and not record.summary_output_tokens:
            continue
        index = min(bisect.bisect_left(versions, record.version_after), len(versions) - 1)
        tokens_in, tokens_out = by_call.get(index, (0, 0))
        by_call[index] = (
            tokens_in + record.summary_input_tokens,
            tokens_out + record.summary_output_tokens,
        )
    for index, (tokens_in, tokens_out) in by_call.items():
        call = out.calls[index]
        out.calls[index] = Call(call.at_s, call.window, tokens_in, tokens_out)
