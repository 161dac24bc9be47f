"""A stream holds bytes, not messages: big requests cannot run the server's memory up.

StreamEvents read ahead 64 requests per stream, answered them side by side,
and kept up to 256 answers, so four streams of 15 MB requests (15 events of
1 MB) drove the server to gigabytes whether or not their clients read the
acknowledgements, and other clients' GetContext waited seconds behind them.
Now a stream reads ahead at most 4 MiB and queues at most 4 MiB of answers
(one request or answer at least), and every request and answer the server
holds counts against ``--max-inflight-mib``; past any of them it stops
reading, and HTTP/2 flow control holds the rest on the client.

Three processes: the server (``compaction-sidecar serve``), whose resident
set (``VmRSS``) is sampled; the streaming clients, in a child of their own;
and this one, which times GetContext on another session meanwhile.
"""

from __future__ import annotations

import multiprocessing
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.postgres_server import free_port
from tests.reliability.budget import LONG, measured
from tests.reliability.serve import ServeProcess

MIB = 1 << 20
EVENT_BYTES = 1_000_000  # within the default --max-event-bytes (1 MiB)
EVENTS_PER_REQUEST = 15  # 15 MB, within the default --max-message-bytes (16 MiB)
STREAMS = 16 if LONG else 4  # each on a connection of its own
REQUESTS_PER_STREAM = 24 if LONG else 20
UNREAD_S = 10.0 if LONG else 3.0  # how long the clients push without reading an ack
# What the server may grow by: what its streams hold (a few requests and answers
# each, within the 256 MiB in-flight budget, plus the request each has read while it
# waits for the budget) times the copies an append makes on its way to the store,
# with room for the allocator. The old read-ahead grew past 2.3 GiB with 4 streams.
RSS_GROWTH_BOUND = (2048 if LONG else 1200) * MIB
GIVE_UP_GROWTH = 3 * RSS_GROWTH_BOUND  # past this the run stops early: the bound is long gone
CONTEXT_P99_S = 1.0
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 16 * MIB),
    ("grpc.max_receive_message_length", -1),
    ("grpc.use_local_subchannel_pool", 1),  # a connection per channel, not one shared
]
# Inline bytes, not text: their token count is a placeholder's, so the appends cost what
# their bytes do (1 MB of text would spend a tenth of a second in the tokenizer).
DATA = bytes(EVENT_BYTES)


def rss_bytes(pid: int) -> int:
    """The process's resident set now (``VmRSS`` in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


@dataclass
class Peak:
    """The highest resident set a sampler thread has seen, until ``stop``."""

    pid: int
    baseline: int
    highest: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    exceeded: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        while not self.stop.wait(0.02):
            try:
                now = rss_bytes(self.pid)
            except (OSError, AssertionError):
                return  # the process is gone
            self.highest = max(self.highest, now)
            if now - self.baseline > GIVE_UP_GROWTH:
                self.exceeded.set()

    @property
    def growth(self) -> int:
        return max(0, self.highest - self.baseline)


def big_request(stream: int, n: int) -> pb.StreamEventsRequest:
    request = pb.StreamEventsRequest(
        request_id=f"r{n}", session_id=f"big-{stream}", create_if_missing=True
    )
    for k in range(EVENTS_PER_REQUEST):
        role = event_pb2.ROLE_USER if k == 0 else event_pb2.ROLE_ASSISTANT
        event = request.events.add(id=f"s{stream}-{n}-{k}", role=role)
        event.parts.add(mime_type="application/octet-stream", data=DATA)
    return request


@dataclass(frozen=True, slots=True)
class Acked:
    """What one stream was told: its requests' ids in ack order, and the failures."""

    stream: int
    yielded: int
    request_ids: list[str]
    errors: list[str]
    short_acks: int  # acks echoing fewer events than their request carried


def push(
    address: str, stream: int, stop: Any, read: Any, sent: Synchronized[int], out: Any
) -> None:
    """One client's stream: big requests until ``stop``; acks read only once ``read``."""
    yielded = 0

    def requests() -> Iterator[pb.StreamEventsRequest]:
        nonlocal yielded
        for n in range(REQUESTS_PER_STREAM):
            if stop.is_set():
                return
            yielded += 1
            yield big_request(stream, n)
            sent.value += 1  # grpc asks for the next one once this one is sent

    acks: list[pb.StreamEventsResponse] = []
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        responses = pb_grpc.CompactionServiceStub(channel).StreamEvents(requests())
        read.wait()
        acks += [r for r in responses if r.request_id]
    out.put(
        Acked(
            stream,
            yielded,
            [a.request_id for a in acks],
            [a.error.message for a in acks if a.HasField("error")],
            sum(len(a.append.events) != EVENTS_PER_REQUEST for a in acks),
        )
    )


def pushers(address: str, stop: Any, read: Any, sent: list[Any], out: Any) -> None:
    """Every stream, one connection each, in this (child) process."""
    threads = [
        threading.Thread(target=push, args=(address, s, stop, read, sent[s], out))
        for s in range(STREAMS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def time_contexts(
    address: str, until: threading.Event, took: list[float], failed: list[str]
) -> None:
    """GetContext on a session of its own, from a client of its own, until told to stop."""
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        while not until.is_set():
            started = time.perf_counter()
            try:
                stub.GetContext(pb.GetContextRequest(session_id="probe"), timeout=30)
            except grpc.RpcError as error:
                failed.append(str(error))
                return
            took.append(time.perf_counter() - started)
            until.wait(0.05)


def p99(latencies: list[float]) -> float:
    if len(latencies) < 2:
        return max(latencies, default=0.0)
    return statistics.quantiles(latencies, n=100, method="inclusive")[98]


def test_streams_of_big_requests_hold_bytes_not_messages(tmp_path: Path) -> None:
    """Clients push 15 MB requests and read nothing: the server stops reading.

    Then they stop pushing and read: every request sent is acknowledged, in
    order, and stored. Throughout, the server grows by less than
    ``RSS_GROWTH_BOUND`` and another client's GetContext stays prompt.
    """
    server = ServeProcess(tmp_path / "sidecar.db", free_port(), tmp_path / "serve.log")
    server.start()
    spawn = multiprocessing.get_context("spawn")
    stop, read = spawn.Event(), spawn.Event()
    sent = [spawn.Value("i", 0) for _ in range(STREAMS)]
    acked: Any = spawn.Queue()
    clients = spawn.Process(
        target=pushers, args=(server.address, stop, read, sent, acked), daemon=True
    )
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="probe",
                    create_if_missing=True,
                    events=[event_pb2.Event(id="p", role=event_pb2.ROLE_USER, text="hi")],
                )
            )
            stub.GetContext(pb.GetContextRequest(session_id="probe"))
        assert server.process is not None
        peak = Peak(server.process.pid, rss_bytes(server.process.pid))
        sampler = threading.Thread(target=peak.sample, daemon=True)
        probe_done = threading.Event()
        latencies: list[float] = []
        failed: list[str] = []
        probe = threading.Thread(
            target=time_contexts, args=(server.address, probe_done, latencies, failed), daemon=True
        )
        started = time.monotonic()
        sent_unread = 0
        for thread in (sampler, probe):
            thread.start()
        clients.start()

        def figures() -> str:
            return (
                f"{STREAMS} streams of {EVENTS_PER_REQUEST} x {EVENT_BYTES:,} B requests;"
                f" {sent_unread} sent before any ack was read; server RSS grew"
                f" {peak.growth / MIB:,.0f} MiB (from {peak.baseline / MIB:,.0f});"
                f" GetContext p99 {p99(latencies) * 1000:,.0f} ms,"
                f" max {max(latencies, default=0) * 1000:,.0f} ms over {len(latencies)} calls;"
                f" {time.monotonic() - started:.1f} s"
            )

        # The clients push and read nothing: the server must stop reading, not buffer.
        peak.exceeded.wait(UNREAD_S)
        sent_unread = sum(s.value for s in sent)
        assert peak.growth < RSS_GROWTH_BOUND, f"while no ack was read: {figures()}"
        stop.set()
        read.set()  # now they read: every request sent is answered, in order
        results = [acked.get(timeout=240 if LONG else 60) for _ in range(STREAMS)]
        clients.join(30)
        probe_done.set()
        probe.join(30)
        peak.stop.set()
        sampler.join()
        print(figures())
        measured("stream_flood_rss_growth_mib", peak.growth / MIB)
        measured("stream_flood_context_p99_ms", p99(latencies) * 1000)
        assert peak.growth < RSS_GROWTH_BOUND, figures()
        assert failed == [], figures()
        assert p99(latencies) < CONTEXT_P99_S, figures()
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            for result in results:
                assert result.request_ids == [f"r{n}" for n in range(result.yielded)]
                assert result.errors == []
                assert result.short_acks == 0
                session = stub.GetSession(pb.GetSessionRequest(session_id=f"big-{result.stream}"))
                assert session.total_event_count == result.yielded * EVENTS_PER_REQUEST
    finally:
        stop.set()
        read.set()
        if clients.is_alive():
            clients.kill()
        server.stop()
