"""Kept blocks: an event encoded once, the same rendering with or without them, bounded."""

from __future__ import annotations

from sidecar.providers.fragments import Fragments
from sidecar.providers.render import ContextFormat, render_json
from sidecar.providers.wire import Block
from tests.providers.builders import a, call, result, s, t, u


def test_a_kept_event_is_not_encoded_again() -> None:
    fragments = Fragments(1 << 20)
    built: list[str] = []

    def build(text: str) -> list[Block]:
        built.append(text)
        return [Block("text", f'"{text}"')]

    event = u("hi")
    first = fragments.chunk(event, "gemini:u", build, "hi")
    assert fragments.chunk(event, "gemini:u", build, "hi") is first
    fragments.chunk(event, "anthropic:u", build, "hi")
    assert built == ["hi", "hi"]  # once per tag


def test_a_grown_window_renders_as_if_nothing_were_kept() -> None:
    fragments = Fragments(1 << 20)
    window = [s(), u("look"), a("on it", calls=[call("c1")]), t(result("c1"))]
    for fmt in ContextFormat:
        render_json(window, fmt, fragments)
    grown = [*window, u("and now?"), a("done")]
    for fmt in ContextFormat:
        assert render_json(grown, fmt, fragments) == render_json(grown, fmt)


def test_past_its_bound_the_cache_starts_over() -> None:
    fragments = Fragments(2000)
    for i in range(50):
        fragments.chunk(u(), "gemini:u", lambda text: [Block("", "x" * 300)], str(i))
    assert fragments.bytes_held <= 2000
    assert 0 < len(fragments) < 50


def test_nothing_is_kept_with_a_bound_of_zero() -> None:
    fragments = Fragments(0)
    fragments.chunk(u(), "gemini:u", lambda text: [Block("", text)], "x")
    assert len(fragments) == 0
