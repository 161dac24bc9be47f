"""OpenTelemetry: a span per RPC continuing the caller's trace, a child span per summary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.server import tracing
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, running
from tests.server.test_api import SUMMARY, turn

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once: OpenTelemetry allows one) feeding memory."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def test_tracing_is_on_only_when_the_environment_asks() -> None:
    assert not tracing.enabled({})
    assert tracing.enabled({"OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing.enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"})
    assert not tracing.enabled({"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing.enabled({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"})


async def test_rpcs_and_summaries_are_spans_in_the_callers_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = (("traceparent", f"00-{trace_id}-00f067aa0ba902b7-01"),)
    async with running(tmp_path, summarizer=FakeSummarizer("summary")) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(
                pb.CreateSessionRequest(session_id="s", policy=SUMMARY), metadata=traceparent
            )
            for n in range(4):
                await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id="s", events=turn(n)), metadata=traceparent
                )
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetContext(pb.GetContextRequest(session_id="absent"))
            await sidecar.engine.wait_idle()
    finished = spans.get_finished_spans()
    rpc = [s for s in finished if s.name == "compaction.v1.CompactionService/AppendEvents"]
    assert len(rpc) == 4
    assert all(format(s.context.trace_id, "032x") == trace_id for s in rpc)
    assert rpc[0].kind == trace.SpanKind.SERVER
    assert rpc[0].attributes is not None
    assert rpc[0].attributes["rpc.method"] == "AppendEvents"
    assert rpc[0].attributes["rpc.grpc.status_code"] == 0
    failed = next(s for s in finished if s.name.endswith("/GetContext"))
    assert failed.attributes is not None
    assert failed.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert failed.status.status_code == trace.StatusCode.ERROR
    summaries = [s for s in finished if s.name == "compaction.summarize"]
    assert summaries
    assert summaries[0].attributes is not None
    assert summaries[0].attributes["gen_ai.usage.input_tokens"] == 100
    # The background summary belongs to the trace of the append that set it off.
    assert format(summaries[0].context.trace_id, "032x") == trace_id
