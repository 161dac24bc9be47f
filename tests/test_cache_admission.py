"""The read caches take a session in on its second read, remembering a bounded few."""

from __future__ import annotations

import threading

from sidecar.cache_admission import BYTES_PER_KEY, SecondRead
from sidecar.store.event_cache import DecodedEvents


def test_a_key_is_admitted_on_its_second_sighting() -> None:
    door = SecondRead(4)
    assert not door.admits("a")
    assert door.admits("a")
    assert door.admits("a")


def test_only_the_last_keys_seen_are_remembered() -> None:
    door = SecondRead(2)
    for key in ("a", "b", "c"):  # "a" falls out
        assert not door.admits(key)
    assert len(door) == 2
    assert not door.admits("a")
    assert door.admits("c")


def test_a_sighting_keeps_a_key_remembered() -> None:
    door = SecondRead(2)
    door.admits("a")
    door.admits("b")
    assert door.admits("a")  # seen again: now the newest
    door.admits("c")  # pushes out "b", not "a"
    assert door.admits("a")
    assert not door.admits("b")


def test_capacity_follows_the_cache_bound_and_zero_admits_all() -> None:
    assert SecondRead.for_bytes(8 << 20).capacity == (8 << 20) // BYTES_PER_KEY
    door = SecondRead.for_bytes(0)
    assert door.admits("a")
    assert len(door) == 0


def test_clearing_forgets_every_sighting() -> None:
    door = SecondRead(4)
    door.admits("a")
    door.clear()
    assert not door.admits("a")


def test_many_threads_never_break_the_bound() -> None:
    door = SecondRead(8)

    def sight(base: int) -> None:
        for i in range(2_000):
            door.admits(base + i % 50)

    threads = [threading.Thread(target=sight, args=(n * 1000,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(door) == 8


def test_the_store_cache_decodes_a_session_read_once_without_keeping_it() -> None:
    cache = DecodedEvents(1 << 20)
    assert cache.for_session(7) is None
    assert cache.for_session(7) is cache
