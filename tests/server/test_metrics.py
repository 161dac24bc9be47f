"""Prometheus metrics, scraped over HTTP from a running server as Prometheus would."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, free_port, running
from tests.server.test_api import SUMMARY, WINDOW, turn

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> tuple[str, Samples]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def test_metrics_count_rpcs_appends_compactions_store_and_summaries(
    tmp_path: Path,
) -> None:
    port = free_port()
    summarizer = FakeSummarizer("the summary")
    async with running(
        tmp_path, summarizer=summarizer, metrics_listen=f"127.0.0.1:{port}"
    ) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(
                pb.CreateSessionRequest(session_id="secret-session-w", policy=WINDOW)
            )
            await stub.CreateSession(
                pb.CreateSessionRequest(session_id="secret-session-s", policy=SUMMARY)
            )
            for n in range(6):
                await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id="secret-session-w", events=turn(n))
                )
                await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id="secret-session-s", events=turn(n))
                )
            # A retry stores nothing and counts no event.
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id="secret-session-w", events=turn(5))
            )
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await stub.AppendEvents(
                    pb.AppendEventsRequest(
                        session_id="secret-session-w", events=[event_pb2.Event(id="bad")]
                    )
                )
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            await sidecar.engine.wait_idle()
            for _ in range(3):  # built twice (kept from a session's second read), then kept
                await stub.GetContext(pb.GetContextRequest(session_id="secret-session-w"))
            watch = stub.WatchSession(pb.WatchSessionRequest(session_id="secret-session-w"))
            await watch.initial_metadata()
            text, samples = await asyncio.to_thread(scrape, port)
            assert value(samples, "compaction_open_streams", grpc_method="WatchSession") == 1
            watch.cancel()

    append = {"grpc_service": "compaction.v1.CompactionService", "grpc_method": "AppendEvents"}
    assert value(samples, "grpc_server_handled_total", grpc_code="OK", **append) == 13
    assert value(samples, "grpc_server_handled_total", grpc_code="INVALID_ARGUMENT", **append) == 1
    assert value(samples, "grpc_server_started_total", **append) == 14
    assert value(samples, "grpc_server_handling_seconds_count", **append) == 14
    assert value(samples, "compaction_events_appended_total") == 24
    # The window pass planned on exact counts: the events it counted landed.
    assert 0 < value(samples, "compaction_token_counts_landed_total") <= 24
    assert (
        value(samples, "compaction_passes_total", strategy="sliding_window", outcome="compacted")
        >= 1
    )
    assert value(samples, "compaction_passes_total", strategy="summarize", outcome="compacted") >= 1
    assert value(samples, "compaction_tokens_saved_total", strategy="sliding_window") > 0
    assert value(samples, "compaction_events_archived_total") > 0
    assert value(samples, "compaction_summarizer_duration_seconds_count") == len(
        summarizer.requests
    )
    assert value(samples, "compaction_summarizer_tokens_total", direction="input") == 100 * len(
        summarizer.requests
    )
    assert value(samples, "compaction_store_operation_duration_seconds_count", operation="append")
    assert value(samples, "compaction_sessions_in_flight") == 0  # idle: the registry shrank
    assert value(samples, "compaction_watchers") == 1
    assert value(samples, "compaction_watcher_queued") == 0
    assert value(samples, "compaction_context_reads_total", answer="built") == 2
    assert value(samples, "compaction_context_reads_total", answer="kept") == 1
    for cache in ("decoded_events", "event_wire_bytes", "context_answers"):
        assert value(samples, "compaction_read_cache_bytes", cache=cache) > 0
    # The sequential appends found the SQLite writer idle; session creations, passes and
    # indexing queued, and committed in fewer transactions than writes or as many.
    assert value(samples, "compaction_sqlite_writes_total", path="inline") >= 6
    queued = value(samples, "compaction_sqlite_writes_total", path="queued")
    assert queued >= 2
    assert 1 <= value(samples, "compaction_sqlite_write_groups_total") <= queued
    # Bounded cardinality: no session id ever becomes a label.
    assert "secret-session" not in text


async def test_failed_summaries_and_refused_calls_are_counted(tmp_path: Path) -> None:
    from sidecar.errors import SummarizerUnavailable

    port = free_port()
    tokens = tmp_path / "tokens"
    tokens.write_text("right-token\n")
    summarizer = FakeSummarizer(error=SummarizerUnavailable("provider down"))
    async with running(
        tmp_path,
        summarizer=summarizer,
        metrics_listen=f"127.0.0.1:{port}",
        auth_token_file=str(tokens),
    ) as sidecar:
        good = (("authorization", "Bearer right-token"),)
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.GetSession(pb.GetSessionRequest(session_id="x"))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            await stub.CreateSession(
                pb.CreateSessionRequest(session_id="s", policy=SUMMARY), metadata=good
            )
            for n in range(4):
                await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id="s", events=turn(n)), metadata=good
                )
            await sidecar.engine.wait_idle()
            _, samples = await asyncio.to_thread(scrape, port)
    assert value(samples, "grpc_server_handled_total", grpc_code="UNAUTHENTICATED") == 1
    assert value(samples, "compaction_summarizer_failures_total", kind="unavailable") >= 1
    assert value(samples, "compaction_passes_total", outcome="failed", reason="failed") >= 1


async def test_metrics_are_off_unless_asked(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        assert sidecar.metrics_server is None
        assert sidecar.metrics is None  # nor collected: nothing would read them


async def test_the_gemini_summarizers_outcomes_are_exported(tmp_path: Path) -> None:
    import collections

    from prometheus_client import generate_latest

    from sidecar.summarizer.gemini import Outcome

    summarizer = FakeSummarizer()
    summarizer.outcomes = collections.Counter({Outcome.OK: 3, Outcome.UNAVAILABLE: 1})  # type: ignore[attr-defined]
    listen = f"127.0.0.1:{free_port()}"
    async with running(tmp_path, summarizer=summarizer, metrics_listen=listen) as sidecar:
        assert sidecar.metrics is not None
        text = generate_latest(sidecar.metrics.registry).decode()
    assert 'compaction_summarizer_calls_total{outcome="ok"} 3.0' in text
    assert 'compaction_summarizer_calls_total{outcome="unavailable"} 1.0' in text


async def test_clearings_are_counted_once_and_only_what_they_freed(tmp_path: Path) -> None:
    """A pipeline's clearing step counts its cleared events and tokens under its own strategy;
    the archiving step after it adds nothing to the cleared counters."""
    from sidecar.client import AsyncClient
    from sidecar.compaction.clear_tool_results import ClearToolResults
    from sidecar.compaction.pipeline import Pipeline
    from sidecar.compaction.policy import CompactionPolicy
    from sidecar.compaction.sliding_window import SlidingWindow
    from sidecar.model import Event, Role, ToolCall, ToolResult

    log = [Event(id="u0", role=Role.USER, text="go")]
    for n in range(4):
        log.append(Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{n}", "logs"),)))
        log.append(
            Event(
                id=f"t{n}", role=Role.TOOL, tool_results=(ToolResult(f"c{n}", "logs", "x " * 300),)
            )
        )
    log += [
        Event(id="u1", role=Role.USER, text="and now?"),
        Event(id="a9", role=Role.ASSISTANT, text="ok"),
    ]
    port = free_port()
    async with running(tmp_path, metrics_listen=f"127.0.0.1:{port}") as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("s")
            await session.append(log, create_if_missing=True)
            steps = Pipeline((ClearToolResults(keep_tool_uses=1), SlidingWindow(max_events=2)))
            result = await session.compact(CompactionPolicy(None, steps), force=True)
            _, samples = await asyncio.to_thread(scrape, port)

    cleared = value(samples, "compaction_events_cleared_total")
    assert cleared == value(
        samples, "compaction_events_cleared_total", strategy="clear_tool_results"
    )
    assert cleared == 3  # t0-t2; the sliding window then archived them (the log keeps them)
    freed = value(samples, "compaction_tokens_cleared_total")
    assert 0 < freed < result.tokens_estimated_saved  # the archiving step saved the rest
    assert freed == value(samples, "compaction_tokens_cleared_total", strategy="clear_tool_results")


async def test_a_restore_is_counted_as_a_pass_with_the_events_it_brought_back(
    tmp_path: Path,
) -> None:
    from sidecar.client import AsyncClient
    from sidecar.compaction.policy import CompactionPolicy
    from sidecar.compaction.sliding_window import SlidingWindow
    from sidecar.model import Event, Role

    port = free_port()
    async with running(tmp_path, metrics_listen=f"127.0.0.1:{port}") as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("s")
            await session.append(
                [Event(id=f"u{n}", role=Role.USER, text=f"q {n}") for n in range(5)],
                create_if_missing=True,
            )
            await session.compact(CompactionPolicy(None, SlidingWindow(max_events=2)), force=True)
            restored = await session.restore()
            _, samples = await asyncio.to_thread(scrape, port)
    assert len(restored.restored_ids) == 3
    assert value(samples, "compaction_events_restored_total") == 3
    assert value(samples, "compaction_passes_total", strategy="restore", outcome="compacted") == 1


async def test_the_identifiers_each_pass_dropped_are_counted(tmp_path: Path) -> None:
    from sidecar.client import AsyncClient
    from sidecar.compaction.policy import CompactionPolicy
    from sidecar.compaction.sliding_window import SlidingWindow
    from sidecar.model import Event, Role

    log = [
        Event(id="u0", role=Role.USER, text="refund order W1234567 to card 4421486"),
        Event(id="a0", role=Role.ASSISTANT, text="done"),
        Event(id="u1", role=Role.USER, text="thanks"),
        Event(id="a1", role=Role.ASSISTANT, text="bye"),
    ]
    port = free_port()
    async with running(tmp_path, metrics_listen=f"127.0.0.1:{port}") as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("s")
            await session.append(log, create_if_missing=True)
            policy = CompactionPolicy(None, SlidingWindow(max_events=2))
            result = await session.compact(policy, force=True)
            _, samples = await asyncio.to_thread(scrape, port)

    assert result.dropped_identifiers == ("W1234567", "4421486")
    assert value(samples, "compaction_identifiers_dropped_total", strategy="sliding_window") == 2
