"""The summarizing strategy: what the LLM sees and what happens to its answer."""

from __future__ import annotations

import pytest

from sidecar.compaction.summarize import Summarize, SummaryJob
from sidecar.compaction.window import apply_plan
from sidecar.errors import InvalidConfig, SummarizerUnavailable
from sidecar.model import Role, SkipReason
from sidecar.tokenizer import default_estimator
from tests.compaction.builders import a, ids, s, summary_pair, t, u
from tests.compaction.fakes import FakeSummarizer


def conversation() -> list:  # type: ignore[type-arg]
    return [
        s(id="sys", text="You are a travel assistant."),
        u(id="u1", text="I need a flight to Delhi."),
        a(id="a1", text="What date?"),
        u(id="u2", text="October 20."),
        a(id="a2", text="Morning or evening?"),
        u(id="u3", text="Morning."),
        a(id="a3", text="Booked."),
    ]


async def test_summary_pair_goes_right_before_the_kept_window() -> None:
    events = conversation()
    plan = await Summarize(max_events_to_keep=2, overlap=1, max_summary_tokens=1).plan(
        events, FakeSummarizer("Delhi, Oct 20")
    )
    result = apply_plan(events, plan)
    kept = result.active_events
    assert kept[0].id == "sys"
    assert [e.role for e in kept[1:3]] == [Role.USER, Role.ASSISTANT]
    assert all(e.synthetic for e in kept[1:3])
    assert kept[2].text == "Delhi, Oct 20"
    assert ids(kept[3:]) == ["u3", "a3"]
    assert ids(result.archived_events) == ["u1", "a1", "u2", "a2"]


async def test_summarizer_sees_previous_summary_archived_events_and_overlap_but_no_system() -> None:
    fake = FakeSummarizer()
    events = conversation()
    await Summarize(max_events_to_keep=2, overlap=1, max_summary_tokens=1).plan(events, fake)
    (request,) = fake.requests
    history = request.history
    assert "I need a flight to Delhi." in history
    assert "<recent-context" in history
    assert "Morning." in history
    assert "Booked." not in history  # beyond the overlap
    assert "travel assistant" not in history  # system messages are never summarized


async def test_second_pass_folds_previous_summary_and_archives_the_old_pair() -> None:
    events = conversation()
    first = apply_plan(
        events, await Summarize(2, 1, max_summary_tokens=1).plan(events, FakeSummarizer("FIRST"))
    )
    grown = [*first.active_events, u(id="u4", text="And a hotel."), a(id="a4", text="Which area?")]
    fake = FakeSummarizer("SECOND")
    second = apply_plan(grown, await Summarize(2, 1, max_summary_tokens=1).plan(grown, fake))
    assert "<previous-summary>\nFIRST\n</previous-summary>" in fake.requests[0].history
    old_pair = [e.id for e in first.active_events if e.synthetic]
    assert set(old_pair) <= set(ids(second.archived_events))
    summaries = [e for e in second.active_events if e.synthetic]
    assert [e.text for e in summaries if e.role is Role.ASSISTANT] == ["SECOND"]
    assert ids(second.active_events)[-2:] == ["u4", "a4"]


async def test_blank_summary_skips_but_still_archives_superseded_systems() -> None:
    events = [s(id="old"), *conversation()]
    plan = await Summarize(2, 1, max_summary_tokens=1).plan(events, FakeSummarizer("   \n"))
    assert plan.skipped_reason is SkipReason.BLANK_SUMMARY
    assert plan.archive_ids == ("old",)
    assert plan.inserts == ()


async def test_summarizer_that_raises_changes_nothing() -> None:
    events = conversation()
    boom = FakeSummarizer(error=SummarizerUnavailable("quota"))
    with pytest.raises(SummarizerUnavailable):
        await Summarize(2, 1, max_summary_tokens=1).plan(events, boom)
    assert ids(events) == ["sys", "u1", "a1", "u2", "a2", "u3", "a3"]
    assert not any(e.archived for e in events)


async def test_no_turn_boundary_means_no_llm_call() -> None:
    events = [u(id="u1"), *[a() for _ in range(30)]]
    fake = FakeSummarizer()
    plan = await Summarize(5, 1, max_summary_tokens=1).plan(events, fake)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.NO_TURN_BOUNDARY
    assert fake.requests == []


async def test_within_limit_means_no_llm_call() -> None:
    fake = FakeSummarizer()
    plan = await Summarize(10, 2).plan(conversation(), fake)
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT
    assert fake.requests == []


async def test_tokens_saved_is_net_of_the_inserted_summary() -> None:
    events = [u(id="u1", tokens=500), a(tokens=500), u(id="u2", tokens=5), a(tokens=5)]
    plan = await Summarize(2, 1, max_summary_tokens=1).plan(events, FakeSummarizer("short"))
    inserted = sum(e.token_count for e in plan.inserts)
    assert inserted > 0
    assert plan.tokens_estimated_saved == 1000 - inserted


async def test_usage_is_recorded_on_the_plan() -> None:
    plan = await Summarize(2, 1, max_summary_tokens=1).plan(conversation(), FakeSummarizer())
    assert plan.summary_input_tokens == 100
    assert plan.summary_output_tokens == 7
    assert plan.summarizer_latency_ms >= 0


def test_prepare_returns_a_job_only_when_a_call_is_needed() -> None:
    strategy = Summarize(2, 1, max_summary_tokens=1)
    assert isinstance(strategy.prepare(conversation()), SummaryJob)
    assert not isinstance(strategy.prepare(conversation()[:3]), SummaryJob)


async def test_tool_pairs_survive_summarization() -> None:
    events = [
        u(id="u1"),
        a(id="req", calls=["c1", "c2"]),
        t(id="r1", results=["c1"]),
        t(id="r2", results=["c2"]),
        u(id="u2"),
        a(id="a2"),
    ]
    result = apply_plan(
        events, await Summarize(3, 1, max_summary_tokens=1).plan(events, FakeSummarizer())
    )
    assert ids([e for e in result.active_events if not e.synthetic]) == ["u2", "a2"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_events_to_keep": 2, "overlap": 2}, "strategy.summarize.overlap"),
        ({"max_events_to_keep": 2, "overlap": 5}, "strategy.summarize.overlap"),
        ({"overlap": -1}, "strategy.summarize.overlap"),
        ({"max_events_to_keep": 0}, "strategy.summarize.max_events_to_keep"),
        ({"max_summary_tokens": 0}, "strategy.summarize.max_summary_tokens"),
        ({"shadow_prompt": "  "}, "strategy.summarize.shadow_prompt"),
    ],
)
def test_invalid_config_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        Summarize(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


async def test_cost_check_skips_a_pass_that_could_grow_the_context_without_a_call() -> None:
    # 40 tokens would leave; the pair could add the shadow prompt and 1024 tokens.
    fake = FakeSummarizer()
    plan = await Summarize(2, 1).plan(conversation(), fake)
    assert plan.skipped_reason is SkipReason.NOT_WORTH_IT
    assert plan.is_empty
    assert fake.requests == []


async def test_cost_check_counts_the_previous_summary_as_leaving() -> None:
    strategy = Summarize(2, 1, max_summary_tokens=100)
    shadow = strategy.shadow_tokens(default_estimator())
    # 4 archived events of 10 tokens: 40 <= shadow + 100, unless the old pair leaves too.
    small = [*conversation()]
    assert (await strategy.plan(small, FakeSummarizer())).skipped_reason is SkipReason.NOT_WORTH_IT
    with_old = [*summary_pair(tokens=shadow + 60), *conversation()]
    plan = await strategy.plan(with_old, FakeSummarizer())
    assert plan.skipped_reason is None
    assert plan.inserts


async def test_min_saved_tokens_expects_a_summary_as_long_as_the_previous_one() -> None:
    # ADK's rule: with no summary yet any saving is worth a call; after one, the
    # events leaving must outweigh the shadow prompt and a summary of the last one's size.
    strategy = Summarize(2, 1, min_saved_tokens=1)
    shadow = strategy.shadow_tokens(default_estimator())
    fake = FakeSummarizer()
    plan = await strategy.plan(conversation(), fake)  # 40 tokens leave; the cap is 1024
    assert plan.skipped_reason is None
    assert len(fake.requests) == 1
    # With a previous summary of 30 tokens: 40 + the old pair leave, shadow + 30 come back.
    with_old = [*summary_pair(tokens=30), *conversation()]
    assert (await strategy.plan(with_old, FakeSummarizer())).inserts
    saving = 40 + 2 * 30 - shadow - 30
    greedy = Summarize(2, 1, min_saved_tokens=saving + 1)
    skipped = await greedy.plan(with_old, fake)
    assert skipped.skipped_reason is SkipReason.NOT_WORTH_IT
    assert len(fake.requests) == 1  # no call for a skipped pass
