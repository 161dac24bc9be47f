"""GetContext's answers: the kept one while it still holds, else built from the window.

A session's last answer is kept (``context_cache``) and carried over its
appends; one header read tells whether it still holds. An answer in a
provider's format (``renderings``) is kept beside it, or rendered from the
kept window. An answer too big to send whole goes out without content and
is neither kept nor rendered: the client reads the events in parts.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from sidecar.engine.engine import SessionEngine
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import Event, Session
from sidecar.providers.fragments import Fragments
from sidecar.providers.prefix import StablePrefix, item_digest
from sidecar.providers.render import ContextFormat
from sidecar.server import answers, fields, renderings
from sidecar.server.context_cache import ContextResponses, EventBlobs


class ContextAnswers:
    """GetContext over one engine and the servicer's caches; see the module docstring."""

    def __init__(
        self,
        engine: SessionEngine,
        *,
        blobs: EventBlobs,
        fragments: Fragments,
        contexts: ContextResponses,
        max_message_bytes: int,
    ) -> None:
        self.engine = engine
        self.store = engine.store
        self.blobs = blobs
        self.fragments = fragments
        self.contexts = contexts
        self.max_message_bytes = max_message_bytes
        self.reads: collections.Counter[str] = collections.Counter()
        """GetContext answers by how they were made: ``kept`` or ``built``."""

    async def get_context(self, request: pb.GetContextRequest) -> pb.GetContextResponse:
        """The answer to GetContext: the kept one if it still holds, else built and kept."""
        session_id = fields.stored(request.session_id)
        fmt = renderings.format_in(request.format)
        if session_id in self.contexts:  # one header read tells whether it still holds
            header = await self.store.get_session(session_id)
            kept = self.contexts.get(session_id, header)
            if fmt is not None and kept is not None:
                kept = self._kept_rendered(session_id, header, kept, fmt)
            if kept is not None:
                self.engine.models.note(header)  # the estimate a usage report is held to
                self.reads["kept"] += 1
                # a rendered answer is fitted already (see renderings.rendered)
                return (
                    kept if fmt is not None else answers.fit_context(kept, self.max_message_bytes)
                )
        session, events = await self.engine.context(session_id)
        keep = self.contexts.admits(session_id)  # not a session read once
        prefix = StablePrefix(session, events, self.blobs.digest if keep else item_digest)
        out = self.blobs.response(session, events, prefix, self.max_message_bytes, keep=keep)
        self.reads["built"] += 1
        if out.content_omitted:  # read in parts by the client: neither kept nor rendered
            return out
        if keep:
            self.contexts.put(session_id, session, out, events, prefix)
        if fmt is not None:
            return self._rendered(session_id, session, out, events, fmt)
        return out

    def _kept_rendered(
        self,
        session_id: str,
        session: Session,
        kept: pb.GetContextResponse,
        fmt: ContextFormat,
    ) -> pb.GetContextResponse | None:
        """The kept answer in ``fmt``: kept itself, or rendered from the kept window; None
        when the window is not kept (then it is read again)."""
        rendered = self.contexts.rendered(session_id, fmt)
        if rendered is not None:
            return rendered
        window = self.contexts.window(session_id)
        if window is None:
            return None
        return self._rendered(session_id, session, kept, window, fmt)

    def _rendered(
        self,
        session_id: str,
        session: Session,
        answer: pb.GetContextResponse,
        window: Sequence[Event],
        fmt: ContextFormat,
    ) -> pb.GetContextResponse:
        """``answer`` (for ``window``) rendered in ``fmt``, and kept beside it."""
        out = renderings.rendered(answer, window, fmt, self.max_message_bytes, self.fragments)
        if out.rendering_bytes:  # not when the answer goes out without content
            self.contexts.keep_rendered(session_id, session, fmt, out.answer, out.rendering_bytes)
        return out.answer
