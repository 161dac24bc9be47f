"""What renderings keep between reads, so a grown window encodes and lays out only what is new.

An agent asks for its context after every append: the window is the last
one plus an event or two. Two things are kept, both bounded together:

- **Encoded blocks.** Encoding is most of a rendering's cost, and an
  event's own blocks depend on that event alone (an answer's, on its result
  and call), so they are kept, keyed by the identity of the immutable object
  they came from and a tag naming the format and the kind of block, exactly
  as ``EventBlobs`` keeps events' wire bytes.
- **Windows' renderings.** The state a rendering of a window ended in (see
  ``incremental``), keyed by the format and the identity of the window's
  first event, so the next window, the same one grown, is rendered from
  where the appended events can change it instead of walked again.

Each entry keeps its object alive, so an identity is never reused while its
entry stands. The bound is an estimate of the memory held; past it the
least recently kept windows' renderings go first, then the blocks start
over, which costs encoding again, never a wrong rendering.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from sidecar.providers.wire import Block, Chunk, chunk

T = TypeVar("T")
W = TypeVar("W")

# What an entry costs beside its text (held twice: in its blocks and joined): the dict
# slot, the key, the tuple and the Block objects.
ENTRY_OVERHEAD = 256


class Fragments:
    """Chunks by (object identity, tag), and windows' renderings; ``max_bytes`` 0 keeps nothing."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self._by_key: dict[tuple[int, str], tuple[object, Chunk]] = {}
        self._chunk_bytes = 0
        # (tag, identity of the first event): (that event, the state, its charge), oldest first
        self._windows: OrderedDict[tuple[str, int], tuple[object, object, int]] = OrderedDict()
        self._window_bytes = 0

    def __len__(self) -> int:
        return len(self._by_key)

    @property
    def bytes_held(self) -> int:
        return self._chunk_bytes + self._window_bytes

    @property
    def windows(self) -> int:
        """How many windows' renderings are kept."""
        return len(self._windows)

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
                self._make_room(charge)
                self._by_key[key] = (owner, made)
                self._chunk_bytes += charge
        return made

    def window(self, tag: str, first: object, kind: type[W]) -> W | None:
        """The rendering kept under ``tag`` of a window that began with ``first``, if any."""
        known = self._windows.get((tag, id(first)))
        if known is None or known[0] is not first or not isinstance(known[1], kind):
            return None
        return known[1]

    def keep_window(self, tag: str, first: object, state: object, charge: int) -> None:
        """Keep ``state``, the rendering under ``tag`` of a window that began with ``first``,
        charged ``charge`` bytes (in place of what was kept for it before)."""
        self.forget_window(tag, first)
        if not self.max_bytes or charge > self.max_bytes:
            return
        self._make_room(charge)
        self._windows[(tag, id(first))] = (first, state, charge)
        self._window_bytes += charge

    def forget_window(self, tag: str, first: object) -> None:
        known = self._windows.get((tag, id(first)))
        if known is not None and known[0] is first:
            del self._windows[(tag, id(first))]
            self._window_bytes -= known[2]

    def clear(self) -> None:
        self._clear_chunks()
        self._windows = OrderedDict()
        self._window_bytes = 0

    def _make_room(self, size: int) -> None:
        """Drop the least recently kept windows' renderings, then the chunks, until ``size``
        more bytes fit."""
        while self._windows and self.bytes_held + size > self.max_bytes:
            _, (_, _, charge) = self._windows.popitem(last=False)
            self._window_bytes -= charge
        if self.bytes_held + size > self.max_bytes:
            self._clear_chunks()

    def _clear_chunks(self) -> None:
        self._by_key = {}
        self._chunk_bytes = 0


NOTHING_KEPT = Fragments(0)
"""For a one-off rendering: every block is built afresh."""
