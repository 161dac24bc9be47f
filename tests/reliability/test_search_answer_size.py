"""SearchEvents pages are bounded in bytes: hits on large events never pass the message limit.

A page of search hits was bounded by count only (100 by default), and each hit
carries its whole event: a dozen 90 KB events matching a word made an answer
of a megabyte, which the server failed with RESOURCE_EXHAUSTED ("Sent message
larger than max") on every attempt, so those hits could never be read. Now a
page stops at half the message limit (holding at least one hit), as ListEvents
pages do, and its token continues from the next hit: none lost, none repeated.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.reliability.budget import FIGURES, LONG
from tests.reliability.test_answer_size import BIG, LIMIT, channel
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

ROUNDS = 8 if LONG else 1
MATCHING = 12  # 12 x ~90 KB: one default page of them is ~2.7 x LIMIT


def event(n: int, size: int, word: str) -> event_pb2.Event:
    """An event of about ``size`` bytes of text in which ``word`` occurs once."""
    role = event_pb2.ROLE_USER if n % 2 == 0 else event_pb2.ROLE_ASSISTANT
    filler = "filler " * (size // 7)
    return event_pb2.Event(id=f"e{n}", role=role, text=f"{word} number{n} {filler}")


async def search_all(stub: Stub, request: pb.SearchEventsRequest) -> list[list[str]]:
    """Every page of ``request``, as the hit ids of each, each answer checked against LIMIT."""
    pages: list[list[str]] = []
    token = ""
    while True:
        request.page_token = token
        page = await stub.SearchEvents(request)
        assert page.ByteSize() <= LIMIT
        assert page.hits, "a page holds at least one hit"
        pages.append([hit.event.id for hit in page.hits])
        token = page.next_page_token
        if not token:
            return pages


async def test_search_hits_on_large_events_are_paged_within_the_message_limit(
    tmp_path: Path, store_url: str
) -> None:
    rng = random.Random(17)
    async with running(
        tmp_path, store=store_url, max_message_bytes=LIMIT, max_event_bytes=BIG + 10_000
    ) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            for round_ in range(ROUNDS):
                session_id = f"search-{round_}"
                sizes = [rng.randint(BIG // 2, BIG) for _ in range(MATCHING)]
                # Matching events among others, a few per append (each append within LIMIT).
                events = [event(n, size, "needle") for n, size in enumerate(sizes)]
                events += [event(MATCHING + n, 1000, "haystack") for n in range(4)]
                rng.shuffle(events)
                for start in range(0, len(events), 3):
                    await stub.AppendEvents(
                        pb.AppendEventsRequest(
                            session_id=session_id,
                            events=events[start : start + 3],
                            create_if_missing=True,
                        )
                    )
                request = pb.SearchEventsRequest(
                    query="needle", session_id=session_id, include_active=True
                )
                pages = await search_all(stub, request)
                hits = [hit for page in pages for hit in page]
                assert len(pages) > 1
                assert len(hits) == len(set(hits)), "no hit repeated"
                assert sorted(hits) == sorted(f"e{n}" for n in range(MATCHING)), "no hit lost"
                # A page size the bytes cut short continues where they did, not after the size.
                request.page_size = 5
                assert [h for page in await search_all(stub, request) for h in page] == hits
                FIGURES["search_pages_bounded_in_bytes"] += len(pages)
