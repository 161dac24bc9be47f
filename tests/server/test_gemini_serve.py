"""``serve --summarizer gemini``: the real google-genai client, against a local fake Gemini API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.server.harness import free_port
from tests.summarizer.fake_gemini import answer, running


def test_serve_summarizes_with_gemini_end_to_end(tmp_path: Path) -> None:
    with running() as gemini:
        gemini.script(answer("The user is chasing a p99 regression in checkout."))
        port = free_port()
        env = {
            **os.environ,
            "GEMINI_API_KEY": "test-key",
            "COMPACTION_GEMINI_BASE_URL": gemini.url,
            "COMPACTION_GEMINI_API_VERSION": "v1beta",
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidecar.cli",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--summarizer",
                "gemini",
                "--gemini-model",
                "gemini-test-flash",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if "listening on" in line:
                    break
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.CompactionServiceStub(channel)
                policy = policy_pb2.CompactionPolicy(
                    strategy=policy_pb2.Strategy(
                        summarize=policy_pb2.Summarize(
                            max_events_to_keep=2,
                            overlap=1,
                            max_summary_tokens=1,
                            shadow_prompt="Summary",
                        )
                    )
                )
                stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
                for n in range(4):
                    stub.AppendEvents(
                        pb.AppendEventsRequest(
                            session_id="s",
                            events=[
                                event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"q{n}"),
                                event_pb2.Event(
                                    id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"a{n}"
                                ),
                            ],
                        )
                    )
                result = stub.Compact(
                    pb.CompactRequest(session_id="s", force=True), timeout=30
                ).result
                assert result.compacted
                summary = [e.text for e in result.active_events if e.synthetic]
                assert summary[-1] == "The user is chasing a p99 regression in checkout."
            (request,) = gemini.received
            assert request.path == "/v1beta/models/gemini-test-flash:generateContent"
            assert request.headers.get("x-goog-api-key") == "test-key"
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_serve_without_a_gemini_key_fails_fast_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli",
            "serve",
            "--summarizer",
            "gemini",
            "--listen",
            "127.0.0.1:0",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "gemini_api_key" in result.stderr
