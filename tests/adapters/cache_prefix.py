"""What the adapters' prompt-cache tests assert of the keys their model calls carried."""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.client import SessionContext


def grew(before: SessionContext, after: SessionContext) -> bool:
    """Whether ``after`` is ``before`` with events appended at its end (no compaction)."""
    ids = [e.id for e in after.events[: len(before.events)]]
    return ids == [e.id for e in before.events]


def assert_key_moves_only_with_compactions(
    keys: Sequence[object], windows: Sequence[SessionContext]
) -> None:
    """Each call's key is its window's ``cache_prefix_id``: kept by appends, new after each
    compaction and only then, and the conversation saw at least two compactions."""
    assert list(keys) == [w.cache_prefix_id for w in windows]
    assert all(keys)
    changed = [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]]
    compacted = [i for i in range(1, len(windows)) if not grew(windows[i - 1], windows[i])]
    assert changed == compacted
    assert len(set(keys)) == len(changed) + 1 >= 3
