"""The decode cache: reuse only for the very same row, bounded by content size."""

from __future__ import annotations

from sidecar.model import Role
from sidecar.store.event_cache import ENTRY_OVERHEAD, DecodedEvents


def row(text: str, *, archived: int = 0, position: int = 1) -> tuple[object, ...]:
    return ("e1", Role.USER.value, f'{{"t":"{text}"}}', position, 3, 0, archived, 0)


def test_an_unchanged_row_is_decoded_once() -> None:
    cache = DecodedEvents()
    first = cache.event(7, row("hi"))
    assert cache.event(7, row("hi")) is first
    assert first.text == "hi"


def test_any_changed_column_decodes_again() -> None:
    cache = DecodedEvents()
    first = cache.event(7, row("hi"))
    assert cache.event(7, row("ho")).text == "ho"  # a reused row id, other content
    assert cache.event(7, row("ho", archived=1)).archived
    assert cache.event(7, row("ho", position=2)).position == 2
    assert cache.event(7, row("hi")) is not first  # replaced, decoded afresh


def test_it_starts_over_when_full_counting_what_an_entry_really_holds() -> None:
    content = len(row("x" * 20)[2])  # type: ignore[arg-type]
    per_entry = 2 * content + ENTRY_OVERHEAD  # the JSON, the decoded text, the objects
    cache = DecodedEvents(max_bytes=4 * per_entry)
    for n in range(50):
        cache.event(n, row("x" * 20))
        assert cache.bytes_held <= 4 * per_entry
    assert 0 < len(cache) <= 4


def test_a_bound_of_zero_keeps_nothing() -> None:
    cache = DecodedEvents(max_bytes=0)
    first = cache.event(7, row("hi"))
    assert first.text == "hi"
    assert cache.event(7, row("hi")) is not first
    assert len(cache) == 0
