"""``compaction-sidecar demo``: a realistic transcript through each strategy, over the wire.

The demo starts a real server on a free port (SQLite in a temporary
directory, the offline extractive summarizer), then replays the transcript
through the Python client one event at a time, as an agent would. Whenever a
compaction lands — inline with an append, or in the background for the
summarizing strategy — it prints what was archived and the compacted context
the agent would now send to its model.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from sidecar.client import AsyncClient
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
}


def abbreviated(events: tuple[Event, ...], head: int = 4, tail: int = 2) -> list[str]:
    lines = event_lines(events)
    if len(lines) <= head + tail + 1:
        return lines
    return [*lines[:head], f"  ... {len(lines) - head - tail} more ...", *lines[-tail:]]


def describe(after: int, result: CompactionResult, tokens: int) -> list[str]:
    return [
        f"after event {after:>3}: {result.strategy} archived {result.archived_event_count} events,"
        f" saved ~{result.tokens_estimated_saved} tokens; the context is now"
        f" {len(result.active_events)} events, {tokens} tokens:",
        *("    " + line for line in abbreviated(result.active_events)),
    ]


async def replay(client: AsyncClient, name: str, policy: CompactionPolicy) -> list[str]:
    """Stream the transcript into a fresh session; report every compaction."""
    await client.create_session(name, policy)
    session = client.session(name)
    events = transcript()
    out: list[str] = []
    async with session.watch() as watch:
        await watch.started()
        for n, event in enumerate(events, start=1):
            result = await session.append([event])
            landed = result.compaction
            if result.compaction_scheduled:
                update = await asyncio.wait_for(anext(watch), 30)
                landed = update if isinstance(update, CompactionResult) else None
            if landed is not None and landed.compacted:
                tokens = (await session.context()).token_count
                out.extend(describe(n, landed, tokens))
    context = await session.context()
    log = [e async for e in session.events()]
    archived = sum(e.archived for e in log)
    appended = sum(e.token_count for e in log if not e.synthetic)
    hits = [hit async for hit in session.search("a1b2c3")]
    out += [
        "",
        f"context to send next ({len(context.events)} events, {context.token_count} tokens):",
        *event_lines(context.events),
        "",
        f"archived: {archived} events, still in the log and searchable"
        f" ({len(hits)} archived events mention commit a1b2c3)",
        f"tokens: {appended} appended in total -> {context.token_count} in the next prompt",
        "",
    ]
    return out


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
        finally:
            await sidecar.stop(1.0)
    return "\n".join(out)


def main(only: str | None = None) -> None:
    print(asyncio.run(demo(only)))
