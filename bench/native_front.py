"""What a native gRPC front end would buy: grpc.aio's echo against grpc-go's, as deployed.

Issue 37's three misses (streamed ÷ echo for 100 sessions, unary ÷ ADK,
loaded p99 ÷ quiet p50) sit on grpc.aio's own per-call and per-message
machinery. Before building a front end in Go that terminates gRPC and hands
the Python engine batches, this measures the ceiling of that move: the same
raw-bytes echo (``bench.echo``; ``bench/native_echo`` in Go) as a process of its
own, driven by a client process, for

- a stream: ``bench.appends``' StreamEvents messages over 100 sessions, each
  echoed; the rate and the server's CPU a message (/proc, every thread);
- a unary call: one append request's bytes echoed, sequentially; its p50;
- the same unary call while ``LOAD_CLIENTS`` streams flood the server, each
  with up to ``WINDOW`` messages unanswered (``bench.latency``'s load, on the
  echo); its p99 ÷ the quiet p50, issue 37's loaded bound.

Three servers: grpc.aio's echo (``bench.echo``), grpc-go's, and grpc-go as a
front end handing every message over a Unix socket to a Python process that
sends it back (``native_echo -forward``; the backend here): the gRPC work
native, what is left in Python only the hand-off, as a native front end
before the engine would leave it. Server CPU is the front's and the
backend's together.

Servers run by turns, ``rounds`` times. ``python -m bench.native_front`` (about
two minutes; ``--quick`` for a few seconds) prints a table and writes
``bench/results-native-front.json``. It needs Go (``go build``, modules from
the proxy or the module cache); it is not part of ``make bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc

from bench.appends import requests_for
from bench.common import median, pb_event, percentile
from bench.deployed import EchoProcess, client_process, echo_process
from bench.echo import STREAM, UNARY
from bench.json_lines import started, stop
from bench.server_process import cpu_seconds
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
GO_SOURCE = ROOT / "bench" / "native_echo"
RESULTS = ROOT / "bench" / "results-native-front.json"
LOAD_CLIENTS = 8
WINDOW = 16


def probe_request(i: int) -> bytes:
    """The bytes ``bench.latency``'s probe sends: one 300-2000 byte event."""
    return pb.AppendEventsRequest(
        session_id="probe", events=[pb_event(i)], create_if_missing=True
    ).SerializeToString()


async def echo_probe(channel: grpc.aio.Channel, count: int) -> list[float]:
    """Sequential unary echoes of probe requests; each one's seconds."""
    unary = channel.unary_unary(UNARY, None, None)
    out: list[float] = []
    for i in range(count):
        request = probe_request(i)
        began = time.perf_counter()
        reply = await unary(request)
        out.append(time.perf_counter() - began)
        if reply != request:
            raise RuntimeError(f"echo {i} answered {len(reply)} other bytes")
    return out


# --- the load (a child process: ``python -m bench.native_front load ADDRESS``) ----------


async def _flood(channel: grpc.aio.Channel, client: int, stop: asyncio.Event) -> int:
    stream = channel.stream_stream(STREAM, None, None)
    window = asyncio.Semaphore(WINDOW)
    messages = [m.SerializeToString() for m in requests_for(256, 1, f"load-{client}")]

    async def requests() -> AsyncIterator[bytes]:
        i = 0
        while not stop.is_set():
            await window.acquire()
            yield messages[i % len(messages)]
            i += 1

    call = stream(requests())
    replies = 0
    async for _ in call:
        replies += 1
        window.release()
        if stop.is_set():
            call.cancel()  # type: ignore[no-untyped-call, unused-ignore]
            break
    return replies


async def load_main(address: str) -> None:
    """Flood ``address`` from ``LOAD_CLIENTS`` streams until stdin closes; print the replies."""
    stop = asyncio.Event()
    async with grpc.aio.insecure_channel(address) as channel:
        tasks = [asyncio.create_task(_flood(channel, c, stop)) for c in range(LOAD_CLIENTS)]
        print("started", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        stop.set()
        replies = 0
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                replies += await task
        print(json.dumps({"replies": replies}), flush=True)


# --- the backend (a child process: ``python -m bench.native_front backend PATH``) --------

FRAME_HEAD = 12  # a 4-byte big-endian length, an 8-byte id


class _Backend(asyncio.Protocol):
    """Sends every complete frame back as it came: one socket write per read."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end, size = 0, len(self.buffer)
        while size - end >= FRAME_HEAD:
            length = int.from_bytes(self.buffer[end : end + 4], "big")
            if size - end - FRAME_HEAD < length:
                break
            end += FRAME_HEAD + length
        if end:
            assert self.transport is not None
            self.transport.write(bytes(self.buffer[:end]))
            del self.buffer[:end]


async def backend_main(path: str) -> None:
    """Serve frames on the Unix socket ``path`` until stdin closes."""
    loop = asyncio.get_running_loop()
    server = await loop.create_unix_server(_Backend, path)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    server.close()


# --- the benchmark ----------------------------------------------------------------------


def build_go_echo(directory: Path) -> Path:
    """``go build`` of bench/native_echo into ``directory``; a one-line error without Go."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("bench.native_front: `go` is not on PATH (it builds bench/native_echo)")
    binary = directory / "native_echo"
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=GO_SOURCE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.native_front: go build failed: {done.stderr.strip()}")
    return binary


@asynccontextmanager
async def go_echo(binary: Path, *args: str) -> AsyncIterator[EchoProcess]:
    process = await asyncio.create_subprocess_exec(
        str(binary), *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        if not line:
            raise RuntimeError(f"native_echo exited with code {await process.wait()}")
        yield EchoProcess(process.pid, line.decode().strip())
    finally:
        await stop(process)


@asynccontextmanager
async def _child(command: str, ready: bytes) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m bench.native_front`` told ``command`` on stdin, once it answers ``ready``."""
    async with started(sys.executable, "bench.native_front") as child:
        assert child.stdin is not None
        assert child.stdout is not None
        child.stdin.write(f"{command}\n".encode())
        await child.stdin.drain()
        if (await asyncio.wait_for(child.stdout.readline(), 30)).strip() != ready:
            raise RuntimeError(f"bench.native_front {command} did not start")
        yield child


@asynccontextmanager
async def go_front(binary: Path) -> AsyncIterator[tuple[EchoProcess, int]]:
    """grpc-go handing every message to a Python backend; yields it and the backend's pid."""
    with tempfile.TemporaryDirectory() as scratch:
        path = str(Path(scratch) / "backend.sock")
        async with _child(f"backend {path}", b"ready") as backend:
            async with go_echo(binary, "-forward", path) as front:
                yield front, backend.pid


@asynccontextmanager
async def serving(name: str, binary: Path) -> AsyncIterator[tuple[EchoProcess, int | None]]:
    if name == "grpc.aio":
        async with echo_process() as server:
            yield server, None
    elif name == "grpc-go":
        async with go_echo(binary) as server:
            yield server, None
    else:
        async with go_front(binary) as (server, backend):
            yield server, backend


async def one_round(
    server: EchoProcess, backend: int | None, messages: int, probes: int
) -> dict[str, Any]:
    """Stream, quiet probe and loaded probe against one running echo server."""

    def backend_cpu() -> float:
        return 0.0 if backend is None else cpu_seconds(backend)

    async with client_process() as client:
        await client.call("echo_stream", server, count=500, sessions=100, tag="warm")
        before = backend_cpu()
        streamed = await client.call(
            "echo_stream", server, count=messages, sessions=100, tag="measured"
        )
        streamed["cpu_s"]["server"] += backend_cpu() - before
        await client.call("echo_probe", server, count=50)
        quiet = (await client.call("echo_probe", server, count=probes))["seconds"]
        async with _child(f"load {server.address}", b"started") as load:
            assert load.stdin is not None
            assert load.stdout is not None
            await asyncio.sleep(1.0)
            cpu_before, began = cpu_seconds(server.pid) + backend_cpu(), time.perf_counter()
            loaded = (await client.call("echo_probe", server, count=probes))["seconds"]
            seconds = time.perf_counter() - began
            load_cpu = cpu_seconds(server.pid) + backend_cpu() - cpu_before
            load.stdin.write(b"stop\n")
            await load.stdin.drain()
            summary = json.loads(await asyncio.wait_for(load.stdout.readline(), 60))
    return {
        "stream_rate": streamed["rate"],
        "stream_server_cpu_us": streamed["cpu_s"]["server"] / messages * 1e6,
        "quiet_p50_ms": median(quiet) * 1e3,
        "loaded_p50_ms": median(loaded) * 1e3,
        "loaded_p99_ms": percentile(loaded, 99) * 1e3,
        "load_replies": summary["replies"],
        "load_server_cpu_s_per_s": load_cpu / seconds,
    }


def summarize(rounds: Sequence[dict[str, Any]]) -> dict[str, float]:
    out = {key: median([r[key] for r in rounds]) for key in rounds[0]}
    out["loaded_p99_over_quiet_p50"] = median(
        [r["loaded_p99_ms"] / r["quiet_p50_ms"] for r in rounds]
    )
    return out


async def run(rounds: int, messages: int, probes: int) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {
        "grpc.aio": [],
        "grpc-go": [],
        "grpc-go front, Python backend": [],
    }
    with tempfile.TemporaryDirectory() as scratch:
        binary = build_go_echo(Path(scratch))
        for r in range(rounds):
            for name in results:
                async with serving(name, binary) as (server, backend):
                    results[name].append(await one_round(server, backend, messages, probes))
                print(f"  round {r + 1} {name}: {json.dumps(results[name][-1])}", flush=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rounds": rounds,
        "messages": messages,
        "probes": probes,
        "median": {name: summarize(rs) for name, rs in results.items()},
        "runs": results,
    }


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        line = sys.stdin.readline().split()  # the load or the backend, started here
        if line and line[0] == "load":
            asyncio.run(load_main(line[1]))
            return
        if line and line[0] == "backend":
            asyncio.run(backend_main(line[1]))
            return
    parser = argparse.ArgumentParser(prog="python -m bench.native_front")
    parser.add_argument("--quick", action="store_true", help="a few seconds, for the tests")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    ns = parser.parse_args(args)
    rounds, messages, probes = (1, 500, 100) if ns.quick else (ns.rounds, 20_000, 1_000)
    report = asyncio.run(run(rounds, messages, probes))
    for name, figures in report["median"].items():
        print(
            f"{name}: stream {figures['stream_rate']:.0f} msg/s, server "
            f"{figures['stream_server_cpu_us']:.1f} us/msg; unary quiet p50 "
            f"{figures['quiet_p50_ms']:.3f} ms, loaded p50 {figures['loaded_p50_ms']:.3f} / p99 "
            f"{figures['loaded_p99_ms']:.3f} ms, p99 / quiet p50 "
            f"{figures['loaded_p99_over_quiet_p50']:.1f}; server under load "
            f"{figures['load_server_cpu_s_per_s']:.2f} CPU s/s"
        )
    ns.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
