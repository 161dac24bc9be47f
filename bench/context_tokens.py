"""Context economics of clearing: the tokens a model is sent over a whole session, per policy.

Two transcripts are replayed one event at a time through ``SessionEngine``
(SQLite, the offline extractive summarizer): the demo's SRE transcript
(``sidecar.transcript``, 40 turns) and a tool-heavy coding transcript (file
reads, greps and test runs of 0.5-4 KB each). Under one ``token_count``
trigger per transcript, four strategies compete: ``clear_tool_results``,
``token_budget``, ``summarize`` and the pipeline [clear_tool_results,
summarize]. The model is taken to be called after every user and tool event
(an agent calls it whenever it is its turn), with the active window as its
context; the figures are those calls' context tokens summed over the session,
the largest one, the final window, and the passes each policy needed (landed
compactions, by step). No target: these are reported, not bounded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench.common import Log, Outcome, Scale
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.engine.engine import SessionEngine
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.store.sqlite import SqliteStore
from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.transcript import transcript

_CODE = "def handler(request):\n    cart = load_cart(request.user)\n    return render(cart)\n"


def coding_transcript(turns: int, seed: int = 11) -> list[Event]:
    """A coding agent's session: each turn a request, 4-8 tool calls and their results."""
    rng = random.Random(seed)
    events: list[Event] = [
        Event(id="sys", role=Role.SYSTEM, text="You are a coding agent. Read before you edit.")
    ]
    for turn in range(turns):
        events.append(Event(id=f"u{turn}", role=Role.USER, text=f"fix failing test #{turn}"))
        for i in range(rng.randint(4, 8)):
            call = f"c{turn}-{i}"
            tool = rng.choice(["read_file", "grep", "run_tests"])
            args = json.dumps({"path": f"src/module_{rng.randint(1, 40)}.py"})
            output = _CODE * rng.randint(6, 45)
            events.append(
                Event(id=f"a{call}", role=Role.ASSISTANT, tool_calls=(ToolCall(call, tool, args),))
            )
            events.append(
                Event(id=f"t{call}", role=Role.TOOL, tool_results=(ToolResult(call, tool, output),))
            )
        events.append(Event(id=f"r{turn}", role=Role.ASSISTANT, text=f"fixed test #{turn}"))
    return events


def policies(threshold: int) -> dict[str, CompactionPolicy]:
    trigger = TokenCount(threshold)
    summarize = Summarize(max_events_to_keep=10, min_saved_tokens=1)
    return {
        "clear_tool_results": CompactionPolicy(trigger, ClearToolResults()),
        "token_budget": CompactionPolicy(trigger, TokenBudget(max_tokens=threshold // 2)),
        "summarize": CompactionPolicy(trigger, summarize),
        "pipeline": CompactionPolicy(trigger, Pipeline((ClearToolResults(), summarize))),
    }


async def replay(
    engine: SessionEngine, session_id: str, events: list[Event], policy: CompactionPolicy
) -> dict[str, object]:
    """One session under ``policy``: the context tokens of every model call, and the passes."""
    await engine.create_session(session_id, policy=policy)
    sent = 0
    peak = 0
    calls = 0
    for event in events:
        appended = await engine.append(session_id, [event])
        await engine.wait_idle()  # a background summary lands before the next call
        if event.role in (Role.USER, Role.TOOL):
            tokens = (await engine.store.get_session(session_id)).counters.tokens
            sent += tokens
            peak = max(peak, tokens)
            calls += 1
        del appended
    records = (await engine.store.list_compactions(session_id, page_size=1000, page_token="")).items
    passes: dict[str, int] = {}
    for record in records:
        passes[record.strategy] = passes.get(record.strategy, 0) + 1
    final = (await engine.store.get_session(session_id)).counters.tokens
    return {
        "model_calls": calls,
        "context_tokens_sent": sent,
        "peak_context_tokens": peak,
        "final_context_tokens": final,
        "passes": passes,
    }


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    turns = 40 if scale.name != "tiny" else 10
    sessions = {
        "sre": (transcript(turns), 3000),
        "coding": (coding_transcript(turns // 2), 8000),
    }
    store = SqliteStore(str(workdir / "economics.db"))
    await store.open()
    figures: dict[str, object] = {}
    try:
        engine = SessionEngine(store, summarizer=ExtractiveSummarizer())
        for name, (events, threshold) in sessions.items():
            log(f"context tokens over the {name} transcript ({len(events)} events), trigger"
                f" token_count({threshold}):")  # fmt: skip
            per_policy: dict[str, object] = {}
            for label, policy in policies(threshold).items():
                figure = await replay(engine, f"{name}-{label}", events, policy)
                per_policy[label] = figure
                log(
                    f"  {label:<18} sent {figure['context_tokens_sent']:>8} tokens over"
                    f" {figure['model_calls']} calls, peak {figure['peak_context_tokens']},"
                    f" final {figure['final_context_tokens']}, passes {figure['passes']}"
                )
            figures[name] = {"events": len(events), "threshold": threshold, **per_policy}
        await engine.close()
    finally:
        await store.close()
    return Outcome(figures=figures)
