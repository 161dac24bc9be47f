"""The native front end measurement (issue 37): its Go echo, its hand-off, a quick run.

The figures are the benchmark's to report; what is checked is that each
server answers every message with its own bytes, in order (the front end
routes a shared socket's replies by id), and that a quick run reports all
three servers. Go is on this machine's image: without it the build fails,
and so does this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from bench.echo import STREAM, UNARY
from bench.native_front import build_go_echo, serving

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ("grpc.aio", "grpc-go", "grpc-go front, Python backend")


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go_echo(tmp_path_factory.mktemp("native_echo"))


async def _messages(messages: list[bytes]) -> AsyncIterator[bytes]:
    for message in messages:
        yield message


@pytest.mark.parametrize("name", SERVERS)
async def test_every_message_gets_its_own_bytes_back_in_order(name: str, binary: Path) -> None:
    messages = [f"{i}:".encode() + bytes([i % 256]) * (i * 37 % 3000) for i in range(300)]
    async with serving(name, binary) as (server, _backend):
        async with grpc.aio.insecure_channel(server.address) as channel:
            stream = channel.stream_stream(STREAM, None, None)
            replies = [reply async for reply in stream(_messages(messages))]
            unary = channel.unary_unary(UNARY, None, None)
            answers = [await unary(message) for message in messages[:20]]
    assert replies == messages
    assert answers == messages[:20]


def test_a_quick_run_reports_each_server(tmp_path: Path) -> None:
    out = tmp_path / "native.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.native_front", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert set(report["median"]) == set(SERVERS)
    for name in SERVERS:
        figures = report["median"][name]
        assert figures["stream_rate"] > 0
        assert figures["quiet_p50_ms"] > 0
        assert figures["loaded_p99_ms"] >= figures["loaded_p50_ms"]
        assert figures["load_replies"] > 0
        assert f"{name}: stream" in done.stdout
