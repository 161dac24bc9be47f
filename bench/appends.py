"""Target 1: streamed appends end to end vs a bare grpc.aio echo stream of the same bytes.

Both clients send the same ``StreamEventsRequest`` messages (one event of
300-2000 bytes each, serialized by the client in both cases) and read one
reply per message: the echo server returns the bytes, the sidecar stores the
event and acknowledges it. Rounds alternate echo / one session / 100 sessions;
each figure is the median rate over the rounds.

Each round then does the same as deployed (``bench.deployed``): the client in
a process of its own, against the echo server in its own and the real CLI
server in its own; those figures are the ``_deployed`` targets, beside the
in-process ones, with the CPU each server process spent per message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from bench.common import Log, Outcome, Scale, Stopwatch, Target, median, pb_event
from bench.deployed import client_process, echo_process, per_message_us
from bench.echo import STREAM, echo_server
from bench.server_process import server_process
from bench.service import sidecar_server
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

TARGET_RATIO = 0.8


def requests_for(count: int, sessions: int, tag: str) -> list[pb.StreamEventsRequest]:
    return [
        pb.StreamEventsRequest(
            request_id=str(i),
            session_id=f"{tag}-s{i % sessions}",
            events=[pb_event(i)],
            create_if_missing=True,
        )
        for i in range(count)
    ]


async def _iterate(
    items: Sequence[pb.StreamEventsRequest],
) -> AsyncIterator[pb.StreamEventsRequest]:
    for item in items:
        yield item


async def echo_rate(channel: grpc.aio.Channel, requests: Sequence[pb.StreamEventsRequest]) -> float:
    method = channel.stream_stream(
        STREAM,
        request_serializer=pb.StreamEventsRequest.SerializeToString,
        response_deserializer=None,
    )
    replies = 0
    with Stopwatch() as sw:
        call = method(_iterate(requests))
        async for _ in call:
            replies += 1
    if replies != len(requests):
        raise RuntimeError(f"echo returned {replies} of {len(requests)} messages")
    return len(requests) / sw.seconds


async def service_rate(
    stub: CompactionServiceAsyncStub, requests: Sequence[pb.StreamEventsRequest]
) -> float:
    acks = errors = 0
    with Stopwatch() as sw:
        call = stub.StreamEvents(_iterate(requests))
        async for reply in call:
            if reply.WhichOneof("result") == "append":
                acks += 1
            elif reply.WhichOneof("result") == "error":
                errors += 1
            if acks + errors == len(requests):
                break
    if acks != len(requests):
        raise RuntimeError(
            f"sidecar acknowledged {acks} of {len(requests)} appends ({errors} errors)"
        )
    return len(requests) / sw.seconds


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    n = scale.stream_messages
    sizes = [r.ByteSize() for r in requests_for(min(n, 1000), 1, "size")]
    log(
        f"streamed appends: {n} messages per run, {scale.stream_rounds} round(s), "
        f"request size {min(sizes)}..{max(sizes)} B"
    )
    echo: list[float] = []
    one: list[float] = []
    hundred: list[float] = []
    # as deployed: the client's replies (rate and CPU seconds) per round
    d_echo: list[dict[str, Any]] = []
    d_one: list[dict[str, Any]] = []
    d_hundred: list[dict[str, Any]] = []
    async with (
        echo_server() as echo_address,
        sidecar_server(workdir) as sidecar,
        echo_process() as echo_proc,
        server_process(workdir) as server,
        client_process() as client,
    ):
        async with (
            grpc.aio.insecure_channel(echo_address) as echo_channel,
            grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel,
        ):
            stub = CompactionServiceStub(channel)
            warm = max(50, n // 10)
            await echo_rate(echo_channel, requests_for(warm, 1, "warm"))
            await service_rate(stub, requests_for(warm, 1, "warm"))

            async def echo_d(count: int, tag: str) -> dict[str, Any]:
                return await client.call(
                    "echo_stream",
                    echo_proc,
                    count=count,
                    sessions=1,
                    tag=tag,
                )

            async def sidecar_d(count: int, sessions: int, tag: str) -> dict[str, Any]:
                return await client.call(
                    "stream",
                    server,
                    count=count,
                    sessions=sessions,
                    tag=tag,
                )

            await echo_d(warm, "warm")
            await sidecar_d(warm, 1, "warm")
            for r in range(scale.stream_rounds):
                echo.append(await echo_rate(echo_channel, requests_for(n, 1, f"e{r}")))
                one.append(await service_rate(stub, requests_for(n, 1, f"one{r}")))
                hundred.append(await service_rate(stub, requests_for(n, 100, f"hundred{r}")))
                d_echo.append(await echo_d(n, f"e{r}"))
                d_one.append(await sidecar_d(n, 1, f"one{r}"))
                d_hundred.append(await sidecar_d(n, 100, f"hundred{r}"))
                log(
                    f"  round {r + 1}: in process: echo {echo[-1]:.0f}/s, sidecar 1 session "
                    f"{one[-1]:.0f}/s, 100 sessions {hundred[-1]:.0f}/s; as deployed: echo "
                    f"{d_echo[-1]['rate']:.0f}/s, 1 session {d_one[-1]['rate']:.0f}/s, "
                    f"100 sessions {d_hundred[-1]['rate']:.0f}/s"
                )
    echo_m, one_m, hundred_m = median(echo), median(one), median(hundred)
    d_echo_m, d_one_m, d_hundred_m = (
        median([reply["rate"] for reply in replies]) for replies in (d_echo, d_one, d_hundred)
    )
    cpu = {
        f"{name}_{side}_cpu_us_per_msg": per_message_us(replies, side, n)
        for name, replies in (("echo", d_echo), ("one_session", d_one), ("hundred", d_hundred))
        for side in ("server", "client")
    }
    log(
        f"  median in process: echo {echo_m:.0f} msg/s, sidecar 1 session {one_m:.0f} msg/s, "
        f"100 sessions {hundred_m:.0f} msg/s"
    )
    log(
        f"  median as deployed: echo {d_echo_m:.0f} msg/s, sidecar 1 session {d_one_m:.0f} "
        f"msg/s, 100 sessions {d_hundred_m:.0f} msg/s; server CPU per message: echo "
        f"{cpu['echo_server_cpu_us_per_msg']:.0f} us, sidecar "
        f"{cpu['one_session_server_cpu_us_per_msg']:.0f} us (1 session) / "
        f"{cpu['hundred_server_cpu_us_per_msg']:.0f} us (100); client "
        f"{cpu['echo_client_cpu_us_per_msg']:.0f} / "
        f"{cpu['one_session_client_cpu_us_per_msg']:.0f} us"
    )
    return Outcome(
        figures={
            "messages_per_run": n,
            "rounds": scale.stream_rounds,
            "echo_msgs_per_s": echo,
            "one_session_msgs_per_s": one,
            "hundred_sessions_msgs_per_s": hundred,
            "echo_median": echo_m,
            "one_session_median": one_m,
            "hundred_sessions_median": hundred_m,
            "deployed_echo_msgs_per_s": [reply["rate"] for reply in d_echo],
            "deployed_one_session_msgs_per_s": [reply["rate"] for reply in d_one],
            "deployed_hundred_sessions_msgs_per_s": [reply["rate"] for reply in d_hundred],
            "deployed_echo_median": d_echo_m,
            "deployed_one_session_median": d_one_m,
            "deployed_hundred_sessions_median": d_hundred_m,
            "deployed_cpu": cpu,
        },
        targets=[
            Target(
                "streamed_appends_1_session_vs_echo",
                one_m / echo_m,
                TARGET_RATIO,
                True,
                "sidecar StreamEvents rate, one session / bare echo stream rate",
            ),
            Target(
                "streamed_appends_100_sessions_vs_echo",
                hundred_m / echo_m,
                TARGET_RATIO,
                True,
                "sidecar StreamEvents rate, 100 sessions / bare echo stream rate",
            ),
            Target(
                "streamed_appends_1_session_vs_echo_deployed",
                d_one_m / d_echo_m,
                TARGET_RATIO,
                True,
                "as deployed (client, server, echo: a process each): StreamEvents rate, "
                "one session / bare echo stream rate",
            ),
            Target(
                "streamed_appends_100_sessions_vs_echo_deployed",
                d_hundred_m / d_echo_m,
                TARGET_RATIO,
                True,
                "as deployed (client, server, echo: a process each): StreamEvents rate, "
                "100 sessions / bare echo stream rate",
            ),
        ],
    )
