"""``compaction-sidecar inspect`` against a live server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.model import Event, Role
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, running


async def run_inspect(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sidecar.cli",
        "inspect",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_inspect_shows_kept_archived_and_summary_events(tmp_path: Path) -> None:
    async with running(tmp_path, summarizer=FakeSummarizer("what happened so far")) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            await client.create_session(
                "chat",
                CompactionPolicy(
                    None, Summarize(2, 1, shadow_prompt="Summary", max_summary_tokens=1)
                ),
            )
            session = client.session("chat")
            for n in range(4):
                await session.append(
                    [
                        Event(id=f"u{n}", role=Role.USER, text=f"question {n}"),
                        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}"),
                    ]
                )
            assert (await session.compact(force=True)).compacted
        code, out = await run_inspect("chat", "--addr", address(sidecar))
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0].startswith("session chat  version ")
        assert any(line.startswith("-") and "User: question 0" in line for line in lines)
        assert any(line.startswith("S") and "what happened so far" in line for line in lines)
        assert any(line.startswith(" ") and "User: question 3" in line for line in lines)
        code, out = await run_inspect("missing", "--addr", address(sidecar))
        assert code == 1
        assert "not found" in out
