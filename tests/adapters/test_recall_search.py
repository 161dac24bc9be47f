"""``recall`` and ``arecall`` against a real server: what they ask SearchEvents, and answer.

Each test archives a few turns with a forced turn-window pass, then recalls.
"""

from __future__ import annotations

from sidecar.adapters.recall import RecallSettings, arecall, recall
from sidecar.client import AsyncClient, Client
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import Event, Role

KEEP_NEWEST_TURN = CompactionPolicy(trigger=None, strategy=TurnWindow(max_turns=1))


def turns(*texts: str, first: int = 0) -> list[Event]:
    """A user message and an "ok" answer per text, numbered from ``first``."""
    events: list[Event] = []
    for i, text in enumerate(texts, start=first):
        events += [
            Event(id=f"u{i}", role=Role.USER, text=text),
            Event(id=f"a{i}", role=Role.ASSISTANT, text="ok"),
        ]
    return events


def archived(client: Client, session_id: str, *texts: str) -> None:
    """A session whose turns but the newest (a last "bye") are archived."""
    client.create_session(session_id)
    client.session(session_id).append(turns(*texts, "bye"))
    client.session(session_id).compact(KEEP_NEWEST_TURN, force=True)


def test_only_archived_events_are_recalled_unless_the_active_window_is_asked(
    sidecar_address: str,
) -> None:
    with Client(sidecar_address) as client:
        archived(client, "recall-active", "the parcel went to Porto")
        client.session("recall-active").append(turns("a second parcel to Porto", first=9))

        answer = recall(client, "recall-active", "parcel Porto")
        with_active = recall(
            client, "recall-active", "parcel Porto", RecallSettings(include_active=True)
        )

    assert [line for line in answer.splitlines() if line.startswith("- ")] == [
        answer.splitlines()[1]
    ]
    assert "the **parcel** went to **Porto**" in answer
    assert "second" not in answer
    assert "second **parcel**" in with_active
    assert with_active.startswith("From this session's history")


def test_more_hits_than_max_hits_are_counted_as_at_least(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        archived(client, "recall-many", *(f"parcel {i} shipped" for i in range(6)))

        answer = recall(client, "recall-many", "parcel", RecallSettings(max_hits=2))
        everything = recall(client, "recall-many", "parcel", RecallSettings(max_hits=6))

    lines = answer.splitlines()
    assert sum(line.startswith("- ") for line in lines) == 2
    assert lines[-1].startswith("At least 1 more matched")
    assert sum(line.startswith("- ") for line in everything.splitlines()) == 6
    assert "more matched" not in everything


def test_another_sessions_history_is_never_recalled(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        archived(client, "recall-mine", "my parcel went to Porto")
        archived(client, "recall-theirs", "their parcel went to Faro")

        answer = recall(client, "recall-mine", "parcel")

    assert "Porto" in answer
    assert "Faro" not in answer


async def test_a_query_the_server_refuses_is_answered_with_a_sentence(
    sidecar_address: str,
) -> None:
    too_many_words = " ".join(f"w{i}" for i in range(65))
    async with AsyncClient(sidecar_address) as client:
        answer = await arecall(client, "recall-mine", too_many_words)

    assert answer.startswith("The search refused the query (INVALID_ARGUMENT")
    assert "65 words" in answer


async def test_async_recall_answers_as_the_sync_one(sidecar_address: str) -> None:
    with Client(sidecar_address) as sync:
        archived(sync, "recall-async", "the parcel went to Porto")
        expected = recall(sync, "recall-async", "Porto")
    async with AsyncClient(sidecar_address) as client:
        answer = await arecall(client, "recall-async", "Porto")

    assert answer == expected
    assert "went to **Porto**" in answer
