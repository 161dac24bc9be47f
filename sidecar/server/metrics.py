"""Prometheus metrics: what the service did, how long it took, what it saved.

Collected and exported only when ``--metrics-listen`` names an address: a
plain HTTP listener, separate from the gRPC port, serving ``/metrics`` in the
Prometheus text format. Without it nothing would read them, so the server
does not import this module (prometheus_client is 3 MiB of a server at rest)
nor time its calls and store operations (``sidecar.server.app``). Every
metric lives in the service's own registry, so two servers in one process
(the tests) never mix their numbers.

Names follow the Prometheus conventions (``_total`` counters, ``_seconds``
histograms). RPC metrics use the labels of go-grpc-prometheus
(``grpc_service``, ``grpc_method``, ``grpc_code``), which dashboards and
alerts for gRPC services already expect. No label ever holds a session id:
cardinality stays bounded however many sessions there are.
"""

from __future__ import annotations

import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sidecar.errors import StoreUnavailable
from sidecar.model import CompactionResult
from sidecar.server.interceptors import (
    Behavior,
    HandlerCache,
    ServerInterceptor,
    ended_with,
    rebuilt,
)
from sidecar.store.protocol import Store

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from sidecar.engine.engine import SessionEngine
    from sidecar.server.servicer import CompactionServicer

_RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_STORE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1)
_SUMMARY_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)

STORE_OPERATIONS = frozenset(
    {
        "create_session",
        "get_session",
        "update_session",
        "list_sessions",
        "delete_session",
        "append",
        "append_many",
        "active_window",
        "window_head",
        "apply",
        "list_events",
        "search",
        "list_compactions",
        "compaction_result",
        "compaction_record",
        "restore",
        "ping",
    }
)


class Metrics:
    """Every metric of one server, in its own registry; also the engine's observer."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rpc_started = Counter(
            "grpc_server_started_total",
            "RPCs started, by method.",
            ["grpc_service", "grpc_method"],
            registry=r,
        )
        self.rpc_handled = Counter(
            "grpc_server_handled_total",
            "RPCs completed, by method and status code.",
            ["grpc_service", "grpc_method", "grpc_code"],
            registry=r,
        )
        self.rpc_seconds = Histogram(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its end (a stream's whole life).",
            ["grpc_service", "grpc_method"],
            buckets=_RPC_BUCKETS,
            registry=r,
        )
        self.events_appended = Counter(
            "compaction_events_appended_total",
            "Events stored by appends (a retry of stored events adds nothing).",
            registry=r,
        )
        self.counts_landed_total = Counter(
            "compaction_token_counts_landed_total",
            "Events stored with an estimated token count whose exact count landed later"
            " (counted where a decision needed it, or in the background).",
            registry=r,
        )
        self.compactions = Counter(
            "compaction_passes_total",
            "Compaction passes by strategy and outcome (compacted, skipped, failed),"
            " with the skip reason.",
            ["strategy", "outcome", "reason"],
            registry=r,
        )
        self.tokens_saved = Counter(
            "compaction_tokens_saved_total",
            "Estimated tokens taken out of the active windows by compactions.",
            ["strategy"],
            registry=r,
        )
        self.events_archived = Counter(
            "compaction_events_archived_total",
            "Events moved out of the active windows (still in the log, still searchable).",
            ["strategy"],
            registry=r,
        )
        self.identifiers_dropped = Counter(
            "compaction_identifiers_dropped_total",
            "Identifiers (ids, paths, URLs, numbers, dates) of what landed passes archived or"
            " cleared that the window they left holds nowhere (summaries and placeholders"
            " included).",
            ["strategy"],
            registry=r,
        )
        self.events_cleared = Counter(
            "compaction_events_cleared_total",
            "Events whose tool results clear_tool_results replaced with a placeholder"
            " (still active; the log keeps the original).",
            ["strategy"],
            registry=r,
        )
        self.tokens_cleared = Counter(
            "compaction_tokens_cleared_total",
            "Estimated tokens freed by clearing tool results (part of tokens saved).",
            ["strategy"],
            registry=r,
        )
        self.events_restored = Counter(
            "compaction_events_restored_total",
            "Events a restore made active again or uncleared (RestoreCompaction).",
            registry=r,
        )
        self.summarizer_seconds = Histogram(
            "compaction_summarizer_duration_seconds",
            "Latency of answered summarizer calls, retries included.",
            buckets=_SUMMARY_BUCKETS,
            registry=r,
        )
        self.summarizer_tokens = Counter(
            "compaction_summarizer_tokens_total",
            "Tokens the summarizer reported using, by direction (input, output).",
            ["direction"],
            registry=r,
        )
        self.summarizer_failures = Counter(
            "compaction_summarizer_failures_total",
            "Summarizer calls that failed, by kind (timeout, unavailable, error).",
            ["kind"],
            registry=r,
        )
        self.store_seconds = Histogram(
            "compaction_store_operation_duration_seconds",
            "Latency of store operations.",
            ["operation"],
            buckets=_STORE_BUCKETS,
            registry=r,
        )
        self.store_unavailable = Counter(
            "compaction_store_unavailable_total",
            "Store operations that failed because the store could not be reached.",
            ["operation"],
            registry=r,
        )
        self.open_streams = Gauge(
            "compaction_open_streams",
            "StreamEvents and WatchSession calls open now.",
            ["grpc_method"],
            registry=r,
        )
        self._engine_bound = False

    def bind_engine(self, engine: SessionEngine) -> None:
        """Report the engine's own tallies (locks, summaries, watchers) at scrape time."""
        if not self._engine_bound:
            self._engine_bound = True
            self.registry.register(_EngineCollector(engine))

    def bind_servicer(self, servicer: CompactionServicer) -> None:
        """Report GetContext's caches and answers at scrape time."""
        self.registry.register(_ServicerCollector(servicer))

    # -- the engine's observer ---------------------------------------------------

    def appended(self, events: int) -> None:
        self.events_appended.inc(events)

    def counts_landed(self, events: int) -> None:
        self.counts_landed_total.inc(events)

    def compaction(self, result: CompactionResult) -> None:
        if result.compacted:
            outcome, reason = "compacted", ""
            self.tokens_saved.labels(result.strategy).inc(max(0, result.tokens_estimated_saved))
            self.events_archived.labels(result.strategy).inc(len(result.archived_events))
            if result.identifiers_dropped:
                self.identifiers_dropped.labels(result.strategy).inc(result.identifiers_dropped)
            if result.restored_ids:
                self.events_restored.inc(len(result.restored_ids))
            if result.cleared_ids:
                self.events_cleared.labels(result.strategy).inc(len(result.cleared_ids))
                self.tokens_cleared.labels(result.strategy).inc(
                    max(0, result.tokens_estimated_saved)
                )
        else:
            reason = result.skipped_reason.value if result.skipped_reason else ""
            outcome = "failed" if reason == "failed" else "skipped"
        self.compactions.labels(result.strategy, outcome, reason).inc()

    def summarized(self, seconds: float, input_tokens: int, output_tokens: int) -> None:
        self.summarizer_seconds.observe(seconds)
        self.summarizer_tokens.labels("input").inc(max(0, input_tokens))
        self.summarizer_tokens.labels("output").inc(max(0, output_tokens))

    def summarizer_failed(self, kind: str) -> None:
        self.summarizer_failures.labels(kind).inc()

    # -- export ------------------------------------------------------------------

    def serve(self, listen: str) -> WSGIServer:
        """Serve ``/metrics`` on ``host:port`` from a background thread; returns the server."""
        host, _, port = listen.rpartition(":")
        server, _ = start_http_server(
            int(port), addr=host.strip("[]") or "0.0.0.0", registry=self.registry
        )
        return server


class _EngineCollector(Collector):
    """Values the engine keeps anyway, read when Prometheus scrapes, not on every change."""

    def __init__(self, engine: SessionEngine) -> None:
        self._engine = engine

    def collect(self) -> Iterable[Metric]:
        engine = self._engine
        yield GaugeMetricFamily(
            "compaction_sessions_in_flight",
            "Sessions with an append or compaction running or waiting: the lock registry's"
            " size, back to zero when they go idle.",
            value=len(engine.locks),
        )
        yield GaugeMetricFamily(
            "compaction_summaries_in_flight",
            "Summarizing passes running now.",
            value=engine.in_flight(),
        )
        yield GaugeMetricFamily(
            "compaction_watchers",
            "Watchers subscribed to compaction results.",
            value=engine.watchers.watchers,
        )
        yield CounterMetricFamily(
            "compaction_watcher_dropped",
            "Compaction results dropped for watchers that fell behind (they are told how many).",
            value=engine.watchers.dropped,
        )
        yield GaugeMetricFamily(
            "compaction_watcher_queued",
            "Compaction results waiting in watchers' queues, not yet read (how far behind).",
            value=engine.watchers.queued(),
        )
        outcomes = getattr(engine.summarizer, "outcomes", None)  # the Gemini summarizer's
        if isinstance(outcomes, collections.Counter):
            calls = CounterMetricFamily(
                "compaction_summarizer_calls",
                "Summarizer calls by how they ended (ok, blank, blocked, rate_limited, ...).",
                labels=["outcome"],
            )
            for outcome, count in sorted(outcomes.items()):
                calls.add_metric([str(outcome)], count)
            yield calls


_EACH_ITS_OWN = frozenset({"append_many"})
"""Operations that answer a list with each failure in its place."""


class TimedStore:
    """A Store that times each operation into ``compaction_store_operation_duration_seconds``.

    Wraps any Store by delegation; attributes that are not store operations
    pass through untouched.
    """

    def __init__(self, inner: Store, metrics: Metrics) -> None:
        self.inner = inner
        self._metrics = metrics

    def __getattr__(self, name: str) -> Any:
        """Called only for names not yet on the instance: each timed operation is built once."""
        attribute = getattr(self.inner, name)
        if name not in STORE_OPERATIONS:
            return attribute
        histogram = self._metrics.store_seconds.labels(name)
        unavailable = self._metrics.store_unavailable.labels(name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                result = await attribute(*args, **kwargs)
            except StoreUnavailable:
                unavailable.inc()
                raise
            finally:
                histogram.observe(time.perf_counter() - started)
            if name in _EACH_ITS_OWN:  # each failure in its place, not raised: counted each
                failed = sum(isinstance(outcome, StoreUnavailable) for outcome in result)
                if failed:
                    unavailable.inc(failed)
            return result

        setattr(self, name, timed)
        return timed

    @classmethod
    def wrap(cls, inner: Store, metrics: Metrics) -> Store:
        return cast(Store, cls(inner, metrics))


_STREAMING = frozenset({"StreamEvents", "WatchSession"})


class RpcMetricsInterceptor(ServerInterceptor):
    """Counts and times every RPC, with the status code it ended with.

    Installed first, so calls refused by authentication are counted too
    (as UNAUTHENTICATED).
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._handlers = HandlerCache()

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        path = handler_call_details.method
        service, _, method = path.lstrip("/").rpartition("/")
        return self._handlers.get(
            path, handler, lambda: _instrumented(handler, self._metrics, service, method)
        )


def _instrumented(
    handler: grpc.RpcMethodHandler[Any, Any], metrics: Metrics, service: str, method: str
) -> grpc.RpcMethodHandler[Any, Any]:
    started_total = metrics.rpc_started.labels(service, method)
    seconds = metrics.rpc_seconds.labels(service, method)
    open_streams = metrics.open_streams.labels(method) if method in _STREAMING else None

    def finish(context: grpc.aio.ServicerContext[Any, Any], began: float, failed: bool) -> None:
        seconds.observe(time.perf_counter() - began)
        metrics.rpc_handled.labels(service, method, ended_with(context, failed).name).inc()

    def around_stream(behavior: Behavior) -> Behavior:
        async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            started_total.inc()
            began = time.perf_counter()
            failed = True
            if open_streams is not None:
                open_streams.inc()
            try:
                async for response in cast(AsyncIterator[Any], behavior(request, context)):
                    yield response
                failed = False
            finally:
                if open_streams is not None:
                    open_streams.dec()
                finish(context, began, failed)

        return streaming

    def around_unary(behavior: Behavior) -> Behavior:
        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            started_total.inc()
            began = time.perf_counter()
            failed = True
            try:
                response = await behavior(request, context)
                failed = False
                return response
            finally:
                finish(context, began, failed)

        return unary

    return rebuilt(handler, around_unary=around_unary, around_stream=around_stream)


class _ServicerCollector(Collector):
    """GetContext's answers, the read caches' sizes and SQLite's writes, read when Prometheus
    scrapes."""

    def __init__(self, servicer: CompactionServicer) -> None:
        self._servicer = servicer

    def collect(self) -> Iterable[Metric]:
        servicer = self._servicer
        reads = CounterMetricFamily(
            "compaction_context_reads",
            "GetContext answers: kept (the last answer, still current) or built from the store.",
            labels=["answer"],
        )
        for answer in ("kept", "built"):
            reads.add_metric([answer], servicer.context_reads[answer])
        yield reads
        held = GaugeMetricFamily(
            "compaction_read_cache_bytes",
            "Bytes the read caches hold (bounded together by --read-cache-mib).",
            labels=["cache"],
        )
        cache_bytes = getattr(servicer.store, "cache_bytes", None)
        if cache_bytes is not None:
            held.add_metric(["decoded_events"], cache_bytes())
        held.add_metric(["event_wire_bytes"], servicer.blobs.bytes_held)
        held.add_metric(["rendered_blocks"], servicer.fragments.bytes_held)
        held.add_metric(["context_answers"], servicer.contexts.bytes_held)
        yield held
        write_counts = getattr(servicer.store, "write_counts", None)
        if write_counts is not None:  # SQLite's one writer
            inline, queued, groups = write_counts()
            writes = CounterMetricFamily(
                "compaction_sqlite_writes",
                "SQLite writes: committed at once on the event loop's thread (inline: a light"
                " append finding the writer idle) or queued for the writer's thread.",
                labels=["path"],
            )
            writes.add_metric(["inline"], inline)
            writes.add_metric(["queued"], queued)
            yield writes
            yield CounterMetricFamily(
                "compaction_sqlite_write_groups",
                "Transactions the SQLite writer's thread committed the queued writes in.",
                value=groups,
            )
