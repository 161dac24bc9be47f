"""The context-economics benchmark: its cache rules, its traces, its replay, a quick run end to end.

The run's figures are not checked (they are the benchmark's to report); its
shape is: one TARGET line per trace family and price model, the JSON, the plot.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.economics import run
from bench.economics.adk_peer import replay_adk
from bench.economics.anthropic_edit import PLACEHOLDER, edit, replay_edited
from bench.economics.langchain_peer import replay_langchain
from bench.economics.long_task import coding_task
from bench.economics.measure import replay_trace, server_config, stop_at_window
from bench.economics.policies import peers
from bench.economics.pricing import GPT_4O, GPT_56, SONNET_45, Call, PriceModel, bill
from bench.economics.run import QUICK_STEPS
from bench.economics.score import measure_policy, score
from bench.economics.traces import SPLITS, Trace, tau_airline
from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Boundary, Event, Role, ToolCall, ToolResult
from sidecar.server.app import start
from tests.bench_events import reads

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(
    r"^TARGET (economics_\w+): measured ratio (\d+\.\d\d|inf) \(target <= 0.5\) (PASS|MISS)$"
)
AUTO = replace(GPT_4O, name="auto", read=0.1, increment=1)
TRAIL = "identifier_trail_tau_airline"


def window(*sizes: int, cleared: int = -1) -> tuple[tuple[str, bool, int], ...]:
    return tuple((f"e{i}", i == cleared, size) for i, size in enumerate(sizes))


def test_automatic_caching_reads_the_prefix_shared_with_an_earlier_call() -> None:
    first, second = bill([Call(0, window(2000)), Call(10, window(2000, 500))], AUTO, 0)
    assert (first.cached, first.uncached) == (0, 2000)
    assert (second.cached, second.uncached) == (2000, 500)
    assert second.billed == 2000 * 0.1 + 500


def test_a_change_inside_the_window_invalidates_the_cache_from_there_on() -> None:
    calls = [Call(0, window(2000, 700, 300)), Call(10, window(2000, 700, 300, cleared=1))]
    assert bill(calls, AUTO, overhead=100)[1].cached == 2100


def test_a_prefix_under_the_minimum_or_past_the_ttl_is_not_cached() -> None:
    short = bill([Call(0, window(500)), Call(10, window(500, 900))], AUTO, 0)
    late = bill([Call(0, window(2000)), Call(301, window(2000, 10))], AUTO, 0)
    assert short[1].cached == 0
    assert late[1].cached == 0
    # gpt-5.6 keeps its cache 30 minutes.
    assert bill([Call(0, window(2000)), Call(1000, window(2000, 10))], GPT_56, 0)[1].cached


def test_openai_hits_come_in_128_token_steps_and_gpt_5_6_pays_for_writes() -> None:
    openai = bill([Call(0, window(1100)), Call(5, window(1100, 100))], GPT_4O, 0)
    assert openai[1].cached == 1024  # 1,100 shared: 1,024 and no whole 128 more
    first = bill([Call(0, window(3000))], GPT_56, 0)[0]
    assert (first.written, first.billed) == (3000, 3000 * 1.25)


def test_anthropic_reads_only_entries_an_earlier_breakpoint_wrote_within_20_blocks() -> None:
    """The system prompt's entry survives a change in the window; a grown window hits the last
    call's entry unless more than 20 blocks were added since."""
    sizes = [100] * 30
    grown = bill([Call(0, window(*sizes[:5])), Call(5, window(*sizes[:8]))], SONNET_45, 2000)
    assert grown[1].cached == 2000 + 500
    assert grown[1].written == 300
    far = bill([Call(0, window(*sizes[:5])), Call(5, window(*sizes[:30]))], SONNET_45, 2000)
    assert far[1].cached == 2000  # the old entry is 25 blocks back: only the system prompt hits
    changed = bill([Call(0, window(*sizes[:5])), Call(5, window(*sizes[:5], cleared=0))],
                   SONNET_45, 2000)  # fmt: skip
    assert changed[1].cached == 2000
    small = bill([Call(0, window(100)), Call(5, window(100, 100))], SONNET_45, 500)
    assert small[1].cached == 0
    assert small[1].written == 0


def test_a_cheap_summarizer_is_priced_at_its_own_list_prices() -> None:
    call = Call(0, window(100), summary_input=1000, summary_output=100)
    (agent,) = bill([call], AUTO, 0)
    (cheap,) = bill([call], AUTO, 0, summarizer_usd=(0.25, 1.0))
    assert agent.summarizer == 1000 + 100 * AUTO.output
    assert cheap.summarizer == 1000 * 0.25 / AUTO.input_usd + 100 * 1.0 / AUTO.input_usd


def test_tau_bench_splits_are_disjoint_tasks_with_tool_results_answering_their_calls() -> None:
    dev, test = tau_airline("dev", (0,)), tau_airline("test", (0,))
    assert len(dev) == len(test) == 25
    assert {t.name.split("-")[1] for t in dev} == {str(i) for i in SPLITS["dev"]}
    for t in dev + test:
        assert t.system.startswith("# Airline Agent Policy")
        assert t.overhead_tokens > 2000  # the policy and the 14 tool schemas
        calls = [c.id for e in t.events for c in e.tool_calls]
        assert len(calls) == len(set(calls))
        made = set(calls)
        assert all(r.call_id in made for e in t.events for r in e.tool_results)


def test_the_coding_task_is_one_long_deterministic_turn_with_heavy_reads() -> None:
    task = coding_task(3)
    assert task == coding_task(3)
    assert [e.role for e in task.events].count(Role.USER) == 1
    steps = sum(bool(e.tool_calls) for e in task.events)
    assert 40 <= steps <= 80
    assert 5_000 <= task.overhead_tokens <= 16_000
    reads = [count_event(e) for e in task.events if e.tool_results and
             e.tool_results[0].name == "read_file"]  # fmt: skip
    assert min(reads) >= 900
    assert max(reads) <= 9_000
    assert len(coding_task(3, QUICK_STEPS).events) == 2 + 2 * QUICK_STEPS


def _tool_loop(n: int, size: int) -> list[Event]:
    events: list[Event] = [Event(id="u", role=Role.USER, text="go")]
    for i in range(n):
        call = ToolCall(f"c{i}", "read", "{}")
        events.append(Event(id=f"a{i}", role=Role.ASSISTANT, tool_calls=(call,)))
        result = ToolResult(call.id, "read", "x " * size)
        events.append(replace(Event(id=f"t{i}", role=Role.TOOL, tool_results=(result,))))
    return [replace(e, token_count=count_event(e)) for e in events]


def test_anthropic_clearing_edits_the_whole_history_past_the_trigger_keeping_3_uses() -> None:
    history = _tool_loop(6, 1000)
    assert edit(history, 0, trigger=100_000) == history
    edited = edit(history, 0, trigger=1000)
    cleared = [e.id for e in edited if e.cleared]
    assert cleared == ["t0", "t1", "t2"]
    assert all(r.content == PLACEHOLDER for e in edited if e.cleared for r in e.tool_results)
    assert edited[-1] == history[-1]
    (peer,) = [p for p in peers() if p.edit == "anthropic_clear"]
    assert peer.policy is None


async def test_the_judge_sees_the_window_getcontext_answers(tmp_path: Path) -> None:
    """An id from an early tool result, used by the last step: held with no compaction, missing
    once a token budget has dropped that result, and every call's window is GetContext's."""
    events = [
        Event(id="u", role=Role.USER, text="find reservation"),
        Event(id="a0", role=Role.ASSISTANT, tool_calls=(ToolCall("c0", "find", "{}"),)),
        Event(id="t0", role=Role.TOOL, tool_results=(ToolResult("c0", "find", "ZFA04Y"),)),
    ]
    events += reads(1, 6)
    events.append(Event(id="a9", role=Role.ASSISTANT,
                        tool_calls=(ToolCall("c9", "cancel", '{"id": "ZFA04Y"}'),)))  # fmt: skip
    trace = Trace("t", "", "", tuple(events), 0)
    tight = CompactionPolicy(
        TokenCount(600), TokenBudget(max_tokens=400, boundary=Boundary.TOOL_PAIR)
    )
    sidecar = await start(server_config(tmp_path / "e.db"))
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
            kept = await replay_trace(client, "kept", trace, None)
            cut = await replay_trace(client, "cut", trace, tight)
            served = await client.session("cut").context()
    finally:
        await sidecar.stop(0.5)
    assert kept.steps[-1].used == {"zfa04y"}
    assert kept.steps[-1].held == {"zfa04y"}
    assert cut.steps[-1].used == {"zfa04y"}
    assert cut.steps[-1].held == set()
    assert cut.passes
    assert sum(cut.passes.values()) >= 1
    assert len(cut.calls) == len(kept.calls) == 7
    assert cut.calls[-1].window_tokens < kept.calls[-1].window_tokens
    # The last call's window is what GetContext answered before the last event was appended.
    assert [k[0] for k in cut.calls[-1].window] == [e.id for e in served.events][:-1]
    figures = score([trace, trace], [kept, cut], (SONNET_45,))
    assert (figures["identifiers_used"], figures["identifiers_held"]) == (2, 1)


def test_quick_run_prints_every_target_and_writes_json_and_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "economics.json", tmp_path / "economics.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.economics",
            "--quick",
            "--jobs",
            "2",
            "--json",
            str(out),
            "--plot",
            str(png),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = {m.group(1) for line in done.stdout.splitlines() if (m := LINE.match(line))}
    results = json.loads(out.read_text())
    assert results["mode"] == "quick"
    expected = {
        f"economics_{f}_{p}".replace("-", "_").replace(".", "_")
        for f in results["traces"]
        for p in results["price_models"]
    }
    # --jobs 2 ran each family in a process of its own; merged in the families' order.
    assert list(results["traces"]) == ["tau-airline", "coding-task", "synthetic-chat"]
    assert printed == expected == set(results["targets"]) - {TRAIL}, done.stdout
    (trail,) = [line for line in done.stdout.splitlines() if line.startswith(f"TARGET {TRAIL}:")]
    assert re.match(rf"^TARGET {TRAIL}: measured ratio (\d+\.\d\d|inf) \(target <= 1\) ", trail)
    assert "summarize_trail" in results["traces"]["tau-airline"]["test"]
    for family in results["traces"].values():
        assert {"none", "adk_interval", "langchain_summarization", "anthropic_clear"} <= set(
            family["test"]
        )
        assert set(family["chosen"]) <= set(family["dev"])
        for policy in family["test"].values():
            assert 0.0 <= policy["retention"] <= 1.0
            for bill_ in policy["prices"].values():
                assert 0.0 <= bill_["cache_hit_ratio"] <= 1.0
    assert all(p["source"].startswith("https://") for p in results["price_models"].values())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_langchain_peers_run_create_agent_and_bill_the_requests_it_really_sent() -> None:
    """SummarizationMiddleware (4,000 tokens, keep 20 messages) summarizes a long tool loop: its
    later requests carry the summary and the last 20 messages, and its summary calls are billed;
    ContextEditingMiddleware under its 100,000-token trigger sends the whole history."""
    task = coding_task(0, 20)
    assistants = [e for e in task.events if e.role is Role.ASSISTANT]
    summarized = replay_langchain(task, "langchain_summarization")
    whole = replay_langchain(task, "langchain_clear")
    assert len(summarized.calls) == len(whole.calls) == len(assistants)
    assert summarized.passes["summarization"] >= 1
    assert summarized.summary_input_tokens > summarized.summary_output_tokens > 0
    assert sum(c.summary_input for c in summarized.calls) == summarized.summary_input_tokens
    last = summarized.calls[-1].window
    assert len(last) <= 21  # the summary and the 20 kept messages
    sent = replay_edited(task, trigger=10**9).calls  # the whole history, nothing cleared
    assert [[k[1:] for k in c.window] for c in whole.calls] == [
        [k[1:] for k in c.window] for c in sent
    ]
    assert summarized.retention.used == whole.retention.used
    assert whole.retention.ratio == 1.0


def test_price_models_name_their_source_and_date_and_keep_the_issues_cache_rules() -> None:
    """Issue 33's rules, per model: (cached read, cache write, minimum prefix, TTL, breakpoints)."""
    from bench.economics.pricing import LOOKBACK_BLOCKS, PRICE_MODELS

    rules = {p.name: (p.read, p.write, p.min_prefix, p.ttl_s, p.breakpoints) for p in PRICE_MODELS}
    assert rules == {
        "claude-sonnet-4.5": (0.1, 1.25, 1024, 300.0, True),
        "claude-opus-4.5": (0.1, 1.25, 4096, 300.0, True),
        "gpt-4o": (0.5, 1.0, 1024, 300.0, False),
        "gpt-5.1": (0.1, 1.0, 1024, 300.0, False),
        "gpt-5.6": (0.1, 1.25, 1024, 1800.0, False),
        "gemini-2.5-flash": (0.1, 1.0, 2048, 300.0, False),
        "gemini-3.5-flash": (0.1, 1.0, 4096, 300.0, False),
    }
    assert LOOKBACK_BLOCKS == 20
    for p in PRICE_MODELS:
        assert isinstance(p, PriceModel)
        assert p.source.startswith("https://")
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.checked)


def test_the_economics_pages_tables_are_the_committed_results_and_need_their_markers(
    tmp_path: Path,
) -> None:
    from bench.economics import table

    results = ROOT / "bench" / "results-economics.json"
    assert table.DEFAULT_PAGE == ROOT / "docs" / "economics.md"
    assert table.main([str(results), "--check"]) == 0  # docs/economics.md is current
    bare = tmp_path / "economics.md"
    bare.write_text("# no markers\n")
    with pytest.raises(ValueError, match="markers not found"):
        table.main([str(results), "--page", str(bare)])
    marked = tmp_path / "MARKED.md"
    marked.write_text(f"head\n{table.START}\nold\n{table.END}\ntail\n")
    assert table.main([str(results), "--page", str(marked), "--check"]) == 1
    assert table.main([str(results), "--page", str(marked)]) == 0
    text = marked.read_text()
    assert text.startswith(f"head\n{table.START}\n")
    assert text.endswith(f"{table.END}\ntail\n")
    assert "old" not in text
    assert "| `none` |" in text


def test_a_rerun_of_one_family_replaces_its_figures_and_targets_and_is_named() -> None:
    from bench.economics import table

    def run(mode: str, families: dict[str, int], seconds: float) -> dict[str, object]:
        return {
            "mode": mode,
            "command": f"python -m bench.economics ({seconds:g})",
            "total_s": seconds,
            "price_models": {"gpt-4o": {}},
            "traces": {name: {"figure": value} for name, value in families.items()},
            "targets": {
                f"economics_{name.replace('-', '_')}_gpt_4o": {"ratio": value}
                for name, value in families.items()
            },
        }

    earlier = run("full", {"tau-airline": 1, "coding-task": 2}, 2640)
    merged = table.merge(earlier, run("full", {"tau-airline": 3}, 900))
    assert merged["traces"] == {"tau-airline": {"figure": 3}, "coding-task": {"figure": 2}}
    assert merged["targets"] == {
        "economics_tau_airline_gpt_4o": {"ratio": 3},
        "economics_coding_task_gpt_4o": {"ratio": 2},
    }
    assert merged["reruns"] == [
        {"families": ["tau-airline"], "command": "python -m bench.economics (900)", "total_s": 900}
    ]
    assert merged["total_s"] == 2640  # the first run's own time
    with pytest.raises(ValueError, match="same mode"):
        table.merge(earlier, run("quick", {"tau-airline": 3}, 60))


def test_measure_policy_takes_a_policy_dict_and_answers_retention_and_bills() -> None:
    """The entry point other work measures its policies with: a dict as CompactionPolicy.to_dict
    gives, any traces, a fresh server; a policy that cuts reports less retention than none."""
    task = coding_task(1, 12)
    cut = CompactionPolicy(
        TokenCount(3000), TokenBudget(max_tokens=500, boundary=Boundary.TOOL_PAIR)
    )
    kept = measure_policy(None, [task], prices=(SONNET_45,))
    measured = measure_policy(cut.to_dict(), [task], prices=(SONNET_45,))
    assert kept["retention"] == 1.0
    assert measured["identifiers_used"] == kept["identifiers_used"] > 0
    assert measured["retention"] < 1.0
    assert measured["passes"]["token_budget"] >= 1
    assert measured["conversation_tokens"] < kept["conversation_tokens"]
    assert set(measured["prices"]) == {SONNET_45.name}


async def test_adk_peer_runs_adk_own_runner_and_bills_the_requests_it_really_sent() -> None:
    """ADK's Runner with EventsCompactionConfig(compaction_interval=3, overlap_size=1) in its own
    venv: one call per assistant step, its summaries made after invocations (side by side in
    later requests, as ADK keeps them) and billed."""
    (trace,) = tau_airline("dev", (0,))[:1]
    assistants = [e for e in trace.events if e.role is Role.ASSISTANT]
    (done,) = await replay_adk([trace], "adk_interval")
    assert len(done.calls) == len(assistants)
    assert done.passes["adk_compaction"] >= 2
    assert done.summary_input_tokens > done.summary_output_tokens > 0
    assert sum(c.summary_input for c in done.calls) == done.summary_input_tokens
    assert done.calls[-1].window_tokens < sum(count_event(e) for e in trace.events[:-1])
    assert done.retention.used > 0


def test_dev_keeps_the_trail_family_by_its_own_floor_and_the_others_by_the_peers() -> None:
    from bench.economics.policies import TRAIL_DEV_FLOOR
    from bench.economics.run import choose

    def rows(*pairs: tuple[float, float]) -> list[dict[str, float]]:
        return [{"retention": r, "bill_vs_none": b} for r, b in pairs]

    dev = {
        "summarize_trail": rows((TRAIL_DEV_FLOOR - 0.01, 0.3), (TRAIL_DEV_FLOOR, 0.9), (0.99, 1.2)),
        "token_budget": rows((0.99, 0.5), (1.0, 0.95), (1.0, 0.9)),
    }
    # A peer that never compacts holds everything: the trail family is not held to it.
    assert choose(dev, peer_retention=1.0) == {"summarize_trail": 1, "token_budget": 2}
    short = {"summarize_trail": rows((0.90, 0.1), (0.95, 0.2), (0.95, 0.15))}
    # None fits: the best retention, the cheaper of equals.
    assert choose(short, peer_retention=0.5) == {"summarize_trail": 2}


def test_dev_chooses_by_the_bill_not_by_the_tokens_sent() -> None:
    """A setting that sends fewer tokens but breaks the prompt cache more often bills more: dev
    keeps the one that bills less, as the target counts it."""
    from bench.economics.run import choose, relative_bill

    none = {"prices": {"a": {"billed": 100.0}, "b": {"billed": 200.0}}}
    few_tokens = {"prices": {"a": {"billed": 90.0}, "b": {"billed": 240.0}}}  # 0.9 and 1.2
    cached = {"prices": {"a": {"billed": 95.0}, "b": {"billed": 190.0}}}  # 0.95 and 0.95
    assert relative_bill(few_tokens, none) == pytest.approx((0.9 * 1.2) ** 0.5)
    assert relative_bill(cached, none) == pytest.approx(0.95)
    dev = {
        "token_budget": [
            {
                "retention": 1.0,
                "conversation_tokens": 10,
                "bill_vs_none": relative_bill(few_tokens, none),
            },
            {
                "retention": 1.0,
                "conversation_tokens": 50,
                "bill_vs_none": relative_bill(cached, none),
            },
        ]
    }
    assert choose(dev, peer_retention=1.0) == {"token_budget": 1}


def test_an_unknown_trace_family_is_refused_naming_it_and_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        run.main(["--only", "tau-retail", "--jobs", "2"])
    assert stopped.value.code == 2
    assert "--only: no trace family tau-retail (known: tau-airline, coding-task" in (
        capsys.readouterr().err
    )


async def test_a_prompt_past_the_models_window_stops_the_agent_there(tmp_path: Path) -> None:
    """Sending everything to a 2,000-token model fails at the first call past it: the replay
    stops there and every later step is judged as sent nothing; a budget that keeps the prompt
    inside the window runs to the end. A peer's whole replay is cut the same way."""
    events = [Event(id="u", role=Role.USER, text="order ZFA04Y please")]
    events += reads(0, 8, '{"id": "ZFA04Y"}')
    trace = Trace("small", "", "", tuple(events), 200, window_tokens=2000)
    budget = CompactionPolicy(
        TokenCount(1200), TokenBudget(max_tokens=600, boundary=Boundary.TOOL_PAIR)
    )
    sidecar = await start(server_config(tmp_path / "w.db"))
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
            whole = await replay_trace(client, "whole", trace, None)
            kept = await replay_trace(client, "kept", trace, budget)
    finally:
        await sidecar.stop(0.5)
    assert whole.failed_at is not None
    assert len(whole.calls) == whole.failed_at < 8
    assert len(whole.steps) == 8
    assert all(not s.held for s in whole.steps[whole.failed_at :])
    assert all(s.held == {"zfa04y"} for s in whole.steps[: whole.failed_at])
    assert kept.failed_at is None
    assert len(kept.calls) == 8
    edited = stop_at_window(trace, replay_edited(trace))  # Anthropic's clearing, at 100k: none
    assert edited.failed_at == whole.failed_at
    assert len(edited.calls) == edited.failed_at
    assert all(not s.held for s in edited.steps[edited.failed_at :])
    assert score([trace, trace], [whole, kept], (SONNET_45,))["failed_traces"] == 1
