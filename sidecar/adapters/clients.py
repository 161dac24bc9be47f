"""What both adapters share: a client per event loop, a compaction barrier, session keys
and names the service takes whatever their length, and arguments as the JSON the service
takes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import weakref
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json

from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow

# A compaction "pass" that never fires: Compact waits for a summary in flight first.
BARRIER = CompactionPolicy(trigger=None, strategy=SlidingWindow())

MAX_SESSION_ID = 128  # the service's limit on a session id's length


def fitted(value: str, limit: int) -> str:
    """``value`` when it is at most ``limit`` characters, else its first 60 characters and
    the SHA-256 of the whole of it (126 characters: ``limit`` is at least 128).

    The frameworks bound none of what they name (ids, agent names, branch paths): a
    value past the service's bound is stored fitted, the same every time it is sent,
    where refusing it would fail every call after.
    """
    if len(value) <= limit:
        return value
    return f"{value[:60]}:~{hashlib.sha256(value.encode()).hexdigest()}"


def fitted_key(key: str) -> str:
    """``key`` fitted to the service's session ids (``fitted``).

    The frameworks' ids have no length limit (a long user id, a thread id made of
    several, each non-ASCII character escaped as several ``:XX``); a key of escaped
    parts never holds ``:~``, so a fitted key is never another key's.
    """
    return fitted(key, MAX_SESSION_ID)


def strict_json(value: Any) -> str:
    """``value`` as JSON the service takes (RFC 8259): a NaN or an infinity, which Python's
    JSON writes and the service refuses, is null, as pydantic (and so ADK's own session
    services) write it. Anything else as ``json.dumps`` writes it."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(json.loads(to_json(value, inf_nan_mode="null")), ensure_ascii=False)


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
