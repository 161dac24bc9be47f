"""The benchmark's stand-ins for a model: one length rule for every summary, an answer-blind
recall rule, and planted-fact probes with paraphrased questions and decoys."""

from __future__ import annotations

import random
from pathlib import Path

from bench.economics.fake_summarizer import CalibratedSummarizer
from bench.economics.measure import bench_server, replay_trace
from bench.economics.probes import Plan, ProbeCheck, ProbeSpec, outcome
from bench.economics.recall import TOOL, RecallRule
from bench.economics.retention import identifiers, tokens
from bench.economics.summary_size import FLOOR, PAD, cut_chars, fit, target_size
from bench.economics.traces import Trace, from_transcript
from bench.economics.transcripts import TRANSCRIPTS
from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Boundary, Event, Role, ToolCall, ToolResult
from sidecar.summarizer.protocol import SummaryRequest, trail_line
from sidecar.tokenizer import default_estimator
from tests.bench_events import reads


def test_a_summary_is_its_input_over_the_ratio_within_the_floor_and_the_cap() -> None:
    assert target_size(8000, cap=2048) == 1000
    assert target_size(100, cap=2048) == FLOOR
    assert target_size(80_000, cap=512) == 512
    assert target_size(8000, cap=2048, ratio=5.0) == 1600


def test_a_short_summary_is_padded_with_prose_that_holds_no_identifier_and_a_long_one_cut() -> None:
    assert identifiers(PAD) == set()
    padded = fit("User asked: cancel ZFA04Y", 200, len, cut_chars)
    assert len(padded) == 200
    assert padded.startswith("User asked: cancel ZFA04Y\n")
    assert identifiers(padded) == {"zfa04y"}
    assert fit("x" * 500, 200, len, cut_chars) == "x" * 200
    assert fit("  ", 200, len, cut_chars) == "  "  # blank stays blank: the pass is skipped


async def test_our_summary_has_the_calibrated_prose_and_then_the_whole_trail_asked_for() -> None:
    count = default_estimator().count
    history = "<conversation>\n" + "\n".join(
        f"<user>please look at order {n} and the refund for it</user>" for n in range(400)
    ) + "\n</conversation>"  # fmt: skip
    ids = tuple(f"ORD-{n:05d}" for n in range(30))
    request = SummaryRequest("Summarize.", history, max_output_tokens=512, identifiers=ids)
    answer = await CalibratedSummarizer(ratio=8.0).summarize(request)
    trail = trail_line(ids)
    assert answer.text.endswith("\n" + trail)
    prose = answer.text.removesuffix("\n" + trail)
    size = target_size(count(history), 512)
    assert size - 3 <= count(prose) <= size  # cut at a character: a token may straddle it
    assert answer.output_tokens == count(answer.text)
    tight = await CalibratedSummarizer(ratio=1000.0).summarize(request)
    assert FLOOR - 3 <= count(tight.text.removesuffix("\n" + trail)) <= FLOOR


def test_recall_queries_come_from_argument_names_and_the_context_never_from_values() -> None:
    rule = RecallRule(max_searches=3)
    action = Event(
        id="a",
        role=Role.ASSISTANT,
        tool_calls=(
            ToolCall(
                "c",
                "update_reservation_flights",
                '{"reservation_id": "ZFA04Y", "cabin": "economy", "payment_id": "gift_card_7"}',
            ),
        ),
    )
    context = ["User: I want to change my Denver trip, the one in Denver", "Assistant: Sure."]
    lacking = frozenset({"gift_card_7"})
    queries = rule.queries(action, context, lacking)
    assert queries == ["payment", "change"]  # the unfilled argument, then the rarest user word
    assert not any(q in tokens("ZFA04Y economy gift_card_7") for q in queries)
    both = rule.queries(action, context, frozenset({"zfa04y", "gift_card_7"}))
    assert both[:2] == ["reservation", "payment"]
    assert RecallRule(max_searches=1).queries(action, context, lacking) == ["payment"]


async def test_a_step_missing_an_identifier_searches_and_pays_for_what_it_brings_back(
    tmp_path: Path,
) -> None:
    """A reservation id archived by a tight budget: the step about to use it searches by its
    argument's name, the tool's answer is appended to the session and held in the step's
    context, and the search is a call of its own, billed."""
    events = [
        Event(id="u0", role=Role.USER, text="hello, find my booking"),
        Event(id="a0", role=Role.ASSISTANT, tool_calls=(ToolCall("c0", "find", "{}"),)),
        Event(id="t0", role=Role.TOOL,
              tool_results=(ToolResult("c0", "find", '{"reservation": "ZFA04Y"}'),)),
    ]  # fmt: skip
    events += reads(1, 6)
    use = ToolCall("c9", "cancel_reservation", '{"reservation_id": "ZFA04Y"}')
    events.append(Event(id="a9", role=Role.ASSISTANT, tool_calls=(use,)))
    trace = Trace("t", "", "", tuple(events), 0)
    tight = CompactionPolicy(
        TokenCount(600), TokenBudget(max_tokens=400, boundary=Boundary.TOOL_PAIR)
    )
    sidecar = await bench_server(tmp_path / "r.db")
    try:
        async with AsyncClient(f"127.0.0.1:{sidecar.port}") as client:
            blind = await replay_trace(client, "blind", trace, tight)
            found = await replay_trace(client, "found", trace, tight, RecallRule())
            logged = [e async for e in client.session("found").events()]
    finally:
        await sidecar.stop(0.5)
    assert blind.steps[-1].held == set()
    assert found.steps[-1].held == {"zfa04y"}
    assert (found.searches, found.recalled) == (1, 1)
    assert len(found.calls) == len(blind.calls) + 1
    search_call = found.calls[-2]
    assert search_call.output > 0
    assert found.calls[-1].window_tokens > search_call.window_tokens  # it carries the answer
    (asked,) = [e for e in logged if e.tool_calls and e.tool_calls[0].name == TOOL]
    assert asked.tool_calls[0].arguments_json == '{"query": "reservation"}'


def test_probes_state_a_value_once_plant_decoys_and_ask_in_other_words() -> None:
    spec = ProbeSpec(
        "booking reference",
        "BK-204519",
        "My Lisbon hotel booking reference is {v}.",
        "What's the confirmation number for where I'm staying in Portugal's capital?",
        (("My Porto hotel booking reference is {v}.", "BK-777001"),),
    )
    plan = Plan(random.Random(1), 40, [spec])
    (probe,) = plan.probes
    assert plan.message(probe.planted_turn) == "My Lisbon hotel booking reference is BK-204519."
    (decoy_turn,) = probe.decoy_turns
    assert plan.message(decoy_turn) == "My Porto hotel booking reference is BK-777001."
    assert probe.planted_turn < probe.needed_turn
    assert decoy_turn < probe.needed_turn
    assert plan.answer(probe.needed_turn) == "The booking reference is BK-204519."
    question = plan.message(probe.needed_turn) or ""
    assert not {"lisbon", "hotel", "booking", "reference"} & tokens(question)


def test_every_shipped_transcript_has_probes_whose_answers_the_judge_scores() -> None:
    for name, (make, turns, window) in TRANSCRIPTS.items():
        trace = from_transcript(make(turns, window))
        assert len(trace.probes) >= 4, name
        answers = {e.id: e for e in trace.events}
        for check in trace.probes:
            answer = answers[check.answer_id]
            assert answer.role is Role.ASSISTANT
            assert check.value.casefold() in identifiers(answer.text), name
            assert check.decoys
            assert all(d.casefold() in identifiers(d) for d in check.decoys)


def test_a_probe_is_held_recalled_misled_by_a_decoy_or_missing() -> None:
    check = ProbeCheck("a", "BK-204519", ("BK-777001",))
    assert outcome(check, ["User: my ref is BK-204519."]) == "held"
    assert outcome(check, ["found: BK-204519"], before=["User: hi"]) == "recalled"
    assert outcome(check, ["User: Porto is BK-777001."]) == "decoy"
    assert outcome(check, ["User: hello"]) == "missing"
