"""The log's handlers: its compaction records, restoring one, its events, and search.

Every page is held to half the server's send limit, so an answer always
fits; a record alone past a page goes out without its ids, which are read
page by page (``ListCompactionsRequest.ids_of``). A search runs for at most
``search_timeout_s``, or the caller's deadline when that comes first.
"""

from __future__ import annotations

from typing import Any

import grpc

from sidecar.engine.engine import SessionEngine
from sidecar.errors import InvalidArgument, LimitExceeded
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import CompactionResult
from sidecar.server import answers, compaction_ids, convert, fields
from sidecar.server.context_cache import ContextResponses
from sidecar.server.tenancy import current_scope
from sidecar.store.protocol import SearchQuery
from sidecar.store.search_terms import query_terms


class History:
    """ListCompactions, RestoreCompaction, ListEvents and SearchEvents over one engine."""

    def __init__(
        self,
        engine: SessionEngine,
        contexts: ContextResponses,
        *,
        max_message_bytes: int,
        search_timeout_s: float,
    ) -> None:
        self.engine = engine
        self.store = engine.store
        self.contexts = contexts
        self.max_message_bytes = max_message_bytes
        self.search_timeout_s = search_timeout_s

    async def list_compactions(
        self, request: pb.ListCompactionsRequest
    ) -> pb.ListCompactionsResponse:
        """A page of the session's compaction records, or of one record's ids (``ids_of``)."""
        session_id = fields.stored(request.session_id)
        page_size = fields.page_size(request.page_size)
        budget = self.max_message_bytes // 2
        if request.ids_of:  # one record's ids, page by page
            record = await self.engine.restores.record(session_id, request.ids_of)
            listed, token = compaction_ids.ids_page(record, page_size, request.page_token, budget)
            return pb.ListCompactionsResponse(compactions=[listed], next_page_token=token)
        page = await self.engine.restores.history(
            session_id,
            page_size=page_size,
            page_token=request.page_token,
            max_bytes=budget,
        )
        out = pb.ListCompactionsResponse(next_page_token=page.next_page_token)
        for record in page.items:
            added = out.compactions.add()
            convert.record_out(record, added)
            answers.fit_record(added, budget)  # a record alone past a page: its ids left out
        return out

    async def restore_compaction(
        self, request: pb.RestoreCompactionRequest
    ) -> pb.RestoreCompactionResponse:
        """Restore what a compaction archived; the kept GetContext answer is dropped first."""
        session_id = fields.stored(request.session_id)
        expected = fields.optional_version(request.expected_version)
        self.contexts.forget(session_id)
        result = await self.engine.restores.restore(
            session_id,
            request.compaction_id,
            expected_version=expected,
            pause_auto_compaction=request.pause_auto_compaction,
        )
        return await self.engine.window_work.run(self._restore_answer, result)

    def _restore_answer(self, result: CompactionResult) -> pb.RestoreCompactionResponse:
        out = pb.RestoreCompactionResponse()
        answers.result_in(result, out.result, out, self.max_message_bytes)
        return out

    async def list_events(self, request: pb.ListEventsRequest) -> pb.ListEventsResponse:
        """A page of the session's events, archived ones too unless ``active_only``."""
        page = await self.store.list_events(
            fields.stored(request.session_id),
            page_size=fields.page_size(request.page_size),
            page_token=request.page_token,
            include_archived=not request.active_only,
            max_bytes=self.max_message_bytes // 2,
        )
        out = pb.ListEventsResponse(next_page_token=page.next_page_token)
        convert.events_out(page.items, out.events)
        return out

    async def search_events(
        self, request: pb.SearchEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SearchEventsResponse:
        """A page of hits, best first; past its time, RESOURCE_EXHAUSTED naming the limit."""
        if not request.query.strip():
            raise InvalidArgument("query", "is required")
        query_terms(request.query)  # past the bounds, refused before the store is touched
        scope = current_scope.get()
        query = SearchQuery(
            text=request.query,
            session_id=fields.stored(request.session_id) if request.session_id else None,
            session_prefix=scope.prefix,
            roles=convert.roles_in(request.roles, "roles"),
            include_active=request.include_active,
            since=convert.time_in(request.since, "since") if request.HasField("since") else None,
            until=convert.time_in(request.until, "until") if request.HasField("until") else None,
        )
        remaining = context.time_remaining()
        budget = self.search_timeout_s
        by_deadline = remaining is not None and remaining < budget
        try:
            page = await self.store.search(
                query,
                page_size=fields.page_size(request.page_size),
                page_token=request.page_token,
                timeout_s=remaining if by_deadline else budget,
                max_bytes=self.max_message_bytes // 2,
            )
        except TimeoutError:
            if by_deadline:
                raise  # the caller's own deadline: DEADLINE_EXCEEDED
            raise LimitExceeded(
                "search_timeout_s",
                f"the search ran past {budget:g} s, the longest one may take; narrow it"
                " (rarer words, one session, a time range, a smaller page)",
            ) from None
        out = pb.SearchEventsResponse(next_page_token=page.next_page_token)
        for hit in page.items:
            added = out.hits.add(
                session_id=scope.outside(hit.session_id),
                rank=hit.rank,
                snippet=hit.snippet,
                archived_by=hit.archived_by,
            )
            convert.event_out(hit.event, added.event)
        return out
