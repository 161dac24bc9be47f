"""Undo and history: restoring the newest compaction, and listing what each pass did.

A restore is a write like a compaction: made under the session's lock, in
one store transaction, recorded in the history (strategy ``restore``) and
published to the session's watchers as a compaction result. A summary in
flight while it lands was planned on the compaction the restore undid, so
the store refuses it (``superseded``): a restore is never silently undone by
a pass that started before it.
"""

from __future__ import annotations

import logging
import re

from sidecar.engine.answer_window import window_after
from sidecar.engine.host import EngineHost
from sidecar.engine.validation import check_stored_session_id
from sidecar.errors import InvalidArgument
from sidecar.model import CompactionResult
from sidecar.store.protocol import RESTORE_STRATEGY, CompactionRecord, Page

log = logging.getLogger(__name__)

_COMPACTION_ID = re.compile(r"[0-9A-Za-z_-]{1,128}")
"""What a compaction id can be (the server writes 32 hex digits): checked before any
lookup, so a megabyte of id is refused naming the field, never echoed in an error."""


def _check_compaction_id(compaction_id: str, field: str, alternative: str = "") -> None:
    """InvalidArgument naming ``field`` unless ``compaction_id`` can be a compaction id."""
    if not _COMPACTION_ID.fullmatch(compaction_id):
        raise InvalidArgument(field, f"must be a compaction id (ListCompactions){alternative}")


class Restorer:
    """Restores compactions and lists the history over the engine's store."""

    def __init__(self, host: EngineHost) -> None:
        self._host = host

    async def restore(
        self,
        session_id: str,
        compaction_id: str = "",
        *,
        expected_version: int | None = None,
        pause_auto_compaction: bool = False,
    ) -> CompactionResult:
        """Undo ``compaction_id`` ("" for the newest standing one); see ``Store.restore``."""
        check_stored_session_id(session_id)
        if compaction_id:
            _check_compaction_id(compaction_id, "compaction_id", ", or empty for the newest")
        host = self._host
        async with host.locks.hold(session_id):
            outcome = await host.store.restore(
                session_id,
                compaction_id,
                expected_version=expected_version,
                pause_auto_compaction=pause_auto_compaction,
            )
            window = await window_after(host.store, session_id, outcome.session)
        result = CompactionResult(
            compacted=True,
            strategy=RESTORE_STRATEGY,
            active_events=window[0],
            active_events_omitted=window[1],
            archived_events=outcome.archived,
            tokens_estimated_saved=outcome.tokens_saved,
            version=outcome.session.version,
            compaction_id=outcome.restore_id,
            restored_ids=outcome.restored_ids,
        )
        log.info(
            "restored %s: %d events back, %d archived",
            session_id,
            len(outcome.restored_ids),
            len(outcome.archived),
            extra={
                "session_id": session_id,
                "compaction_id": outcome.restore_id,
                "strategy": RESTORE_STRATEGY,
                "version": outcome.session.version,
            },
        )
        host.observer.compaction(result)  # compaction_passes_total{strategy="restore"}
        host.watchers.publish(session_id, result)
        return result

    async def record(self, session_id: str, compaction_id: str) -> CompactionRecord:
        """One compaction of the session's history, its id lists whole."""
        check_stored_session_id(session_id)
        _check_compaction_id(compaction_id, "ids_of")
        return await self._host.store.compaction_record(session_id, compaction_id)

    async def history(
        self, session_id: str, *, page_size: int, page_token: str, max_bytes: int | None
    ) -> Page[CompactionRecord]:
        """The session's compactions, newest first, pages bounded in bytes."""
        check_stored_session_id(session_id)
        return await self._host.store.list_compactions(
            session_id,
            page_size=page_size,
            page_token=page_token,
            newest_first=True,
            max_bytes=max_bytes,
        )
