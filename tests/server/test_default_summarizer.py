"""The default summarizer: offline extractive summaries, Gemini when a key or Vertex AI is set.

So a server on the embedded defaults (``make serve``) runs the summarizing
examples — the ADK snippet, a clear → summarize pipeline — instead of
refusing them with FAILED_PRECONDITION.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.server.app import make_summarizer, start
from sidecar.server.config import ServerConfig, add_arguments, load
from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.summarizer.gemini import GeminiSummarizer

GEMINI_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")


def test_the_default_is_extractive_without_gemini_credentials() -> None:
    assert ServerConfig().summarizer == "auto"
    assert isinstance(make_summarizer(ServerConfig(), environ={}), ExtractiveSummarizer)
    assert isinstance(
        make_summarizer(ServerConfig(), environ={"GEMINI_API_KEY": "  "}), ExtractiveSummarizer
    )


@pytest.mark.parametrize(
    "environ",
    [
        {"GEMINI_API_KEY": "k"},
        {"GOOGLE_API_KEY": "k"},
        {"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p"},
    ],
)
def test_the_default_is_gemini_when_it_is_configured(environ: dict[str, str]) -> None:
    assert isinstance(make_summarizer(ServerConfig(), environ=environ), GeminiSummarizer)


def test_an_explicit_choice_is_kept() -> None:
    assert make_summarizer(ServerConfig(summarizer="none"), environ={"GEMINI_API_KEY": "k"}) is None
    extractive = ServerConfig(summarizer="extractive")
    assert isinstance(make_summarizer(extractive, {"GEMINI_API_KEY": "k"}), ExtractiveSummarizer)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = load(parser.parse_args([]), environ={"COMPACTION_SUMMARIZER": "none"})
    assert make_summarizer(config, environ={}) is None


async def test_a_server_on_the_defaults_summarizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in GEMINI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    config = ServerConfig(listen="127.0.0.1:0", store=f"sqlite:///{tmp_path / 'db'}")
    sidecar = await start(config)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            policy = policy_pb2.CompactionPolicy(
                strategy=policy_pb2.Strategy(
                    summarize=policy_pb2.Summarize(max_events_to_keep=2, overlap=1),
                    min_saved_tokens=1,
                )
            )
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
            user, assistant = event_pb2.ROLE_USER, event_pb2.ROLE_ASSISTANT
            events = [
                event_pb2.Event(role=role, text=f"turn {n}: the deploy of service-{n} failed")
                for n in range(4)
                for role in (user, assistant)
            ]
            await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))
            answer = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    finally:
        await sidecar.stop(0.5)
    assert answer.result.compacted, answer
    assert answer.result.strategy == "summarize"
    assert [e.synthetic for e in answer.result.active_events[:2]] == [True, True]  # the summary
