"""Session headers' handlers: create, get, list, update and delete a session.

Ids go out in the caller's own namespace (``tenancy``), and a session's
kept GetContext answer is dropped before any change to its header.
"""

from __future__ import annotations

from sidecar.compaction.policy import CompactionPolicy
from sidecar.engine.engine import SessionEngine
from sidecar.engine.validation import check_label_count, check_labels
from sidecar.errors import InvalidArgument
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.model import Session
from sidecar.server import convert, fields
from sidecar.server.context_cache import ContextResponses
from sidecar.server.tenancy import current_scope
from sidecar.store.protocol import SessionFilter

MAX_MASK_PATHS = 16
"""The most paths an UpdateSession mask may name (three exist; a repeat is harmless)."""


class SessionHeaders:
    """CreateSession, GetSession, ListSessions, UpdateSession and DeleteSession."""

    def __init__(self, engine: SessionEngine, contexts: ContextResponses) -> None:
        self.engine = engine
        self.store = engine.store
        self.contexts = contexts

    def _session_out(self, session: Session, out: session_pb2.Session) -> session_pb2.Session:
        convert.session_out(session, out, self.engine.models.profile(session))
        out.session_id = current_scope.get().outside(session.session_id)
        return out

    async def create_session(self, request: pb.CreateSessionRequest) -> session_pb2.Session:
        """A new session; without a policy it runs under the server's default."""
        policy = convert.policy_in(request.policy) if request.HasField("policy") else None
        check_label_count(request.labels, self.engine.limits)  # before the map is a dict
        session = await self.engine.create_session(
            fields.stored(request.session_id),
            policy=policy,
            labels=dict(request.labels),
            model=request.model,
        )
        return self._session_out(session, session_pb2.Session())

    async def get_session(self, request: pb.GetSessionRequest) -> session_pb2.Session:
        """The session's header."""
        session = await self.store.get_session(fields.stored(request.session_id))
        return self._session_out(session, session_pb2.Session())

    async def list_sessions(self, request: pb.ListSessionsRequest) -> pb.ListSessionsResponse:
        """A page of the sessions having every label of ``label_filter``, in id order."""
        check_labels(request.label_filter, self.engine.limits, "label_filter")
        page = await self.store.list_sessions(
            SessionFilter(labels=dict(request.label_filter), id_prefix=current_scope.get().prefix),
            page_size=fields.page_size(request.page_size),
            page_token=request.page_token,
        )
        out = pb.ListSessionsResponse(next_page_token=page.next_page_token)
        for session in page.items:
            self._session_out(session, out.sessions.add())
        return out

    async def update_session(self, request: pb.UpdateSessionRequest) -> session_pb2.Session:
        """Replace the policy, labels and/or model the update mask names."""
        session_id = fields.stored(request.session.session_id, "session.session_id")
        expected = fields.optional_version(request.expected_version)
        if len(request.update_mask.paths) > MAX_MASK_PATHS:  # counted before a list is made
            raise InvalidArgument(
                "update_mask.paths", f"at most {MAX_MASK_PATHS} paths (policy, labels, model)"
            )
        paths = list(request.update_mask.paths)
        if not paths:
            raise InvalidArgument("update_mask", "name at least one of: policy, labels, model")
        unknown = [p for p in paths if p not in ("policy", "labels", "model")]
        if unknown:
            raise InvalidArgument("update_mask.paths", f"cannot update {unknown[0][:64]!r}")
        if "labels" in paths:  # counted before the map is made a dict
            check_label_count(request.session.labels, self.engine.limits, "session.labels")
        new_policy: CompactionPolicy | None = None
        if "policy" in paths and request.session.HasField("policy"):
            new_policy = convert.policy_in(request.session.policy, "session.policy")
        self.contexts.forget(session_id)
        session = await self.engine.update_session(
            session_id,
            policy=new_policy,
            set_policy="policy" in paths,
            labels=dict(request.session.labels) if "labels" in paths else None,
            model=request.session.model if "model" in paths else None,
            expected_version=expected,
        )
        return self._session_out(session, session_pb2.Session())

    async def delete_session(self, request: pb.DeleteSessionRequest) -> pb.DeleteSessionResponse:
        """Delete the session, its log and its token estimates."""
        session_id = fields.stored(request.session_id)
        self.contexts.forget(session_id)
        await self.store.delete_session(session_id)
        self.engine.models.forget(session_id)  # its estimates go with it
        self.engine.watchers.end(session_id)  # its watches end (NOT_FOUND)
        return pb.DeleteSessionResponse()
