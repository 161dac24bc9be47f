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
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.economics.pricing import Call, Key
from bench.economics.retention import Judge, Retention, Step, action_text, retention
from bench.economics.traces import Trace
from sidecar.client import AsyncClient, SessionHandle
from sidecar.compaction.formatting import format_event
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.compaction.token_budget import TokenBudget
from sidecar.model import Event, Role
from sidecar.server.config import ServerConfig

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
    client: AsyncClient, session_id: str, trace: Trace, policy: CompactionPolicy | None
) -> Replayed:
    """Replay ``trace`` as session ``session_id`` under ``policy`` (None: no compaction)."""
    await client.create_session(session_id, policy=policy)
    handle = client.session(session_id)
    judge = Judge()
    judge.system(f"{trace.system} {trace.tools}")
    out = Replayed(trace.name)
    versions: list[int] = []
    clock = 0.0
    for event in trace.events:
        if event.role is Role.ASSISTANT:
            context = await handle.context()
            window = tuple(cache_key(e) for e in context.events)
            out.calls.append(Call(clock, window))
            versions.append(context.version)
            clock += trace.call_gap_s
            action = action_of(event)
            out.steps.append(judge.step(action, [format_event(e) for e in context.events]))
            judge.assistant(action)
        else:
            judge.source(source_of(event))
        await _append(handle, event)
    await _attribute_passes(handle, out, versions)
    return out


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


def server_config(db: Path) -> ServerConfig:
    """The real server on a free loopback port over SQLite file ``db``, with the extractive
    summarizer and no default policy (a session without one never compacts)."""
    return replace(
        ServerConfig(),
        listen="127.0.0.1:0",
        store=f"sqlite:///{db}",
        default_policy="none",
        summarizer="extractive",
        shutdown_grace_s=1.0,
        log_level="WARNING",
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
) -> list[Replayed]:
    """Every trace under ``policy``, one session each (named ``<label>/<trace>``)."""
    return [await replay_trace(client, f"{label}/{t.name}", t, policy) for t in traces]
