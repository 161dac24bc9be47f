"""Replay traces through the real server under one policy: what each step was sent, and kept.

One event per AppendEvents, in the trace's order; before each assistant
event (the answer of a model call) the replay reads GetContext, and that
window is the call's: the prompt the provider bills (after the pinned
system prompt and tools) and the context the judge (``bench.economics.retention``)
checks the step's action against. A pass an append schedules in the
background is waited for first (a trigger-less Compact waits for the pass in
flight and runs none of its own), as an agent reading its context after
each append would see it. The passes' summarizer tokens are charged to the
first call made after each pass landed.

With a ``RecallRule`` (``bench.economics.recall``), a step whose context
lacks an identifier its action needs first searches with the product's
recall tool: each search is a call of its own, and its tool call and answer
are appended to the session before the step's own call reads its context.

The server under test summarizes with ``CalibratedSummarizer``: the
extractive rule at the length every fake summary in the benchmark has
(``bench.economics.summary_size``).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.economics.fake_summarizer import CalibratedSummarizer
from bench.economics.pricing import Call, Key
from bench.economics.probes import outcome
from bench.economics.recall import TOOL, RecallRule
from bench.economics.retention import Judge, Retention, Step, action_text, retention
from bench.economics.summary_size import RATIO
from bench.economics.traces import Trace
from sidecar.adapters.recall import arecall
from sidecar.client import AsyncClient, SessionHandle
from sidecar.compaction.formatting import format_event
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.compaction.token_budget import TokenBudget
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.server.app import Sidecar, start
from sidecar.server.config import ServerConfig
from sidecar.tokenizer import default_estimator

# Compact with no trigger and no force runs nothing: it only waits for the pass in flight.
_WAIT = CompactionPolicy(trigger=None, strategy=TokenBudget())


@dataclass(slots=True)
class Replayed:
    """One trace under one policy: its calls (as the cache sees them), judged steps, passes."""

    trace: str
    calls: list[Call] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    passes: dict[str, int] = field(default_factory=dict)
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    searches: int = 0
    """Recall searches made (each a call of its own in ``calls``)."""
    recalled: int = 0
    """Identifier uses held only because a search brought them back."""
    probes: dict[str, int] = field(default_factory=dict)
    """Planted-fact probes by outcome (``bench.economics.probes.OUTCOMES``)."""
    probe_steps: dict[int, str] = field(default_factory=dict)
    """Each probe's outcome by the index of the step that answers it."""
    failed_at: int | None = None
    """The call at which the prompt passed the model's window and the agent stopped."""

    def probe(
        self, trace: Trace, event: Event, context: Sequence[str], before: Sequence[str] = ()
    ) -> None:
        """Count the outcome of ``trace``'s probe that ``event`` answers, if it answers one,
        against the texts of its ``context`` (``before``: before the agent's searches)."""
        for check in trace.probes:
            if check.answer_id == event.id:
                found = outcome(check, context, before)
                self.probes[found] = self.probes.get(found, 0) + 1
                self.probe_steps[len(self.steps) - 1] = found

    @property
    def retention(self) -> Retention:
        return retention(self.steps)

    @property
    def conversation_tokens(self) -> int:
        """Tokens of every call's window: the context less the pinned system prompt and tools."""
        return sum(c.window_tokens for c in self.calls)


def cache_key(event: Event) -> Key:
    """The event as the prompt cache compares it: id, cleared flag, token count."""
    return (event.id, event.cleared, event.token_count)


def action_of(event: Event) -> str:
    """What an assistant event does: its text and its tool calls' argument values."""
    return action_text(event.text, [c.arguments_json for c in event.tool_calls])


def source_of(event: Event) -> str:
    """The text a user message or tool result brings into the session."""
    return " ".join([event.text, *(r.content for r in event.tool_results)])


async def _append(handle: SessionHandle, event: Event) -> None:
    ack = await handle.append([event])
    if ack.compaction_scheduled:
        await handle.compact(_WAIT)


async def replay_trace(
    client: AsyncClient,
    session_id: str,
    trace: Trace,
    policy: CompactionPolicy | None,
    recall: RecallRule | None = None,
) -> Replayed:
    """Replay ``trace`` as session ``session_id`` under ``policy`` (None: no compaction),
    searching by ``recall``'s rule before a step that lacks what it needs (None: never).

    A call whose prompt (pinned overhead and window) passes the model's window fails, as
    the provider would refuse it: the agent stops there (``failed_at``), and every later
    step is judged as sent nothing."""
    await client.create_session(session_id, policy=policy)
    handle = client.session(session_id)
    judge = Judge()
    judge.system(f"{trace.system} {trace.tools}")
    out = Replayed(trace.name)
    versions: list[int] = []
    clock = 0.0
    for event in trace.events:
        if event.role is not Role.ASSISTANT:
            judge.source(source_of(event))
        elif out.failed_at is None:
            action = action_of(event)
            context = await handle.context()
            texts = [format_event(e) for e in context.events]
            searched: list[str] = []
            if recall is not None:
                before = judge.held(action, texts)
                for query in recall.queries(event, texts, judge.used(action) - before):
                    if judge.held(action, texts) == judge.used(action):
                        break
                    said = f"{TOOL}({json.dumps({'query': query})})"  # the call it answers with
                    out.calls.append(Call(clock, _window(context.events), output=_count(said)))
                    versions.append(context.version)
                    clock += trace.call_gap_s
                    searched = searched or texts
                    await _search(client, handle, session_id, query, recall, len(out.calls))
                    out.searches += 1
                    context = await handle.context()
                    texts = [format_event(e) for e in context.events]
                out.recalled += len(judge.held(action, texts) - before)
            call = Call(clock, _window(context.events))
            if over_window(trace, call):
                out.failed_at = len(out.calls)
                texts = []
            else:
                out.calls.append(call)
                versions.append(context.version)
                clock += trace.call_gap_s
            out.steps.append(judge.step(action, texts))
            out.probe(trace, event, texts, searched)
            judge.assistant(action)
        else:  # the agent failed: what it would have done is judged as sent nothing
            action = action_of(event)
            out.steps.append(judge.step(action, ()))
            out.probe(trace, event, ())
            judge.assistant(action)
        if out.failed_at is None:
            await _append(handle, event)
    await _attribute_passes(handle, out, versions)
    return out


def over_window(trace: Trace, call: Call) -> bool:
    """Whether ``call``'s prompt, the pinned overhead and its window, passes the model's."""
    return trace.overhead_tokens + call.window_tokens > trace.window_tokens


def stop_at_window(trace: Trace, run: Replayed) -> Replayed:
    """``run`` (a peer's, one call per step, replayed whole by its own code) as the provider
    would have let it go: its calls up to the first over the model's window; that step and
    every later one judged as sent nothing, their probes missing."""
    first = next((i for i, c in enumerate(run.calls) if over_window(trace, c)), None)
    if first is None:
        return run
    steps = run.steps[:first] + [replace(s, held=frozenset()) for s in run.steps[first:]]
    probes: dict[str, int] = {}
    for at, found in run.probe_steps.items():
        found = found if at < first else "missing"
        probes[found] = probes.get(found, 0) + 1
    kept = run.calls[:first]
    return replace(
        run,
        calls=kept,
        steps=steps,
        probes=probes,
        failed_at=first,
        summary_input_tokens=sum(c.summary_input for c in kept),
        summary_output_tokens=sum(c.summary_output for c in kept),
    )


def _window(events: Sequence[Event]) -> tuple[Key, ...]:
    return tuple(cache_key(e) for e in events)


def _count(text: str) -> int:
    return default_estimator().count(text)


async def _search(
    client: AsyncClient,
    handle: SessionHandle,
    session_id: str,
    query: str,
    rule: RecallRule,
    n: int,
) -> None:
    """One recall: the tool's answer for ``query``, appended as the agent's call and result."""
    answer = await arecall(client, session_id, query, rule.settings)
    call = ToolCall(f"{session_id}-recall-{n}", TOOL, json.dumps({"query": query}))
    await _append(handle, Event(id=f"recall-{n}-call", role=Role.ASSISTANT, tool_calls=(call,)))
    result = ToolResult(call.id, TOOL, answer)
    await _append(handle, Event(id=f"recall-{n}-result", role=Role.TOOL, tool_results=(result,)))


async def _attribute_passes(handle: SessionHandle, out: Replayed, versions: list[int]) -> None:
    """Count the passes, and charge each one's summarizer tokens to the next call."""
    by_call: dict[int, tuple[int, int]] = {}
    async for record in handle.compactions():
        out.passes[record.strategy] = out.passes.get(record.strategy, 0) + 1
        out.summary_input_tokens += record.summary_input_tokens
        out.summary_output_tokens += record.summary_output_tokens
        if not (record.summary_input_tokens or record.summary_output_tokens) or not versions:
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


async def bench_server(db: Path, ratio: float = RATIO) -> Sidecar:
    """The server ``server_config`` describes, started, summarizing with ``CalibratedSummarizer``
    at ``ratio`` (``summary_size``)."""
    return await start(server_config(db), summarizer=CalibratedSummarizer(ratio))


def server_config(db: Path) -> ServerConfig:
    """The real server on a free loopback port over SQLite file ``db``, with the extractive
    summarizer and no default policy (a session without one never compacts), counting every
    append exactly: the bill is read from the windows' token counts, and an estimate is
    not what the provider would bill (the decisions are the same either way)."""
    return replace(
        ServerConfig(),
        listen="127.0.0.1:0",
        store=f"sqlite:///{db}",
        default_policy="none",
        summarizer="extractive",
        shutdown_grace_s=1.0,
        log_level="WARNING",
        token_counting="on_append",
    )


def as_policy(policy: CompactionPolicy | Mapping[str, Any] | None) -> CompactionPolicy | None:
    """A policy as given, or parsed from its dict form (``CompactionPolicy.to_dict``)."""
    if policy is None or isinstance(policy, CompactionPolicy):
        return policy
    return policy_from_dict(dict(policy))


async def replay_all(
    client: AsyncClient,
    traces: Sequence[Trace],
    policy: CompactionPolicy | None,
    label: str,
    recall: RecallRule | None = None,
) -> list[Replayed]:
    """Every trace under ``policy``, one session each (named ``<label>/<trace>``), recalling
    by ``recall``'s rule (None: never)."""
    return [await replay_trace(client, f"{label}/{t.name}", t, policy, recall) for t in traces]
