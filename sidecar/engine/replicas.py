"""Other replicas' compactions, relayed to this replica's watchers.

With a shared store, a compaction another replica lands reaches this one as a
notice, and the news is looked up and published to the session's watchers
here; sessions nobody here watches cost nothing. After an outage of the notice
connection, ``catch_up`` publishes what landed meanwhile, from the version
each watched session was at when its first watcher came. News of one session
is published one at a time, in the order it arrived (asyncio locks are first
come, first served), so a quicker lookup never overtakes an earlier one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from sidecar.engine.answer_window import window_after, with_window
from sidecar.engine.host import EngineHost
from sidecar.engine.locks import LockRegistry
from sidecar.errors import SessionNotFound, StoreUnavailable
from sidecar.model import CompactionResult

# The engine's logger: log pipelines filter on its name (see sidecar.server.logs).
log = logging.getLogger("sidecar.engine.engine")


class ReplicaRelay:
    """Publishes other replicas' compactions to this replica's watchers."""

    def __init__(self, host: EngineHost) -> None:
        self._host = host
        self._relays: set[asyncio.Task[None]] = set()
        self._follows_replicas = False
        self._relay_order = LockRegistry()
        self._closing = False

    def follow(self) -> None:
        """The store is shared: keep what ``catch_up`` needs for watched sessions."""
        self._follows_replicas = True

    def watching(self, session_id: str) -> None:
        """A watcher of ``session_id`` subscribed: note where the session is, if not known."""
        if self._follows_replicas and self._host.watchers.known(session_id) is None:
            self._spawn(self._note_start(session_id))

    async def _note_start(self, session_id: str) -> None:
        """Record which compaction a newly watched session is at, for ``catch_up``."""
        try:
            session = await self._host.store.get_session(session_id)
        except (SessionNotFound, StoreUnavailable):
            return  # not known: a catch-up skips it
        self._host.watchers.note(session_id, session.version)

    async def catch_up(self) -> None:
        """Publish the compactions landed after each watched session's known version.

        Oldest first; the hub drops any its watchers were told already.
        """
        for session_id in self._host.watchers.sessions():
            known = self._host.watchers.known(session_id)
            if known is None:
                log.info("watchers of %s not caught up: where they started is unknown", session_id)
                continue
            try:
                async with self._relay_order.hold(session_id):
                    for compaction_id in await self._compactions_after(session_id, known):
                        result = await self._landed(session_id, compaction_id)
                        self._host.watchers.publish(session_id, result)
            except Exception as exc:  # one session's failure is not the others'
                log.info("watchers of %s not caught up: %r", session_id, exc)

    async def _compactions_after(self, session_id: str, version: int) -> list[str]:
        """The ids of the session's compactions that left it above ``version``, oldest first."""
        ids: list[str] = []
        token = ""
        while True:
            page = await self._host.store.list_compactions(
                session_id, page_size=1000, page_token=token
            )
            ids += [r.compaction_id for r in page.items if r.version_after > version]
            token = page.next_page_token
            if not token:
                return ids

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._relays.add(task)
        task.add_done_callback(self._relays.discard)

    def relay(self, session_id: str, compaction_id: str) -> None:
        """Look up and publish one compaction, unless nobody here watches its session."""
        if self._closing or not self._host.watchers.watched(session_id):
            return
        self._spawn(self._relay(session_id, compaction_id))

    async def _relay(self, session_id: str, compaction_id: str) -> None:
        async with self._relay_order.hold(session_id):
            try:
                result = await self._landed(session_id, compaction_id)
            except (KeyError, SessionNotFound, StoreUnavailable) as exc:
                log.info("compaction %s of %s not relayed: %r", compaction_id, session_id, exc)
                return
            self._host.watchers.publish(session_id, result)

    async def _landed(self, session_id: str, compaction_id: str) -> CompactionResult:
        """A compaction another replica landed, as its watchers here are told of it: with the
        window now, while it is small (``sidecar.engine.answer_window``)."""
        store = self._host.store
        result = await store.compaction_result(session_id, compaction_id)
        session = await store.get_session(session_id)
        return with_window(result, await window_after(store, session_id, session))

    def close(self) -> None:
        """Relay no more news, and cancel the lookups under way."""
        self._closing = True
        for relay in list(self._relays):
            relay.cancel()
