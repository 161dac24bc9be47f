"""Anthropic's ``clear_tool_uses_20250919`` as the API applies it: to the whole history, every call.

The agent keeps and sends its whole history; the API, before the model
sees a request whose input exceeds the trigger (100,000 tokens by
default), replaces the results of every tool use but the newest
``keep`` (3) with a placeholder. Nothing is stored edited, so every request
is edited anew: the cleared region grows by one result per tool use, and
the prompt cache is invalidated from the newest cleared result on (the
API's own docs warn of it, hence ``clear_at_least``, unset by default).

No server is involved: the windows are the trace's events, counted as the
server counts them (``count_event``), the cleared ones with the
placeholder's count.
"""

from __future__ import annotations

from dataclasses import replace

from bench.economics.measure import Replayed, action_of, cache_key, source_of
from bench.economics.pricing import Call
from bench.economics.retention import Judge
from bench.economics.traces import Trace
from sidecar.compaction.formatting import format_event
from sidecar.compaction.tokens import count_event
from sidecar.model import Event, Role, ToolResult

TRIGGER = 100_000
KEEP = 3
PLACEHOLDER = "[tool result cleared]"


def _cleared(event: Event) -> Event:
    results = tuple(ToolResult(r.call_id, r.name, PLACEHOLDER) for r in event.tool_results)
    edited = replace(event, tool_results=results, cleared=True)
    return replace(edited, token_count=count_event(edited))


def edit(
    history: list[Event], overhead: int, trigger: int = TRIGGER, keep: int = KEEP
) -> list[Event]:
    """The request the API builds from ``history``: old tool results cleared past the trigger."""
    if overhead + sum(e.token_count for e in history) <= trigger:
        return history
    results = [i for i, e in enumerate(history) if e.role is Role.TOOL and e.tool_results]
    clear = set(results[:-keep] if keep else results)
    return [_cleared(e) if i in clear else e for i, e in enumerate(history)]


def replay_edited(trace: Trace, trigger: int = TRIGGER, keep: int = KEEP) -> Replayed:
    """Every call of ``trace`` with the whole history sent and edited as the API edits it."""
    judge = Judge()
    judge.system(f"{trace.system} {trace.tools}")
    out = Replayed(trace.name)
    history: list[Event] = []
    clock = 0.0
    for event in trace.events:
        if event.role is Role.ASSISTANT:
            window = edit(history, trace.overhead_tokens, trigger, keep)
            out.calls.append(Call(clock, tuple(cache_key(e) for e in window)))
            clock += trace.call_gap_s
            action = action_of(event)
            texts = [format_event(e) for e in window]
            out.steps.append(judge.step(action, texts))
            out.probe(trace, event, texts)
            judge.assistant(action)
            if any(e.cleared for e in window):
                out.passes["clear_tool_uses"] = out.passes.get("clear_tool_uses", 0) + 1
        else:
            judge.source(source_of(event))
        history.append(replace(event, token_count=count_event(event)))
    return out
