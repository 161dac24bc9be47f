"""Appends: a request's events into the engine, and the kept GetContext answers kept true.

AppendEvents and StreamEvents both append through here: the session ids
are taken into the caller's namespace, the label updates converted, and
after the write the session's kept GetContext answer is carried forward
over the new events, or dropped when it cannot be (see ``appended``); a
session a label update changed loses its kept answer too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.engine.engine import AppendResult, SessionEngine
from sidecar.engine.validation import check_label_update_counts
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import LabelUpdate, ModelUsage
from sidecar.server import convert, fields
from sidecar.server.context_cache import ContextResponses, EventBlobs


class Appends:
    """The servicer's appends over one engine, keeping its GetContext answers true."""

    def __init__(
        self, engine: SessionEngine, contexts: ContextResponses, blobs: EventBlobs
    ) -> None:
        self.engine = engine
        self.contexts = contexts
        self.blobs = blobs

    async def append(
        self,
        session_id: str,
        events: Any,
        expected_version: int,
        create_if_missing: bool,
        label_updates: Sequence[pb.LabelUpdate] = (),
        usage: ModelUsage | None = None,
    ) -> AppendResult:
        """Append ``events`` (protobuf) to the session a request names, as the request asks."""
        stored = fields.stored(session_id)
        expected = fields.optional_version(expected_version)
        # Counted before any is built: a million empty updates take seconds to convert.
        check_label_update_counts(label_updates, self.engine.limits)
        updates = [
            LabelUpdate(
                session_id=(
                    fields.stored(u.session_id, f"label_updates[{i}].session_id")
                    if u.session_id
                    else ""
                ),
                set=dict(u.set),
                remove=tuple(u.remove),
                expected_version=fields.optional_version(
                    u.expected_version, f"label_updates[{i}].expected_version"
                ),
            )
            for i, u in enumerate(label_updates)
        ]
        result = await self.engine.append(
            stored,
            convert.events_in(events, self.engine.limits),
            expected_version=expected,
            create_if_missing=create_if_missing,
            label_updates=updates,
            usage=usage,
        )
        for update in updates:
            if update.session_id:
                self.contexts.forget(update.session_id)
        self.appended(stored, result)
        return result

    def appended(self, stored: str, result: AppendResult) -> None:
        """Carry the session's kept GetContext answer forward over an append, or drop it."""
        if result.written == 0 or (result.compaction is not None and result.compaction.compacted):
            # A retry changes nothing here, but the version it reports may have moved
            # elsewhere (a background summary, another replica): the kept answer cannot
            # be carried forward on its word.
            self.contexts.forget(stored)
        else:
            self.contexts.appended(stored, result.session, result.events, self.blobs)
