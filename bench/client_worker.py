"""The agent's side, as deployed: a gRPC client in a process of its own (``bench.deployed``).

An agent calls the sidecar from its own process; in ``make bench``'s
in-process rows the load generator and the server share one interpreter and
fight over its GIL. This worker is the load generator alone: a grpc.aio client
(the same code the in-process rows run) driven by the benchmark over
stdin/stdout, one JSON command a line, one JSON reply a line. Every figure is
timed here, in the client's process, around the calls alone.

Commands (``{"op": ...}``, each with the server's ``address``) and replies:

- ``echo_stream``: ``count``, ``sessions``, ``tag`` -> ``{"rate": msg/s}``: the
  StreamEvents messages of ``bench.appends`` through the echo's ``Stream``.
- ``stream``: ``count``, ``sessions``, ``tag`` -> ``{"rate"}``: StreamEvents, one
  ack per message.
- ``unary``: ``count``, ``session`` -> ``{"rate"}``: sequential unary AppendEvents.
- ``get_context``: ``session``, ``calls`` -> ``{"seconds": [...], "events", "bytes"}``;
  keeps the last answer's bytes for ``echo_unary``.
- ``echo_unary``: ``calls`` -> ``{"seconds": [...]}``: the echo's ``Unary`` with
  the bytes of the last GetContext answer.
- ``append_then_get``: ``session``, ``calls`` -> ``{"seconds": [...]}``: each a
  GetContext just after an untimed one-event append.
- ``probe``: ``count``, ``session`` -> ``{"seconds": [...]}``: each unary append's
  latency.
- ``echo_probe``: ``count`` -> ``{"seconds": [...]}``: the echo's ``Unary`` with a
  probe's request bytes (``bench.native_front``).
- ``quit`` (or end of input).

Run by hand: ``python -m bench.client_worker`` from the repo root.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc

from bench.adk_appends import unary_rate
from bench.appends import echo_rate, requests_for, service_rate
from bench.common import pb_event
from bench.echo import UNARY
from bench.json_lines import serve
from bench.latency import probe_appends
from bench.native_front import echo_probe
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub


class Client:
    """One channel per address, kept between commands as an agent keeps its channel."""

    def __init__(self) -> None:
        self.channels: dict[str, grpc.aio.Channel] = {}
        self.payload = b""

    def channel(self, address: str) -> grpc.aio.Channel:
        if address not in self.channels:
            self.channels[address] = grpc.aio.insecure_channel(
                address, options=[("grpc.max_receive_message_length", 16 << 20)]
            )
        return self.channels[address]

    def stub(self, address: str) -> Any:
        return CompactionServiceStub(self.channel(address))

    async def echo_stream(
        self, address: str, count: int, sessions: int, tag: str
    ) -> dict[str, Any]:
        requests = requests_for(count, sessions, tag)
        return {"rate": await echo_rate(self.channel(address), requests)}

    async def stream(self, address: str, count: int, sessions: int, tag: str) -> dict[str, Any]:
        requests = requests_for(count, sessions, tag)
        return {"rate": await service_rate(self.stub(address), requests)}

    async def unary(self, address: str, count: int, session: str) -> dict[str, Any]:
        return {"rate": await unary_rate(self.stub(address), count, session)}

    async def get_context(self, address: str, session: str, calls: int) -> dict[str, Any]:
        stub = self.stub(address)
        request = pb.GetContextRequest(session_id=session)
        seconds: list[float] = []
        reply = None
        for _ in range(calls):
            began = time.perf_counter()
            reply = await stub.GetContext(request)
            seconds.append(time.perf_counter() - began)
        assert reply is not None
        self.payload = reply.SerializeToString()
        return {"seconds": seconds, "events": len(reply.events), "bytes": len(self.payload)}

    async def echo_unary(self, address: str, calls: int) -> dict[str, Any]:
        echo = self.channel(address).unary_unary(UNARY, None, None)
        seconds: list[float] = []
        for _ in range(calls):
            began = time.perf_counter()
            await echo(self.payload)
            seconds.append(time.perf_counter() - began)
        return {"seconds": seconds}

    async def append_then_get(self, address: str, session: str, calls: int) -> dict[str, Any]:
        stub = self.stub(address)
        request = pb.GetContextRequest(session_id=session)
        seconds: list[float] = []
        for i in range(calls):
            await stub.AppendEvents(
                pb.AppendEventsRequest(session_id=session, events=[pb_event(i)])
            )
            began = time.perf_counter()
            await stub.GetContext(request)
            seconds.append(time.perf_counter() - began)
        return {"seconds": seconds}

    async def probe(self, address: str, count: int, session: str) -> dict[str, Any]:
        return {"seconds": await probe_appends(self.stub(address), count, session)}

    async def echo_probe(self, address: str, count: int) -> dict[str, Any]:
        return {"seconds": await echo_probe(self.channel(address), count)}

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close(None)


if __name__ == "__main__":
    asyncio.run(serve(Client()))
