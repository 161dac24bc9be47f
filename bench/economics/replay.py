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
text (a cleared result shows its placeholder), or else as the agent would
get it back, through the ``recall`` tool the adapters give it
(``sidecar.adapters.recall``: SearchEvents' top 5 for the fact's topic, the
active window included since cleared originals are searchable there, cut to
the tool's 1,000-token answer): found when the value is in the answer the
model reads, its match marks aside. A search is paid for whether it finds
the fact or not: the turn's first call asks for the tool (the call's tokens
billed as output) and one more call reads the answer (the window, the call
and the answer as its prompt). The two events are not kept in the window
afterwards, which flatters a policy that searches by the tokens later calls
would carry.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

from bench.economics.policies import Entry
from bench.economics.pricing import Call, Key
from bench.economics.transcripts import Fact, Transcript
from sidecar.adapters.recall import RecallSettings, arecall
from sidecar.client import AsyncClient, SessionHandle
from sidecar.compaction.formatting import format_event
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.model import Event, Role, ToolCall, ToolResult

SEARCH_TOP = 5
RECALL = RecallSettings(max_hits=SEARCH_TOP, include_active=True)
# Compact with no trigger and no force runs nothing: it only waits for the pass in flight.
_WAIT = CompactionPolicy(trigger=None, strategy=TokenBudget())


@dataclass(frozen=True, slots=True)
class Recall:
    """Whether a needed fact was in the context, or found by search, at the turn needing it.

    ``searched``: the recall tool's call and answer as the cache sees them
    (empty when the fact was in the context and no search was made).
    """

    fact: Fact
    in_context: bool
    found_by_search: bool
    searched: tuple[Key, ...] = ()


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

    async def recall(self, client: AsyncClient, fact: Fact) -> Recall:
        if any(fact.value in _visible(e) for e in self.window):
            return Recall(fact, True, False)
        answer = await arecall(client, self.handle.session_id, fact.query, RECALL)
        call = ToolCall(f"recall-{fact.name}", "recall", f'{{"query": "{fact.query}"}}')
        asked = Event(id=f"recall-{fact.name}", role=Role.ASSISTANT, tool_calls=(call,))
        result = ToolResult(call.id, "recall", answer)
        read = Event(id=f"recall-{fact.name}-result", role=Role.TOOL, tool_results=(result,))
        keys = tuple(cache_key(replace(e, token_count=count_event(e))) for e in (asked, read))
        # Matched terms come marked (``db-**replica**-90``); the model reads through the marks.
        return Recall(fact, False, fact.value in answer.replace("**", ""), keys)


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
                recalls = []
                if first:
                    recalls = [await session.recall(client, f) for f in needs.get(n, [])]
                    out.recalls += recalls
                    first = False
                window = tuple(cache_key(e) for e in session.window)
                out.calls.append(Call(clock, window))
                versions.append(session.version)
                clock += transcript.call_gap_s
                for searched in (r.searched for r in recalls if r.searched):
                    # The call asked for the tool; one more call reads its answer.
                    out.calls.append(Call(clock, window + searched, output=searched[0][2]))
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
        out.calls[index] = replace(call, summary_input=tokens_in, summary_output=tokens_out)
