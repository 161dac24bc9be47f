"""Target 2: appends through the sidecar vs Google ADK's session services in process.

The same events (one text of 300-2000 bytes each, user/assistant alternating)
go one after another into one session:

- sidecar, streamed: ``StreamEvents``, one reply per message (as in ``appends``);
- sidecar, unary: ``AppendEvents`` awaited one at a time, the gRPC hop included;
- ADK ``SqliteSessionService.append_event`` and ``DatabaseSessionService.append_event``
  (``sqlite+aiosqlite``), in ADK's own process (``bench.adk_worker``), no hop.

Every store is an on-disk SQLite file in the same directory. ADK runs on two
kinds of file: WAL (the sidecar's journal mode; WAL is a property of the file,
so ADK's own connections use it) and ADK as shipped (rollback journal). Each
target is taken against the faster of the two, so the baseline is never tuned
down. Rounds alternate sidecar / ADK; figures are medians over rounds.

Each round also streams and appends one at a time as deployed
(``bench.deployed``): the client in a process of its own, the real CLI server
in another. Those are the ``_deployed`` targets, against the same ADK figures:
ADK is a library in the agent's process, so its worker is already deployed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from bench import adk
from bench.appends import requests_for, service_rate
from bench.common import Log, Outcome, Scale, Stopwatch, Target, median, pb_event
from bench.deployed import client_process, per_message_us
from bench.server_process import server_process
from bench.service import sidecar_server
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

STREAMED_RATIO = 5.0
UNARY_RATIO = 2.0
SERVICES = {"sqlite": "SqliteSessionService", "database": "DatabaseSessionService"}
FILES = ("wal", "shipped")

TARGETS = tuple(
    f"{kind}_appends_vs_adk_{service}{suffix}"
    for suffix in ("", "_deployed")
    for kind in ("streamed", "unary")
    for service in SERVICES
)


async def unary_rate(stub: CompactionServiceAsyncStub, count: int, session: str) -> float:
    """Sequential unary appends, each awaited before the next is sent."""
    requests = [
        pb.AppendEventsRequest(session_id=session, events=[pb_event(i)], create_if_missing=True)
        for i in range(count)
    ]
    with Stopwatch() as sw:
        for request in requests:
            await stub.AppendEvents(request)
    return count / sw.seconds


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    python = adk.require(scale)
    if python is None:
        reason = adk.missing_reason()
        log(f"ADK appends: skipped, {reason}")
        return Outcome(skipped=dict.fromkeys(TARGETS, reason))
    n_stream, n_unary, n_adk = scale.adk_streamed, scale.unary_appends, scale.adk_appends
    log(
        f"appends vs Google ADK: per round {n_stream} streamed, {n_unary} unary, "
        f"{n_adk} per ADK service and file kind; {scale.adk_rounds} round(s)"
    )
    streamed: list[float] = []
    unary: list[float] = []
    d_streamed: list[dict[str, Any]] = []  # as deployed: the client's replies per round
    d_unary: list[dict[str, Any]] = []
    rates: dict[str, list[float]] = {f"{s}_{f}": [] for s in SERVICES for f in FILES}
    async with (
        sidecar_server(workdir) as sidecar,
        adk.adk_worker(python) as worker,
        server_process(workdir) as server,
        client_process() as client,
    ):
        for service in SERVICES:
            for kind in FILES:
                name = f"{service}_{kind}"
                await worker.call(
                    "open",
                    service=service,
                    name=name,
                    path=str(workdir / f"adk-{name}.db"),
                    wal=kind == "wal",
                )
                await worker.call("append", name=name, session="warm", start=0, count=20)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel:
            stub = CompactionServiceStub(channel)
            await service_rate(stub, requests_for(max(50, n_stream // 10), 1, "warm"))
            await unary_rate(stub, 50, "warm-unary")

            async def deployed(op: str, **args: object) -> dict[str, Any]:
                return await client.call(op, server, **args)

            await deployed("stream", count=max(50, n_stream // 10), sessions=1, tag="warm")
            await deployed("unary", count=50, session="warm-unary")
            for r in range(scale.adk_rounds):
                streamed.append(await service_rate(stub, requests_for(n_stream, 1, f"st{r}")))
                unary.append(await unary_rate(stub, n_unary, f"un{r}"))
                d_streamed.append(
                    await deployed("stream", count=n_stream, sessions=1, tag=f"st{r}")
                )
                d_unary.append(await deployed("unary", count=n_unary, session=f"un{r}"))
                for name, values in rates.items():
                    reply = await worker.call(
                        "append", name=name, session=f"r{r}", start=0, count=n_adk
                    )
                    values.append(n_adk / reply["seconds"])
                adk_text = ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in rates.items())
                log(
                    f"  round {r + 1}: sidecar streamed {streamed[-1]:.0f}/s, "
                    f"unary {unary[-1]:.0f}/s; as deployed streamed "
                    f"{d_streamed[-1]['rate']:.0f}/s, unary {d_unary[-1]['rate']:.0f}/s; "
                    f"ADK {adk_text}"
                )
    streamed_m, unary_m = median(streamed), median(unary)
    d_streamed_m = median([reply["rate"] for reply in d_streamed])
    d_unary_m = median([reply["rate"] for reply in d_unary])
    cpu = {
        "streamed_server_cpu_us_per_event": per_message_us(d_streamed, "server", n_stream),
        "streamed_client_cpu_us_per_event": per_message_us(d_streamed, "client", n_stream),
        "unary_server_cpu_us_per_event": per_message_us(d_unary, "server", n_unary),
        "unary_client_cpu_us_per_event": per_message_us(d_unary, "client", n_unary),
    }
    medians = {name: median(values) for name, values in rates.items()}
    best = {s: max(medians[f"{s}_{f}"] for f in FILES) for s in SERVICES}
    log(
        f"  median: sidecar streamed {streamed_m:.0f}/s, unary {unary_m:.0f}/s; "
        + ", ".join(f"ADK {SERVICES[s]} {best[s]:.0f}/s (faster file kind)" for s in SERVICES)
    )
    log(
        f"  median as deployed: streamed {d_streamed_m:.0f}/s, unary {d_unary_m:.0f}/s; "
        f"server CPU per event {cpu['streamed_server_cpu_us_per_event']:.0f} us streamed, "
        f"{cpu['unary_server_cpu_us_per_event']:.0f} us unary; client "
        f"{cpu['streamed_client_cpu_us_per_event']:.0f} / "
        f"{cpu['unary_client_cpu_us_per_event']:.0f} us"
    )
    targets = [
        Target(
            f"{kind}_appends_vs_adk_{service}{suffix}",
            rate / best[service],
            bound,
            True,
            f"sidecar {label} appends/s{where} / ADK {SERVICES[service]}.append_event/s "
            "(faster of WAL and as-shipped file)",
        )
        for suffix, where, (streamed_rate, unary_rate_) in (
            ("", "", (streamed_m, unary_m)),
            ("_deployed", " (client and server a process each)", (d_streamed_m, d_unary_m)),
        )
        for kind, rate, bound, label in (
            ("streamed", streamed_rate, STREAMED_RATIO, "StreamEvents"),
            ("unary", unary_rate_, UNARY_RATIO, "sequential unary AppendEvents"),
        )
        for service in SERVICES
    ]
    return Outcome(
        figures={
            "streamed_per_round": n_stream,
            "unary_per_round": n_unary,
            "adk_per_round": n_adk,
            "rounds": scale.adk_rounds,
            "sidecar_streamed_per_s": streamed,
            "sidecar_unary_per_s": unary,
            "sidecar_streamed_median": streamed_m,
            "sidecar_unary_median": unary_m,
            "deployed_streamed_per_s": [reply["rate"] for reply in d_streamed],
            "deployed_unary_per_s": [reply["rate"] for reply in d_unary],
            "deployed_streamed_median": d_streamed_m,
            "deployed_unary_median": d_unary_m,
            "deployed_cpu": cpu,
            "adk_per_s": rates,
            "adk_median": medians,
            "adk_best": best,
        },
        targets=targets,
    )
