"""``compaction-sidecar demo``: a realistic transcript through each strategy, over the wire.

The demo starts a real server on a free port (SQLite in a temporary
directory, the offline extractive summarizer), then replays the transcript
through the Python client one event at a time, as an agent would. Whenever a
compaction lands — inline with an append, or in the background for the
summarizing strategy — it prints what was archived or cleared and the
compacted context the agent would now send to its model. Clearing tool
results and a clear → summarize pipeline come after the four window and
summary strategies; the last session's newest compaction is then restored,
to show that every compaction can be undone.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from sidecar.client import AsyncClient
from sidecar.client.aio import SessionHandle
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount, TurnCount
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import CompactionResult, Event
from sidecar.render import LEGEND, event_lines
from sidecar.server.app import start
from sidecar.server.config import ServerConfig
from sidecar.transcript import transcript

POLICIES: dict[str, CompactionPolicy] = {
    "sliding_window": CompactionPolicy(TurnCount(12), SlidingWindow(max_events=20)),
    "turn_window": CompactionPolicy(TurnCount(12), TurnWindow(max_turns=6)),
    "token_budget": CompactionPolicy(TokenCount(3000), TokenBudget(max_tokens=1500)),
    "summarize": CompactionPolicy(
        TokenCount(3000), Summarize(max_events_to_keep=12, overlap=2, max_summary_tokens=300)
    ),
    # Tool results are most of an agent's tokens: cleared in place, calls kept paired.
    "clear_tool_results": CompactionPolicy(TokenCount(3000), ClearToolResults(keep_tool_uses=3)),
    # The cheap step first; the summary only while the clearing did not bring it under.
    "pipeline": CompactionPolicy(
        TokenCount(3000),
        Pipeline(
            (
                ClearToolResults(keep_tool_uses=3),
                Summarize(max_events_to_keep=12, overlap=2, max_summary_tokens=300),
            )
        ),
    ),
}


def abbreviated(events: tuple[Event, ...], head: int = 4, tail: int = 2) -> list[str]:
    lines = event_lines(events)
    if len(lines) <= head + tail + 1:
        return lines
    return [*lines[:head], f"  ... {len(lines) - head - tail} more ...", *lines[-tail:]]


def trail_lines(events: tuple[Event, ...]) -> list[str]:
    """The newest summary's ``Identifiers:`` trail, whole: what the summary kept verbatim."""
    summaries = [e for e in events if e.synthetic and "Identifiers:" in e.text]
    if not summaries:
        return []
    trail = summaries[-1].text[summaries[-1].text.index("Identifiers:") :].splitlines()[0]
    return [f"the summary keeps its identifiers verbatim: {trail}"]


def describe(after: int, result: CompactionResult, tokens: int) -> list[str]:
    cleared = f", cleared {len(result.cleared_ids)}" if result.cleared_ids else ""
    return [
        f"after event {after:>3}: {result.strategy} archived {result.archived_event_count} events"
        f"{cleared}, saved ~{result.tokens_estimated_saved} tokens; the context is now"
        f" {len(result.active_events)} events, {tokens} tokens:",
        *("    " + line for line in abbreviated(result.active_events)),
    ]


async def replay(client: AsyncClient, name: str, policy: CompactionPolicy) -> list[str]:
    """Stream the transcript into a fresh session; report every compaction."""
    await client.create_session(name, policy)
    session = client.session(name)
    events = transcript()
    out: list[str] = []
    shown: set[str] = set()  # compactions printed: the watch delivers inline ones too
    async with session.watch() as watch:
        await watch.started()
        for n, event in enumerate(events, start=1):
            result = await session.append([event])
            landed = [result.compaction] if result.compaction is not None else []
            if result.compaction_scheduled:
                # The background pass's result is the first one the watch has not shown.
                while True:
                    update = await asyncio.wait_for(anext(watch), 30)
                    if isinstance(update, CompactionResult) and update.compaction_id not in {
                        *shown,
                        *(c.compaction_id for c in landed),
                    }:
                        landed.append(update)
                        break
            for compaction in landed:
                if compaction.compacted:
                    shown.add(compaction.compaction_id)
                    tokens = (await session.context()).token_count
                    out.extend(describe(n, compaction, tokens))
    context = await session.context()
    log = [e async for e in session.events()]
    archived = sum(e.archived for e in log)
    appended = sum(e.token_count for e in log if not e.synthetic)
    hits = [hit async for hit in session.search("a1b2c3")]
    out += [
        "",
        f"context to send next ({len(context.events)} events, {context.token_count} tokens):",
        *event_lines(context.events),
        *trail_lines(context.events),
        "",
        f"archived: {archived} events, still in the log and searchable"
        f" ({len(hits)} archived events mention commit a1b2c3)",
        f"tokens: {appended} appended in total -> {context.token_count} in the next prompt",
        "",
    ]
    return out


async def undo(session: SessionHandle) -> list[str]:
    """Restore the session's newest compaction: what it took out comes back, in place."""
    history = [record async for record in session.compactions()]
    before = await session.context()
    result = await session.restore()
    after = await session.context()
    newest = history[0]
    return [
        "=" * 100,
        f"restore: undo the newest compaction of session {session.session_id!r}",
        "=" * 100,
        "history, newest first: "
        + ", ".join(f"{r.strategy} ({r.cause.value})" for r in history[:4])
        + (f" and {len(history) - 4} more" if len(history) > 4 else ""),
        f"restored {newest.strategy} {newest.compaction_id[:8]}: {len(result.restored_ids)} events"
        f" back as they were; the context went from {len(before.events)} events,"
        f" {before.token_count} tokens to {len(after.events)} events, {after.token_count} tokens:",
        *("    " + line for line in abbreviated(after.events)),
        "",
    ]


async def demo(only: str | None = None) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        config = replace(
            ServerConfig(),
            listen="127.0.0.1:0",
            store=f"sqlite:///{Path(tmp) / 'demo.db'}",
            summarizer="extractive",
            default_policy="none",
        )
        sidecar = await start(config)
        out = [
            f"compaction-sidecar serving on 127.0.0.1:{sidecar.port} (SQLite in {tmp})",
            f"replaying a {len(transcript())}-event, 40-turn SRE agent session"
            " through each strategy, one append at a time",
            LEGEND,
            "",
        ]
        try:
            async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
                for name, policy in POLICIES.items():
                    if only and name != only:
                        continue
                    out += [
                        "=" * 100,
                        f"strategy {name}: {json.dumps(policy.to_dict())}",
                        "=" * 100,
                    ]
                    out += await replay(client, name, policy)
                if only in (None, "pipeline"):
                    out += await undo(client.session("pipeline"))
        finally:
            await sidecar.stop(1.0)
    return "\n".join(out)


def main(only: str | None = None) -> None:
    print(asyncio.run(demo(only)))
