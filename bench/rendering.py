"""Target: GetContext of a 200-event window rendered in a provider's format costs at most
2 x the same GetContext without a format.

The window is a tool-using agent's: 50 rounds of a question, an assistant
event with reasoning (text and signature) and a signed call, its result,
and an answer, texts of 300-2000 bytes, appended through the server's
store. Every call goes through the real server over gRPC, the plain and the
rendered ones alternating in blocks, per format.

Two situations are timed. ``after_append`` is the agent's loop: a
one-event append (untimed), then GetContext; the server renders the grown
window from its kept rendering of the window before (only what the append
can change is laid out again, ``sidecar.providers.incremental``) and copies
the answer with it, while the plain answer only adds the new event's bytes
to its kept response. That is what rendering costs, and it is the target,
with the format that costs most. Each of the five (plain and four formats)
reads a session of its own, so every window grows alike, by at most
``AFTER_APPEND_CALLS`` events. ``unchanged`` reads an unchanged session
again: both answers are kept, and the rendered one costs only its extra
bytes on the wire. It is reported beside the target.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from bench.common import Log, Outcome, Scale, Target, median
from bench.service import sidecar_server
from bench.texts import text_of
from sidecar.compaction.tokens import count_event
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceStub
from sidecar.model import Event, Reasoning, Role, ToolCall, ToolResult

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import CompactionServiceAsyncStub

TARGET_RATIO = 2.0
ROUNDS = 50  # four events each: 200
AFTER_APPEND_CALLS = 40  # per session: its window grows from 200 to 240 events
FORMATS = {
    "gemini": pb.CONTEXT_FORMAT_GEMINI,
    "openai_chat": pb.CONTEXT_FORMAT_OPENAI_CHAT,
    "openai_responses": pb.CONTEXT_FORMAT_OPENAI_RESPONSES,
    "anthropic": pb.CONTEXT_FORMAT_ANTHROPIC,
}


def tool_window() -> list[Event]:
    """The 200-event window, token counts set as the engine would."""
    events: list[Event] = [Event(id="system", role=Role.SYSTEM, text=text_of(0))]
    for n in range(ROUNDS):
        call = ToolCall(f"c{n}", "logs", f'{{"service": "checkout", "n": {n}}}', b"\x0a\x24" * 40)
        thought = Reasoning(text_of(n, 100, 400), b"EqQB" * 60, id=f"rs_{n}")
        events += [
            Event(id=f"u{n}", role=Role.USER, text=text_of(4 * n)),
            Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(call,), reasoning=(thought,)),
            Event(
                id=f"t{n}",
                role=Role.TOOL,
                tool_results=(ToolResult(call.id, "logs", text_of(4 * n + 1)),),
            ),
            Event(id=f"r{n}", role=Role.ASSISTANT, text=text_of(4 * n + 2)),
        ]
    return [e.evolve(token_count=count_event(e)) for e in events[: 4 * ROUNDS]]


async def _timed(stub: CompactionServiceAsyncStub, request: pb.GetContextRequest) -> float:
    start = time.perf_counter()
    await stub.GetContext(request)
    return time.perf_counter() - start


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    calls = max(4, scale.context_calls // 20)  # per format, unchanged
    blocks = 2 if calls < 20 else 5
    per_block = max(2, calls // blocks)
    appends_per_block = max(2, min(calls, AFTER_APPEND_CALLS) // blocks)
    kinds = {"plain": pb.CONTEXT_FORMAT_UNSPECIFIED, **FORMATS}
    requests = {name: pb.GetContextRequest(session_id=f"bench-rendering-{name}", format=value)
                for name, value in kinds.items()}  # fmt: skip
    unchanged: dict[str, list[float]] = {name: [] for name in kinds}
    after: dict[str, list[float]] = {name: [] for name in kinds}
    sizes: dict[str, int] = {}
    async with sidecar_server(workdir) as sidecar:
        window = tool_window()
        for request in requests.values():
            await sidecar.engine.store.append(request.session_id, window, create_if_missing=True)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{sidecar.port}") as channel:
            stub = CompactionServiceStub(channel)
            for name, request in requests.items():
                sizes[name] = (await stub.GetContext(request)).ByteSize()
            for _ in range(3):  # warm up
                for request in requests.values():
                    await _timed(stub, request)
            for _ in range(blocks):
                for name, request in requests.items():
                    unchanged[name] += [await _timed(stub, request) for _ in range(per_block)]
            for block in range(blocks):
                for name, request in requests.items():
                    for i in range(appends_per_block):
                        n = block * appends_per_block + i
                        event = event_pb2.Event(id=f"more{n}", role=event_pb2.ROLE_USER,
                                                text=text_of(n))  # fmt: skip
                        await stub.AppendEvents(
                            pb.AppendEventsRequest(session_id=request.session_id, events=[event])
                        )
                        after[name].append(await _timed(stub, request))
    ms = {situation: {name: median(times) * 1000 for name, times in timed.items()}
          for situation, timed in (("unchanged", unchanged), ("after_append", after))}  # fmt: skip
    log(
        f"GetContext of a {4 * ROUNDS}-event tool window, plain and rendered, {per_block * blocks} "
        f"calls each unchanged, {appends_per_block * blocks} after an append; answer bytes: "
        + ", ".join(f"{name} {size}" for name, size in sizes.items())
    )
    for situation, medians in ms.items():
        log(
            f"  {situation} median: "
            + ", ".join(f"{name} {value:.3f} ms" for name, value in medians.items())
        )
    ratios = {situation: {name: medians[name] / medians["plain"] for name in FORMATS}
              for situation, medians in ms.items()}  # fmt: skip
    worst = max(FORMATS, key=lambda name: ratios["after_append"][name])
    return Outcome(
        figures={
            "window_events": 4 * ROUNDS,
            "calls": per_block * blocks,
            "calls_after_append": appends_per_block * blocks,
            "answer_bytes": sizes,
            "median_ms": ms,
            "ratios": ratios,
            "costliest_format": worst,
        },
        targets=[
            Target(
                "rendered_get_context_vs_get_context",
                ratios["after_append"][worst],
                TARGET_RATIO,
                False,
                f"GetContext rendered ({worst}, the costliest format) / plain GetContext, "
                f"each right after a one-event append, {4 * ROUNDS}-event window",
            ),
        ],
    )
