"""A summary's identifier trail: chosen from the archived span, fitted, folded, completed."""

from __future__ import annotations

import pytest

from sidecar.compaction import trail
from sidecar.compaction.identifiers import trail_of
from sidecar.compaction.summarize import Summarize, SummaryJob
from sidecar.compaction.tokens import count_event
from sidecar.compaction.window import apply_plan
from sidecar.errors import InvalidConfig
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.summarizer.protocol import TRAIL_LABEL
from sidecar.tokenizer import default_estimator
from tests.compaction.fakes import FakeSummarizer

ESTIMATOR = default_estimator()


def counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


def turn(n: int, reservation: str, flight: str) -> list[Event]:
    """A user turn looking one reservation up: its id and flight land in a tool result."""
    return [
        counted(Event(id=f"u{n}", role=Role.USER, text=f"check my booking {reservation}")),
        counted(
            Event(
                id=f"a{n}",
                role=Role.ASSISTANT,
                tool_calls=(ToolCall(f"c{n}", "get_reservation", f'{{"id": "{reservation}"}}'),),
            )
        ),
        counted(
            Event(
                id=f"t{n}",
                role=Role.TOOL,
                tool_results=(
                    ToolResult(
                        f"c{n}",
                        "get_reservation",
                        f'{{"reservation_id": "{reservation}", "flight": "{flight}", '
                        f'"date": "2024-05-{10 + n % 20:02d}", "notes": "{"seat ok " * 40}"}}',
                    ),
                ),
            )
        ),
        counted(Event(id=f"r{n}", role=Role.ASSISTANT, text="Your booking is confirmed.")),
    ]


def session(turns: int) -> list[Event]:
    return [e for n in range(turns) for e in turn(n, f"RES{n:03d}X", f"HAT{100 + n}")]


async def test_the_summary_ends_with_the_archived_identifiers_the_window_lacks() -> None:
    events = session(4)
    strategy = Summarize(
        max_events_to_keep=4, overlap=1, max_summary_tokens=200, identifier_trail_tokens=60
    )
    plan = await strategy.plan(events, ExtractiveSummarizer())
    summary = plan.inserts[1]
    assert summary.text.splitlines()[-1].startswith(TRAIL_LABEL)
    kept = set(trail_of(summary.text))
    assert {"RES000X", "HAT100", "RES002X", "HAT102"} <= kept
    assert "RES003X" not in kept  # the kept turn holds it
    assert summary.token_count == count_event(summary)  # counted in the summary's tokens


async def test_no_trail_when_its_share_is_zero() -> None:
    fake = FakeSummarizer("SUMMARY")
    strategy = Summarize(
        max_events_to_keep=4, overlap=1, max_summary_tokens=200, identifier_trail_tokens=0
    )
    plan = await strategy.plan(session(4), fake)
    assert plan.inserts[1].text == "SUMMARY"
    assert fake.requests[0].identifiers == ()
    assert fake.requests[0].max_output_tokens == strategy.max_summary_tokens


async def test_what_the_summarizer_left_out_is_appended_within_the_share() -> None:
    fake = FakeSummarizer("Booking RES000X was checked.")
    strategy = Summarize(
        max_events_to_keep=4, overlap=1, max_summary_tokens=200, identifier_trail_tokens=40
    )
    plan = await strategy.plan(session(4), fake)
    [request] = fake.requests
    assert request.identifiers  # asked as must-keep
    text = plan.inserts[1].text
    head, line = text.rsplit("\n", 1)
    assert head == "Booking RES000X was checked."
    assert trail_of(text) == [i for i in request.identifiers if i != "RES000X"]
    assert ESTIMATOR.count(line) <= 40
    # The trail's share is kept for it: the summarizer is asked for the rest.
    assert request.max_output_tokens == strategy.max_summary_tokens - ESTIMATOR.count(
        "Identifiers: " + ", ".join(request.identifiers)
    )


async def test_a_summary_that_states_every_identifier_gets_no_trail() -> None:
    fake = FakeSummarizer("")
    strategy = Summarize(
        max_events_to_keep=4, overlap=1, max_summary_tokens=200, identifier_trail_tokens=40
    )
    job = strategy.prepare(session(4), ESTIMATOR)
    assert isinstance(job, SummaryJob)
    fake.answer = "All of " + " and ".join(job.request.identifiers)
    plan = await strategy.plan(session(4), fake)
    assert TRAIL_LABEL not in plan.inserts[1].text


async def test_the_trail_folds_the_previous_one_and_never_grows_past_its_share() -> None:
    strategy = Summarize(
        max_events_to_keep=4, overlap=1, max_summary_tokens=200, identifier_trail_tokens=30
    )
    window = session(3)
    seen: list[list[str]] = []
    for n in range(3, 12):
        window = [*window, *turn(n, f"RES{n:03d}X", f"HAT{100 + n}")]
        plan = await strategy.plan(window, ExtractiveSummarizer())
        window = list(apply_plan(window, plan).active_events)
        text = next(e.text for e in window if e.synthetic and e.role is Role.ASSISTANT)
        line = text.rsplit("\n", 1)[-1]
        assert ESTIMATOR.count(line) <= 30
        seen.append(trail_of(text))
    # Each pass leads with what it archived, then the previous trail in its order.
    assert seen[1][:3] == ["RES003X", "HAT103", "2024-05-13"]
    assert seen[1][3:] == seen[0][: len(seen[1]) - 3]
    assert "RES000X" not in seen[-1]  # the oldest were pushed out


def test_fit_keeps_a_prefix_within_the_budget() -> None:
    many = [f"ID{n:05d}" for n in range(200)]
    chosen = trail.fit(many, 20, ESTIMATOR)
    assert chosen == tuple(many[: len(chosen)])
    assert ESTIMATOR.count("Identifiers: " + ", ".join(chosen)) <= 20
    assert trail.fit(many, 0, ESTIMATOR) == ()


@pytest.mark.parametrize(("value", "message"), [(-1, "at least 0"), (1024, "smaller than")])
def test_a_bad_trail_share_names_the_field(value: int, message: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        Summarize(identifier_trail_tokens=value)
    assert info.value.field == "strategy.summarize.identifier_trail_tokens"
    assert message in info.value.description
