"""What a server holds before it is used: no tokenizer until the first count.

The cl100k rank table is about 40 MiB of a server's memory. ``serve --help``
and a server that has only answered health checks never build it (nor import
tiktoken); the first append does. Nor does a server on its default settings
import what only some settings use: the YAML parser, the Prometheus client
(metrics off), Gemini's client (no key), OpenTelemetry (tracing off). Each case
runs a process of its own, so what it loaded is its own.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.deploy.serving import stop, wait_serving
from tests.server.harness import free_port

BINARY = str(Path(sys.executable).with_name("compaction-sidecar"))


def _tokenizer_library() -> str:
    spec = importlib.util.find_spec("tiktoken._tiktoken")
    assert spec is not None
    assert spec.origin is not None
    return Path(spec.origin).name


TOKENIZER_LIBRARY = _tokenizer_library()
"""The tokenizer's compiled core: mapped into a process once tiktoken is imported."""


UNUSED_AT_REST = ("tiktoken", "yaml", "prometheus_client", "google.genai", "opentelemetry")


def loaded_modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``, and their packages."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import sys
        print(" ".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    names = done.stdout.split()
    return {prefix for name in names for prefix in _prefixes(name)}


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: n + 1]) for n in range(len(parts))]


def mapped(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


def test_serve_help_imports_no_tokenizer() -> None:
    loaded = loaded_modules_after(
        """
        import contextlib, io
        from sidecar.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["serve", "--help"])
        """
    )
    assert "argparse" in loaded  # it did parse
    assert "tiktoken" not in loaded


def test_an_engine_and_its_estimator_build_no_encoding_until_they_count() -> None:
    loaded = loaded_modules_after(
        """
        from sidecar.tokenizer import TiktokenEstimator, default_estimator
        from sidecar.engine.engine import SessionEngine
        from sidecar.store.sqlite import SqliteStore
        SessionEngine(SqliteStore(":memory:"))
        TiktokenEstimator()
        default_estimator()
        """
    )
    assert "sidecar" in loaded
    assert "tiktoken" not in loaded


def test_a_server_on_its_defaults_answering_health_checks_loads_none_of_what_it_does_not_use(
    tmp_path: Path,
) -> None:
    loaded = loaded_modules_after(
        f"""
        import asyncio
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        from sidecar.server.app import start
        from sidecar.server.config import ServerConfig

        async def main():
            config = ServerConfig(listen="127.0.0.1:0", store="sqlite:///{tmp_path}/s.db")
            sidecar = await start(config)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{{sidecar.port}}") as channel:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest()
                )
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            await sidecar.stop()

        asyncio.run(main())
        """
    )
    assert "sidecar.server.app" in loaded
    assert [name for name in UNUSED_AT_REST if name in loaded] == []


def test_a_server_has_no_tokenizer_until_a_decision_needs_an_exact_count(
    tmp_path: Path,
) -> None:
    """Health checks and appends far from any threshold build none of it (issue 37); a
    compaction, which plans on exact counts, does."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    process = subprocess.Popen(
        [BINARY, "serve", "--listen", address, "--store", f"sqlite:///{tmp_path}/s.db"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_serving(address, process)
        with grpc.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", "liveness", "compaction.v1.CompactionService"):
                health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert not mapped(process.pid, TOKENIZER_LIBRARY)
            stub = pb_grpc.CompactionServiceStub(channel)
            ack = stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="s",
                    create_if_missing=True,
                    events=[event_pb2.Event(role=event_pb2.ROLE_USER, text="hello world")],
                ),
                timeout=30,
            )
            assert ack.events[0].token_count_estimated
            stub.GetContext(pb.GetContextRequest(session_id="s"), timeout=30)
            assert not mapped(process.pid, TOKENIZER_LIBRARY)
            stub.Compact(pb.CompactRequest(session_id="s", force=True), timeout=30)
            assert mapped(process.pid, TOKENIZER_LIBRARY)  # so the checks above could see it
    finally:
        stop(process)
