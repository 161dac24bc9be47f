"""What both adapters share: a client per event loop, and a compaction barrier."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import Any

from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow

# A compaction "pass" that never fires: Compact waits for a summary in flight first.
BARRIER = CompactionPolicy(trigger=None, strategy=SlidingWindow())


class LoopClients:
    """One ``AsyncClient`` per event loop: a grpc.aio channel belongs to the loop that made it
    (``Runner.run`` runs its own loop in a thread)."""

    def __init__(self, target: AsyncClient | str, options: Mapping[str, Any]) -> None:
        self._fixed = target if isinstance(target, AsyncClient) else None
        self._address = target if isinstance(target, str) else ""
        self._options = dict(options)
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> AsyncClient:
        if self._fixed is not None:
            return self._fixed
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:
            client = AsyncClient(self._address, **self._options)
            self._by_loop[loop] = client
        return client

    async def close(self) -> None:
        """Close the clients this object made (not one it was given)."""
        loop = asyncio.get_running_loop()
        client = self._by_loop.pop(loop, None)
        if client is not None:
            await client.close()
