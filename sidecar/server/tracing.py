"""OpenTelemetry tracing of RPCs and summarizer calls, when OpenTelemetry is there.

Only the OpenTelemetry API is used, and only if it is installed
(``pip install 'compaction-sidecar[otel]'``); without it nothing here runs and
nothing is imported. With it, every RPC is a SERVER span that continues the
caller's trace (W3C ``traceparent`` in the request metadata), and every
summarizer call a child span with its token usage. Where the spans go is the
OpenTelemetry SDK's business, configured the standard way: run
``opentelemetry-instrument compaction-sidecar serve`` with the ``OTEL_*``
environment variables (``OTEL_SERVICE_NAME``, ``OTEL_TRACES_EXPORTER``,
``OTEL_EXPORTER_OTLP_ENDPOINT``...). Tracing is on only when those ask for
traces (see ``enabled``).

Spans carry ids and sizes, never event content.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast

import grpc

from sidecar.server.interceptors import Behavior, ServerInterceptor, ended_with, rebuilt
from sidecar.summarizer.protocol import Summarizer, SummaryRequest, SummaryResponse

TRACER_NAME = "compaction-sidecar"


_CONFIGURED_BY = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Tracing is on when the OpenTelemetry API is installed and the environment asks for it.

    Asking means setting the standard ``OTEL_TRACES_EXPORTER`` or an OTLP
    endpoint (and not ``OTEL_SDK_DISABLED=true``); otherwise even the no-op
    spans would cost every call something for nothing.
    """
    environ = os.environ if environ is None else environ
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return False
    if not any(environ.get(name) for name in _CONFIGURED_BY):
        return False
    return importlib.util.find_spec("opentelemetry") is not None


class TracingInterceptor(ServerInterceptor):
    """One SERVER span per RPC, continuing the trace the caller's metadata carries."""

    def __init__(self) -> None:
        from opentelemetry import propagate, trace

        self._trace = trace
        self._propagate = propagate

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
        full = handler_call_details.method.lstrip("/")
        service, _, method = full.rpartition("/")
        carrier = {
            key: value
            for key, value in handler_call_details.invocation_metadata or ()
            if isinstance(value, str)
        }
        return self._traced(handler, full, service, method, carrier)

    def _traced(
        self,
        handler: grpc.RpcMethodHandler[Any, Any],
        name: str,
        service: str,
        method: str,
        carrier: dict[str, str],
    ) -> grpc.RpcMethodHandler[Any, Any]:
        trace = self._trace
        parent = self._propagate.extract(carrier)
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}

        def start() -> Any:
            tracer = trace.get_tracer(TRACER_NAME)
            return tracer.start_as_current_span(
                name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes
            )

        def finish(span: Any, context: grpc.aio.ServicerContext[Any, Any], failed: bool) -> None:
            number = ended_with(context, failed).value[0]
            span.set_attribute("rpc.grpc.status_code", number)
            if number != 0:
                span.set_status(trace.Status(trace.StatusCode.ERROR))

        def around_stream(behavior: Behavior) -> Behavior:
            async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                with start() as span:
                    failed = True
                    try:
                        async for response in cast(AsyncIterator[Any], behavior(request, context)):
                            yield response
                        failed = False
                    finally:
                        finish(span, context, failed)

            return streaming

        def around_unary(behavior: Behavior) -> Behavior:
            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                with start() as span:
                    failed = True
                    try:
                        response = await behavior(request, context)
                        failed = False
                        return response
                    finally:
                        finish(span, context, failed)

            return unary

        return rebuilt(handler, around_unary=around_unary, around_stream=around_stream)


class TracedSummarizer:
    """A Summarizer whose every call is a span (a child of the RPC that set it off)."""

    def __init__(self, inner: Summarizer) -> None:
        from opentelemetry import trace

        self.inner = inner
        self._trace = trace

    def __getattr__(self, name: str) -> Any:  # aclose, outcomes: the inner summarizer's
        return getattr(self.inner, name)

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        tracer = self._trace.get_tracer(TRACER_NAME)
        with tracer.start_as_current_span(
            "compaction.summarize", kind=self._trace.SpanKind.CLIENT
        ) as span:
            span.set_attribute("compaction.summarizer", type(self.inner).__name__)
            response = await self.inner.summarize(request)
            span.set_attribute("gen_ai.usage.input_tokens", response.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.output_tokens)
            span.set_attribute("compaction.summary_blank", not response.text.strip())
            return response
