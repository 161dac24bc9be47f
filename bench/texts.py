"""Event texts shared by every benchmark, with no imports outside the standard library.

The ADK worker (``bench/adk_worker.py``) runs in its own virtualenv without the
sidecar installed, and must build byte-for-byte the same texts as the sidecar
benchmarks, so the generator lives here rather than in ``bench/common.py``.
"""

from __future__ import annotations

# Text sizes cycle through 300..2000 bytes, the range the targets are stated for.
FILLER = "The quick brown fox jumps over the lazy dog while the agent inspects pods. "


def text_of(i: int, low: int = 300, high: int = 2000) -> str:
    """The ``i``-th event text: deterministic, ``low``..``high`` bytes (ASCII)."""
    size = low + (i * 337) % (high - low + 1)
    return (FILLER * (size // len(FILLER) + 1))[:size]


def is_user(i: int) -> bool:
    """Events alternate user / assistant, starting with a user turn."""
    return i % 2 == 0
