"""The context-economics benchmark: its cache rules, its transcripts, and a quick run end to end.

The run's figures are not checked (they are the benchmark's to report); its
shape is: one TARGET line per transcript and price model, the JSON, the plot.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from bench.economics.policies import Entry
from bench.economics.pricing import ANTHROPIC, GEMINI, OPENAI, Call, PriceModel, bill
from bench.economics.replay import ReplayedSession, cache_key, replay
from bench.economics.run import server_config
from bench.economics.transcripts import TRANSCRIPTS, chat, coding, ops
from sidecar.client import AsyncClient
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Role
from sidecar.server.app import start

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(
    r"^TARGET (economics_\w+): measured ratio (\d+\.\d\d|inf) \(target <= 0.5\) (PASS|MISS)$"
)
PLAIN = PriceModel("plain", read=0.1, write=1.0, output=4.0, min_prefix=1024, ttl_s=300)


def window(*sizes: int, cleared: int = -1) -> tuple[tuple[str, bool, int], ...]:
    return tuple((f"e{i}", i == cleared, size) for i, size in enumerate(sizes))


def test_a_grown_window_reads_its_old_prefix_from_the_cache() -> None:
    first, second = bill([Call(0, window(2000)), Call(10, window(2000, 500))], PLAIN, 0)
    assert (first.cached, first.uncached) == (0, 2000)
    assert (second.cached, second.uncached) == (2000, 500)
    assert second.billed == 2000 * 0.1 + 500


def test_a_change_inside_the_window_invalidates_the_cache_from_there_on() -> None:
    calls = [Call(0, window(2000, 700, 300)), Call(10, window(2000, 700, 300, cleared=1))]
    assert bill(calls, PLAIN, overhead=100)[1].cached == 2100


def test_a_prefix_under_the_minimum_or_past_the_ttl_is_not_cached() -> None:
    short = bill([Call(0, window(500)), Call(10, window(500, 900))], PLAIN, 0)
    late = bill([Call(0, window(2000)), Call(301, window(2000, 10))], PLAIN, 0)
    assert short[1].cached == 0
    assert late[1].cached == 0


def test_writes_pay_the_premium_and_hits_come_in_increments() -> None:
    anthropic = bill([Call(0, window(3000)), Call(5, window(3000, 100))], ANTHROPIC, 0)
    assert (anthropic[0].written, anthropic[0].uncached) == (3000, 0)
    assert anthropic[1].billed == 3000 * 0.1 + 100 * 1.25
    openai = bill([Call(0, window(1100)), Call(5, window(1100, 100))], OPENAI, 0)
    assert openai[1].cached == 1024  # 1,100 shared: 1,024 and no whole 128 more


def test_the_summarizer_is_billed_input_at_full_price_and_output_at_the_output_price() -> None:
    (only,) = bill([Call(0, window(100), summary_input=1000, summary_output=100)], GEMINI, 0)
    assert only.billed == 100 + 1000 + 100 * GEMINI.output


def test_output_a_policy_adds_is_billed_at_the_output_price() -> None:
    plain, asked = bill([Call(0, window(100)), Call(0, window(100), output=30)], OPENAI, 0)
    assert asked.billed - plain.billed == 30 * OPENAI.output


def test_transcripts_are_long_deterministic_and_need_what_they_planted() -> None:
    sizes = {"ops": 300, "coding": 200, "chat": 150}
    for name, (_, turns, _) in TRANSCRIPTS.items():
        assert turns >= sizes[name]
    small = [ops(40, 20_000), coding(30, 20_000), chat(40, 6_000)]
    assert [t.turns for t in small] == [t.turns for t in (ops(40, 20_000), coding(30, 20_000),
                                                          chat(40, 6_000))]  # fmt: skip
    for t in small:
        assert all(turn[0].role is Role.USER for turn in t.turns)
        for fact in t.facts:
            assert fact.planted_turn < fact.needed_turn < len(t.turns)
            planted = " ".join(e.text for e in t.turns[fact.planted_turn])
            assert fact.value in planted
            assert fact.value not in " ".join(e.text for e in t.turns[fact.needed_turn])


def test_quick_run_prints_every_target_and_writes_json_and_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "economics.json", tmp_path / "economics.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.economics",
            "--quick",
            "--json",
            str(out),
            "--plot",
            str(png),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = {m.group(1) for line in done.stdout.splitlines() if (m := LINE.match(line))}
    expected = {
        f"economics_{t}_{p}" for t in TRANSCRIPTS for p in ("anthropic", "gemini", "openai")
    }
    assert printed == expected, done.stdout
    assert "does not judge summary quality" in done.stdout
    results = json.loads(out.read_text())
    assert results["mode"] == "quick"
    assert set(results["targets"]) == expected
    for transcript in results["transcripts"].values():
        assert {"none", "adk_interval", "langchain", "anthropic_clear"} <= set(
            transcript["policies"]
        )
        for policy in transcript["policies"].values():
            assert 0.0 <= policy["prices"]["anthropic"]["cache_hit_ratio"] <= 1.0
            assert 0.0 <= policy["recall"] <= 1.0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_the_replayed_window_is_the_one_getcontext_answers(tmp_path: Path) -> None:
    """Appends extend the window the replay keeps; a pass (inline or in the background) makes
    it wait for the pass and read GetContext again."""
    sidecar = await start(server_config(tmp_path / "e.db"))
    t = ops(12, 20_000)
    policies = {
        "plain": None,
        "clearing": CompactionPolicy(TokenCount(6_000), ClearToolResults(keep_tool_uses=3)),
        "summary": CompactionPolicy(TokenCount(6_000), Summarize(max_events_to_keep=6)),
    }
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
            for name, chosen in policies.items():
                info = await client.create_session(name, policy=chosen)
                session = ReplayedSession(client.session(name), info.version)
                for turn in t.turns:
                    await session.append(list(turn))
                    served = await client.session(name).context()
                    assert [cache_key(e) for e in session.window] == [
                        cache_key(e) for e in served.events
                    ]
                    assert sum(k[2] for k in map(cache_key, session.window)) == served.token_count
                passes = [c async for c in client.session(name).compactions()]
                assert (len(passes) > 0) is (chosen is not None)
    finally:
        await sidecar.stop(0.5)


async def test_a_fact_out_of_the_window_comes_back_through_the_recall_tool_and_is_paid_for(
    tmp_path: Path,
) -> None:
    """With only the newest turn kept, every needed fact is searched for with the recall tool:
    found when the model would read its value in the tool's answer, and each search adds a
    call reading that answer (the window, the tool call and its result), its call billed."""
    sidecar = await start(server_config(tmp_path / "e.db"))
    t = ops(40, 20_000)
    tight = CompactionPolicy(TokenCount(400), TokenBudget(max_tokens=1))
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
            kept = await replay(client, "kept", t, Entry("kept", "baseline", None))
            done = await replay(client, "tight", t, Entry("tight", "ours", tight))
    finally:
        await sidecar.stop(0.5)
    needed = [f for f in t.facts if f.needed_turn < len(t.turns)]
    assert needed
    assert len(done.recalls) == len(needed)
    assert all(r.in_context and not r.searched for r in kept.recalls)
    assert not any(r.in_context for r in done.recalls)
    assert all(r.found_by_search for r in done.recalls)
    assert len(done.calls) == len(kept.calls) + len(done.recalls)
    searches = [i for i, c in enumerate(done.calls) if c.output]
    assert len(searches) == len(done.recalls)
    for i, recalled in zip(searches, done.recalls, strict=True):
        asked, answered = recalled.searched
        assert done.calls[i].window == done.calls[i - 1].window + recalled.searched
        assert done.calls[i].output == asked[2] > 0
        assert answered[2] > asked[2]
