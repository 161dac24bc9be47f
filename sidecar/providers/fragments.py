"""Encoded blocks kept per model object, so a grown window encodes only what is new.

An agent asks for its context after every append: the window is the last
one plus an event or two. Encoding is most of a rendering's cost, and an
event's own blocks depend on that event alone (an answer's, on its result
and call), so they are kept, keyed by the identity of the immutable object
they came from and a tag naming the format and the kind of block, exactly
as ``EventBlobs`` keeps events' wire bytes. Each entry keeps its object
alive, so an identity is never reused while its entry stands. The bound is
an estimate of the memory held; past it the cache starts over, which costs
encoding again, never a wrong rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sidecar.providers.wire import Block, Chunk, chunk

T = TypeVar("T")

# What an entry costs beside its text (held twice: in its blocks and joined): the dict
# slot, the key, the tuple and the Block objects.
ENTRY_OVERHEAD = 256


class Fragments:
    """Chunks by (object identity, tag); ``max_bytes`` 0 keeps nothing."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self._by_key: dict[tuple[int, str], tuple[object, Chunk]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def chunk(self, owner: object, tag: str, build: Callable[[T], list[Block]], source: T) -> Chunk:
        """``build(source)``, the blocks made of ``owner``, built and joined once while kept."""
        key = (id(owner), tag)
        known = self._by_key.get(key)
        if known is not None and known[0] is owner:
            return known[1]
        made = chunk(build(source))
        if self.max_bytes:
            charge = ENTRY_OVERHEAD + 3 * len(made.json) + 64 * len(made.blocks)
            if charge <= self.max_bytes:
                if self._bytes + charge > self.max_bytes:
                    self.clear()
                self._by_key[key] = (owner, made)
                self._bytes += charge
        return made

    def clear(self) -> None:
        self._by_key = {}
        self._bytes = 0


NOTHING_KEPT = Fragments(0)
"""For a one-off rendering: every block is built afresh."""
