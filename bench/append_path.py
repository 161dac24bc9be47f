"""CPU per message of the streamed append path without gRPC (a diagnostic, no target).

``python -m bench.append_path [MESSAGES] [ROUNDS] [BATCH] [SESSIONS]`` hands the
same messages as ``bench.cpu`` (one session; ``SESSIONS`` spreads them over that
many, interleaved, as ``bench.appends`` does for 100) to the servicer's StreamEvents
batches directly, ``BATCH`` at a time as a stream reads them ahead: each
request parsed from its bytes and sized, answered, each answer sized and
serialized, and the full-text indexing the appends leave waited for. It
prints the CPU the process spent per message (user + system, every thread:
the SQLite writer's and the token counters' included).

Without the two sides of grpc.aio (most of what ``bench.cpu`` measures) a
change of a few microseconds a message shows above the noise: compare two
checkouts run by turns, as for ``bench.cpu``.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.appends import requests_for
from bench.service import sidecar_server
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.server.stream_batches import StreamBatches
from sidecar.store.protocol import SearchQuery, Store


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _answer_all(batches: StreamBatches, store: Store, raw: list[bytes], batch: int) -> None:
    for start in range(0, len(raw), batch):
        requests = [pb.StreamEventsRequest.FromString(r) for r in raw[start : start + batch]]
        for request in requests:
            request.ByteSize()  # what a stream counts against its bounds
        for out in await batches.answer(list(requests)):
            if not out.HasField("append"):
                raise RuntimeError(f"not acknowledged: {out}")
            out.ByteSize()
            out.SerializeToString()
    # A search first indexes everything appended: the indexing is part of an append's cost.
    await store.search(SearchQuery("unfound", include_active=True), page_size=1, page_token="")


async def main(messages: int, rounds: int, batch: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        async with sidecar_server(Path(directory)) as sidecar:
            batches, store = sidecar.servicer.stream_batches, sidecar.engine.store
            warm = [r.SerializeToString() for r in requests_for(500, 1, "warm")]
            await _answer_all(batches, store, warm, batch)
            for r in range(rounds):
                raw = [q.SerializeToString() for q in requests_for(messages, sessions, f"path{r}")]
                cpu, wall = _cpu_s(), time.perf_counter()
                await _answer_all(batches, store, raw, batch)
                cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
                print(
                    f"round {r + 1} append path {cpu / messages * 1e6:6.1f} us CPU per message  "
                    f"{cpu / wall:.2f} cores busy"
                )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:5]]
    asyncio.run(main(*(args + [5000, 5, 16, 1][len(args) :])))
