"""A window grown by appends renders, from what was kept, exactly as it renders afresh."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.model import Event
from sidecar.providers.fragments import Fragments
from sidecar.providers.render import ContextFormat, render_json
from tests.providers.builders import a, call, result, s, t, thought, u
from tests.providers.test_rules import windows


@st.composite
def appends(draw: st.DrawFn) -> list[list[Event]]:
    """A window, cut into the batches an agent appended it in (some of them empty)."""
    events = draw(windows())
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=6)))
    bounds = [0, *cuts, len(events)]
    return [events[x:y] for x, y in itertools.pairwise(bounds)]


@settings(max_examples=200, deadline=None)
@given(appends(), st.sampled_from(list(ContextFormat)), st.sampled_from([1 << 22, 6000]))
def test_a_window_rendered_append_by_append_is_the_window_rendered_whole(
    batches: list[list[Event]], fmt: ContextFormat, bound: int
) -> None:
    kept = Fragments(bound)  # a small bound: windows and blocks dropped on the way
    window: list[Event] = []
    for batch in batches:
        window = [*window, *batch]
        assert render_json(window, fmt, kept) == render_json(window, fmt)
        assert kept.bytes_held <= bound


@settings(max_examples=100, deadline=None)
@given(windows(), windows(), st.sampled_from(list(ContextFormat)))
def test_a_window_that_is_not_the_kept_one_grown_renders_afresh(
    before: list[Event], after: list[Event], fmt: ContextFormat
) -> None:
    kept = Fragments(1 << 22)
    start = u("first")
    render_json([start, *before], fmt, kept)
    assert render_json([start, *after], fmt, kept) == render_json([start, *after], fmt)
    assert render_json([start], fmt, kept) == render_json([start], fmt)


def test_a_late_result_redoes_the_answers_of_its_call() -> None:
    window = [s(), u("look"), a(calls=[call("c1"), call("c2")]), t(result("c1")), u("and?")]
    grown = [*window, t(result("c2", "late")), a("done")]
    for fmt in ContextFormat:
        kept = Fragments(1 << 20)
        render_json(window, fmt, kept)
        rendered = render_json(grown, fmt, kept)
        assert rendered == render_json(grown, fmt)
        assert '"late"' in rendered


def test_reasoning_alone_is_sent_once_output_follows_it() -> None:
    alone = a(reasoning=[thought("hmm", b"enc", id="rs_1")])
    window = [u("look"), alone]
    kept = Fragments(1 << 20)
    assert "rs_1" not in render_json(window, ContextFormat.OPENAI_RESPONSES, kept)
    grown = [*window, a("found it")]
    assert "rs_1" in render_json(grown, ContextFormat.OPENAI_RESPONSES, kept)


def test_a_kept_window_is_counted_and_the_oldest_goes_first() -> None:
    kept = Fragments(1 << 20)
    first = [u("one " * 200), a("two " * 200)]
    second = [u("three " * 200), a("four " * 200)]
    render_json(first, ContextFormat.GEMINI, kept)
    assert kept.windows == 1
    held = kept.bytes_held
    render_json(second, ContextFormat.GEMINI, kept)
    assert kept.windows == 2
    assert kept.bytes_held > held
    kept.max_bytes = kept.bytes_held  # no room for more: the oldest window goes
    render_json([*second, u("five")], ContextFormat.GEMINI, kept)
    assert kept.windows == 1
    assert kept.bytes_held <= kept.max_bytes


def test_nothing_is_kept_for_a_one_off_rendering() -> None:
    kept = Fragments(0)
    render_json([u("hi"), a("hello")], ContextFormat.ANTHROPIC, kept)
    assert kept.windows == 0
    assert kept.bytes_held == 0
