"""Search bounds at the store: a query's terms, a search's time, its connection afterwards.

The contract every store keeps (see ``Store.search``): repeated terms are
dropped, a query past 64 words or 4 KiB is InvalidArgument naming ``query``,
a search past ``timeout_s`` is TimeoutError, a cancelled one stops, and
either way the store searches on as before.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import pytest

from sidecar.errors import InvalidArgument
from sidecar.model import Event, Role
from sidecar.store.protocol import SearchQuery, Store
from sidecar.store.search_terms import MAX_QUERY_BYTES, MAX_QUERY_WORDS, query_terms

VOCABULARY = [f"w{n}" for n in range(MAX_QUERY_WORDS)]
EVERY_WORD = " ".join(VOCABULARY)


def u(event_id: str, text: str) -> Event:
    return Event(id=event_id, role=Role.USER, text=text, token_count=10)


async def corpus(store: Store, count: int) -> None:
    """``count`` events of ~4 KB, each holding every word of the vocabulary."""
    text = " ".join(VOCABULARY * 16)
    await store.append("corpus", [u(f"e{n}", text) for n in range(count)], create_if_missing=True)


def test_repeated_terms_are_dropped_in_the_order_first_given() -> None:
    assert query_terms("paris lyon paris\x00lyon  nice") == ("paris", "lyon", "nice")
    assert query_terms("Paris paris") == ("Paris", "paris")  # case is the stores' to fold


THREE_WORD_TERMS = [f"a{n},b{n},c{n}" for n in range(MAX_QUERY_WORDS // 3)]  # 63 words


@pytest.mark.parametrize(
    "query",
    [
        EVERY_WORD,
        " ".join([*THREE_WORD_TERMS, "d"]),  # punctuation separates words: 3 in each term
        " ".join(["*", *VOCABULARY[1:]]),  # a term with no word in it counts as one
        "x" * MAX_QUERY_BYTES,
        "paris " * 600,  # one distinct term
    ],
    ids=["64-words", "64-words-in-22-terms", "63-words-and-a-star", "4096-bytes", "600-repeats"],
)
def test_a_query_at_the_bounds_is_served(query: str) -> None:
    assert query_terms(query)


@pytest.mark.parametrize(
    "query",
    [
        EVERY_WORD + " one-more",
        " ".join([*THREE_WORD_TERMS, "d", "e"]),
        " ".join(["*", *VOCABULARY]),
        "x" * (MAX_QUERY_BYTES + 1),
        "é" * (MAX_QUERY_BYTES // 2 + 1),  # two bytes each in UTF-8
        "paris " * 3000,
    ],
    ids=[
        "65-words",
        "65-words-in-23-terms",
        "64-words-and-a-star",
        "4097-bytes",
        "4098-utf8-bytes",
        "3000-repeats",
    ],
)
def test_a_query_past_a_bound_is_refused_naming_query(query: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        query_terms(query)
    assert refused.value.field == "query"


async def test_a_repeated_term_finds_what_the_term_finds(store: Store) -> None:
    await store.append("s", [u("e1", "paris in spring"), u("e2", "lyon")], create_if_missing=True)
    once = await store.search(
        SearchQuery("paris", include_active=True), page_size=10, page_token=""
    )
    many = SearchQuery("paris " * 600, include_active=True)
    repeated = await store.search(many, page_size=10, page_token="")
    assert [h.event.id for h in repeated.items] == [h.event.id for h in once.items] == ["e1"]


async def test_a_search_past_its_timeout_stops_and_the_store_searches_on(store: Store) -> None:
    await corpus(store, 100)
    query = SearchQuery(EVERY_WORD, include_active=True)
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await store.search(query, page_size=1000, page_token="", timeout_s=0.05)
        assert time.monotonic() - started < 1.0
    page = await store.search(query, page_size=1, page_token="", timeout_s=10)
    assert [h.event.id for h in page.items] == ["e0"]


async def test_a_cancelled_search_gives_its_connection_back_at_once(store: Store) -> None:
    await corpus(store, 100)
    query = SearchQuery(EVERY_WORD, include_active=True)
    running = [
        asyncio.create_task(store.search(query, page_size=1000, page_token="")) for _ in range(4)
    ]
    await asyncio.sleep(0.2)
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    started = time.monotonic()
    page = await store.search(
        SearchQuery("w1", include_active=True), page_size=1, page_token="", timeout_s=10
    )
    assert len(page.items) == 1
    assert time.monotonic() - started < 1.0
    _, window = await store.active_window("corpus")
    assert len(window) == 100


async def test_a_page_cut_short_by_bytes_reads_only_the_hits_it_holds(store: Store) -> None:
    """100 matching events of 90 KB, a page of up to 1,000 within 200 KB: two hits are read.

    The store used to fetch, decode and highlight every hit the page size allowed
    (9 MB here, up to a GB with 1 MiB events) and then keep the two that fit.
    """
    big = "needle " + "filler " * 13_000
    for start in range(0, 100, 10):
        events = [u(f"big{n}", big) for n in range(start, start + 10)]
        await store.append("big", events, create_if_missing=True)
    query = SearchQuery("needle", include_active=True)
    tracemalloc.start()
    try:
        page = await store.search(query, page_size=1000, page_token="", max_bytes=200_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(page.items) == 2
    assert page.next_page_token
    assert peak < 3_000_000, f"{peak:,} bytes held to answer two hits of 90 KB"
