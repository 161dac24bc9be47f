"""The asyncio client end to end, against a real server: sessions, appends, reads, compaction."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import (
    AlreadyExistsError,
    AsyncClient,
    NotFoundError,
    session_policy,
)
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.model import Event, Role, SkipReason, ToolResult
from tests.client.conftest import SUMMARIZE, WINDOW, a, policy, turn, u
from tests.server.harness import address, running

HEX_ID = re.compile(r"^[0-9a-f]{32}$")


async def test_create_session_with_policy_and_labels_reads_back(client: AsyncClient) -> None:
    created = await client.create_session("s1", policy(SUMMARIZE), labels={"team": "a"})

    fetched = await client.get_session("s1")

    assert created.session_id == fetched.session_id == "s1"
    assert session_policy(fetched) == policy(SUMMARIZE)
    assert dict(fetched.labels) == {"team": "a"}
    assert fetched.version == created.version
    assert fetched.counters.turns == 0


async def test_create_session_without_policy_gets_the_server_default(client: AsyncClient) -> None:
    created = await client.create_session("s1")

    assert session_policy(created) == policy(WINDOW)


async def test_create_taken_id_raises_already_exists(client: AsyncClient) -> None:
    await client.create_session("s1")

    with pytest.raises(AlreadyExistsError):
        await client.create_session("s1")


async def test_update_session_changes_only_what_is_passed(client: AsyncClient) -> None:
    created = await client.create_session("s1", labels={"team": "a"})

    relabelled = await client.update_session(
        "s1", labels={"team": "b"}, expected_version=created.version
    )
    no_policy = await client.update_session("s1", policy=None)

    assert dict(relabelled.labels) == {"team": "b"}
    assert session_policy(relabelled) == policy(WINDOW)
    assert session_policy(no_policy) is None
    assert dict(no_policy.labels) == {"team": "b"}
    assert no_policy.version > relabelled.version > created.version


async def test_update_session_without_changes_is_refused_locally(client: AsyncClient) -> None:
    with pytest.raises(ValueError, match="policy, labels and/or model"):
        await client.update_session("s1")


async def test_delete_session_removes_it(client: AsyncClient) -> None:
    await client.create_session("s1")

    await client.delete_session("s1")

    with pytest.raises(NotFoundError):
        await client.get_session("s1")


async def test_list_sessions_walks_every_page_and_filters_labels(client: AsyncClient) -> None:
    for n in range(5):
        await client.create_session(f"s{n}", labels={"team": "a" if n % 2 == 0 else "b"})

    everyone = [s.session_id async for s in client.list_sessions(page_size=2)]
    team_a = [s.session_id async for s in client.list_sessions(label_filter={"team": "a"})]

    assert everyone == ["s0", "s1", "s2", "s3", "s4"]
    assert team_a == ["s0", "s2", "s4"]


async def test_append_gives_ids_positions_and_the_new_version(client: AsyncClient) -> None:
    session = await client.create_session("s1")
    handle = client.session("s1")

    first = await handle.append([u("hi"), a("hello", id="mine")])
    second = await handle.append([u("again")], expected_version=first.version)

    assert HEX_ID.match(first.events[0].id)
    assert first.events[1].id == "mine"
    assert [e.position for e in first.events + second.events] == [1, 2, 3]
    assert first.version > session.version
    assert second.version > first.version
    assert (first.compaction, first.compaction_scheduled) == (None, False)


async def test_append_can_create_the_session(client: AsyncClient) -> None:
    result = await client.session("fresh").append([u()], create_if_missing=True)

    assert (await client.get_session("fresh")).version == result.version


async def test_re_appending_a_stored_id_returns_the_original(client: AsyncClient) -> None:
    handle = client.session("s1")
    first = await handle.append([u("hi", id="e1")], create_if_missing=True)

    again = await handle.append([u("hi", id="e1")])

    assert again.events[0].position == first.events[0].position
    assert [e.id async for e in handle.events()] == ["e1"]


async def test_append_past_the_trigger_compacts_inline(client: AsyncClient) -> None:
    handle = client.session("s1")
    await client.create_session("s1", policy(WINDOW))
    for n in range(3):
        assert (await handle.append(turn(n))).compaction is None

    result = await handle.append(turn(3))

    compaction = result.compaction
    assert compaction is not None
    assert compaction.compacted
    assert compaction.strategy == "sliding_window"
    assert [e.text for e in compaction.archived_events] == [
        "question number0",
        "answer number0",
        "question number1",
        "answer number1",
    ]
    assert all(e.archived for e in compaction.archived_events)
    assert compaction.version == result.version


async def test_context_is_the_active_window(client: AsyncClient) -> None:
    handle = client.session("s1")
    for n in range(4):
        last = await handle.append(turn(n), create_if_missing=True)

    context = await handle.context()

    assert [e.text for e in context.events] == [
        "question number2",
        "answer number2",
        "question number3",
        "answer number3",
    ]
    assert context.version == last.version
    assert context.turn_count == 2
    assert context.token_count == sum(e.token_count for e in context.events) > 0


async def test_context_reads_an_omitted_window_again_when_it_changed_in_between(
    tmp_path: Path,
) -> None:
    """Past the message limit the window comes without content and is read in pages; an
    append landing between the two reads makes them differ, so both are read again."""
    async with running(tmp_path, max_message_bytes=8192) as sidecar:
        async with AsyncClient(address(sidecar)) as plain, AsyncClient(address(sidecar)) as c:
            big = [u(f"q{n}" + "x" * 1500, id=f"q{n}") for n in range(4)]
            await plain.session("big").append(big, create_if_missing=True)
            get_context = c._stub.GetContext
            answers: list[bool] = []

            async def late_append(request: Any, **kwargs: Any) -> Any:
                answer = await get_context(request, **kwargs)
                answers.append(answer.content_omitted)
                if len(answers) == 1:  # the window changes before its pages are read
                    await plain.session("big").append([u("late", id="late")])
                return answer

            c._stub.GetContext = late_append  # type: ignore[assignment]
            window = await c.session("big").context()

    assert answers == [True, True]
    assert [e.id for e in window.events] == ["q0", "q1", "q2", "q3", "late"]
    assert [len(e.text) for e in window.events] == [1502] * 4 + [4]
    assert window.version == 2


async def test_context_reads_an_omitted_window_again_when_a_clearing_landed_in_between(
    tmp_path: Path,
) -> None:
    """A clearing keeps every id, so ids alone would take the pages for the answer's window:
    the flags and token counts tell them apart, and the window read is one consistent state."""
    async with running(tmp_path, max_message_bytes=8192) as sidecar:
        async with AsyncClient(address(sidecar)) as plain, AsyncClient(address(sidecar)) as c:
            log = [u("go", id="go")]
            for n in range(5):
                log.append(a("", id=f"a{n}", calls=(f"c{n}",)))
                log.append(
                    Event(
                        id=f"t{n}",
                        role=Role.TOOL,
                        tool_results=(ToolResult(f"c{n}", "lookup", "x " * 1000),),
                    )
                )
            await plain.session("big").append(log[:1], create_if_missing=True)
            for event in log[1:]:  # one by one: the requests stay within the limit
                await plain.session("big").append([event])
            get_context = c._stub.GetContext
            answers: list[bool] = []

            async def late_clearing(request: Any, **kwargs: Any) -> Any:
                answer = await get_context(request, **kwargs)
                answers.append(answer.content_omitted)
                if len(answers) == 1:
                    clearing = CompactionPolicy(None, ClearToolResults(keep_tool_uses=1))
                    await plain.session("big").compact(clearing, force=True)
                return answer

            c._stub.GetContext = late_clearing  # type: ignore[assignment]
            window = await c.session("big").context()

    assert answers == [True, False]  # cleared, the window fits in one answer again
    assert [e.id for e in window.events if e.cleared] == ["t0", "t1", "t2", "t3"]
    assert window.token_count == sum(e.token_count for e in window.events)
    assert window.version == 12


async def test_events_lists_the_whole_log_across_pages(client: AsyncClient) -> None:
    handle = client.session("s1")
    for n in range(4):
        await handle.append(turn(n), create_if_missing=True)

    everything = [e async for e in handle.events(page_size=3)]
    active = [e async for e in handle.events(active_only=True)]

    assert [e.position for e in everything] == list(range(1, 9))
    assert [e.archived for e in everything] == [True] * 4 + [False] * 4
    assert active == [e for e in everything if not e.archived]


async def test_compact_without_force_reports_the_trigger_did_not_fire(
    client: AsyncClient,
) -> None:
    handle = client.session("s1")
    await handle.append(turn(0), create_if_missing=True)

    result = await handle.compact()

    assert not result.compacted
    assert result.skipped_reason is SkipReason.TRIGGER_NOT_FIRED


async def test_compact_with_force_and_a_policy_override(client: AsyncClient) -> None:
    handle = client.session("s1")
    for n in range(3):
        appended = await handle.append(turn(n), create_if_missing=True)
    keep_one_turn = policy({"strategy": {"turn_window": {"max_turns": 1}}})

    result = await handle.compact(keep_one_turn, force=True, expected_version=appended.version)

    assert result.compacted
    assert result.strategy == "turn_window"
    assert [e.text for e in result.active_events] == ["question number2", "answer number2"]
    assert result.archived_event_count == 4
    assert result.compaction_id == (await handle.get()).last_compaction_id


async def test_search_finds_archived_events_and_filters(client: AsyncClient) -> None:
    handle = client.session("s1")
    for n in range(4):
        await handle.append(turn(n), create_if_missing=True)
    await client.session("s2").append(turn(0), create_if_missing=True)

    archived = [h async for h in handle.search("number0")]
    with_active = [h async for h in handle.search("number3", include_active=True)]
    only_active = [h async for h in handle.search("number3")]
    answers = [h async for h in handle.search("number0", roles=[Role.ASSISTANT])]
    everywhere = [h async for h in client.search("number0", include_active=True)]
    future = datetime.now(UTC) + timedelta(hours=1)
    none_yet = [h async for h in handle.search("number0", since=future)]
    before = [h async for h in handle.search("number0", until=future, page_size=1)]

    assert sorted(h.event.text for h in archived) == ["answer number0", "question number0"]
    assert all(h.session_id == "s1" and h.event.archived for h in archived)
    assert all("number0" in h.snippet for h in archived)
    assert [h.rank for h in archived] == sorted((h.rank for h in archived), reverse=True)
    assert {h.event.text for h in with_active} == {"question number3", "answer number3"}
    assert only_active == []
    assert [h.event.role for h in answers] == [Role.ASSISTANT]
    assert sorted(h.session_id for h in everywhere) == ["s1", "s1", "s2", "s2"]
    assert none_yet == []
    assert len(before) == 2
