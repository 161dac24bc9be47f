"""``CompactionSessionService`` keeps ADK's ``BaseSessionService`` contract.

Each behaviour is pinned on ADK's own ``SqliteSessionService`` (the
reference: what an app swapping services relies on) and on ours, against a
real server. Where ours must go further — refusing means nothing stored, a
re-sent id with other content — the test is ours alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from sidecar.adapters.adk import CompactionSessionService, session_key
from sidecar.client import AsyncClient, NotFoundError

APP = "app"


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


@pytest.fixture
def ours(client: AsyncClient) -> CompactionSessionService:
    return CompactionSessionService(client, namespace=f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=["adk-sqlite", "compaction"])
async def service(
    request: pytest.FixtureRequest, tmp_path: Path, ours: CompactionSessionService
) -> AsyncIterator[BaseSessionService]:
    if request.param == "compaction":
        yield ours
        return
    reference = SqliteSessionService(str(tmp_path / "adk.db"))
    yield reference
    await reference.close()


def said(text: str, *, author: str = "user", **actions: object) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        invocation_id="inv",
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(**actions),  # type: ignore[arg-type]
    )


async def test_append_to_an_absent_or_deleted_session_raises_session_not_found(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="gone")
    await service.delete_session(app_name=APP, user_id="u", session_id="gone")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(session, said("hi"))
    assert session.events == []


async def test_after_an_append_the_stored_session_equals_the_callers(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u", state={"k": 1})
    event = said("hi", state_delta={"k": 2, "user:lang": "pt"})
    event.timestamp = session.last_update_time + 10
    await service.append_event(session, event)
    assert session.last_update_time == event.timestamp
    stored = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored == session
    listed = await service.list_sessions(app_name=APP, user_id="u")
    assert [s.last_update_time for s in listed.sessions] == [event.timestamp]


async def test_a_value_with_no_json_form_is_stored_as_its_string_with_the_event(
    service: BaseSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u")
    await service.append_event(session, said("hi", state_delta={"fn": print, "n": 1}))
    stored = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored is not None
    assert [e.id for e in stored.events] == [e.id for e in session.events]
    assert stored.state["n"] == 1
    assert stored.state["fn"] == repr(print)


async def test_padded_session_ids_name_the_same_session_on_every_call(
    service: BaseSessionService,
) -> None:
    made = await service.create_session(app_name=APP, user_id="u", session_id="  padded  ")
    assert made.id == "padded"
    got = await service.get_session(app_name=APP, user_id="u", session_id="  padded  ")
    assert got is not None
    assert got.id == "padded"
    await service.append_event(got, said("hi"))
    await service.delete_session(app_name=APP, user_id="u", session_id=" padded ")
    assert await service.get_session(app_name=APP, user_id="u", session_id="padded") is None


async def test_listed_sessions_carry_app_and_user_state(service: BaseSessionService) -> None:
    await service.create_session(
        app_name=APP, user_id="a", session_id="s1", state={"app:theme": "dark", "user:n": 1}
    )
    await service.create_session(app_name=APP, user_id="b", session_id="s2", state={"x": 1})
    listed = {s.id: s.state for s in (await service.list_sessions(app_name=APP)).sessions}
    assert listed == {
        "s1": {"app:theme": "dark", "user:n": 1},
        "s2": {"app:theme": "dark", "x": 1},
    }


async def test_a_re_sent_event_is_kept_once_in_the_session_and_the_store(
    ours: CompactionSessionService, client: AsyncClient
) -> None:
    # ADK's SQLite service refuses a re-sent event (a primary key); ours, like its
    # in-memory one, takes it as the retry it is.
    session = await ours.create_session(app_name=APP, user_id="u", session_id="again")
    event = said("hi", state_delta={"count": 1})
    for _ in range(3):
        await ours.append_event(session, event)
    assert [e.id for e in session.events] == [event.id]
    log = [e async for e in client.session(session_key(ours.namespace, APP, "u", "again")).events()]
    assert [e.id for e in log] == [event.id]


async def test_a_refused_append_stores_nothing(
    ours: CompactionSessionService, client: AsyncClient
) -> None:
    session = await ours.create_session(app_name=APP, user_id="u", session_id="big")
    huge = said("hi", state_delta={"user:blob": "x" * 70_000, "k": 1})
    with pytest.raises(ValueError, match="user state would be"):
        await ours.append_event(session, huge)
    assert session.events == []
    assert session.state == {}
    stored = await ours.get_session(app_name=APP, user_id="u", session_id="big")
    assert stored is not None
    assert (stored.events, stored.state) == ([], {})
    assert await ours.get_user_state(app_name=APP, user_id="u") == {}


async def test_an_event_id_re_sent_with_other_content_is_already_exists(
    ours: CompactionSessionService,
) -> None:
    session = await ours.create_session(app_name=APP, user_id="u")
    first = said("hi")
    await ours.append_event(session, first)
    other = said("something else")
    other.id = first.id
    with pytest.raises(AlreadyExistsError, match="different content"):
        await ours.append_event(session, other)
    assert [e.content for e in session.events] == [first.content]


async def test_concurrent_writers_of_shared_state_lose_no_update(
    ours: CompactionSessionService,
) -> None:
    # ADK's SQL services would raise StaleSessionError for a stale session; this service
    # merges concurrent writers instead, key by key, losing none.
    sessions = [
        await ours.create_session(app_name=APP, user_id="u", session_id=f"w{i}") for i in range(6)
    ]
    await asyncio.gather(
        *(
            ours.append_event(s, said("hi", state_delta={f"user:k{i}": i, f"app:k{i}": i}))
            for i, s in enumerate(sessions)
        )
    )
    assert await ours.get_user_state(app_name=APP, user_id="u") == {f"k{i}": i for i in range(6)}
    fresh = await ours.get_session(app_name=APP, user_id="u", session_id="w0")
    assert fresh is not None
    assert {k: v for k, v in fresh.state.items() if k.startswith("app:")} == {
        f"app:k{i}": i for i in range(6)
    }


async def test_many_sessions_created_at_once_in_one_app_all_land(
    ours: CompactionSessionService,
) -> None:
    made = await asyncio.gather(
        *(ours.create_session(app_name=APP, user_id=f"u{i % 3}") for i in range(30))
    )
    listed = await ours.list_sessions(app_name=APP)
    assert sorted(s.id for s in listed.sessions) == sorted(s.id for s in made)


async def test_first_writers_of_a_shared_state_merge_instead_of_mixing(
    ours: CompactionSessionService, client: AsyncClient
) -> None:
    # No user holder exists yet (sessions made before holders were, or by an older
    # release): concurrent first writers must merge, not interleave chunks.
    for round_ in range(10):
        user = f"first{round_}"
        one = await ours.create_session(app_name=APP, user_id=user, session_id="s")
        two = await ours.create_session(app_name=APP, user_id=user, session_id="t")
        with contextlib.suppress(NotFoundError):
            await client.delete_session(session_key(ours.namespace + "-user", APP, user, ""))
        await asyncio.gather(
            ours.append_event(one, said("a", state_delta={"user:big": "x" * 2500})),
            ours.append_event(two, said("b", state_delta={"user:small": 1})),
        )
        state = await ours.get_user_state(app_name=APP, user_id=user)
        assert state == {"big": "x" * 2500, "small": 1}


async def test_a_state_at_the_limit_still_takes_agent_events(
    ours: CompactionSessionService,
) -> None:
    # Every append also sets two labels of its own: the state's limit leaves room for them.
    with pytest.raises(ValueError, match="session state would be"):
        await ours.create_session(app_name=APP, user_id="u", state={"blob": "y" * 57_500})
    session = await ours.create_session(app_name=APP, user_id="u", state={"blob": "y" * 56_500})
    await ours.append_event(session, said("answer", author="agent"))
    with pytest.raises(ValueError, match="session state would be"):
        await ours.append_event(session, said("more", state_delta={"blob2": "z" * 3_000}))
    stored = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored is not None
    assert len(stored.events) == 1


async def test_concurrent_appends_to_one_session_all_land(
    ours: CompactionSessionService, client: AsyncClient
) -> None:
    session = await ours.create_session(app_name=APP, user_id="u", session_id="busy")
    events = [said(f"m{i}", author="agent") for i in range(30)]
    await asyncio.gather(*(ours.append_event(session, e) for e in events))
    log = [e async for e in client.session(session_key(ours.namespace, APP, "u", "busy")).events()]
    assert sorted(e.id for e in log) == sorted(e.id for e in events)


async def test_an_event_without_state_keeps_a_concurrent_writers_state(
    ours: CompactionSessionService, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that changes no session state read the state before another writer's
    change landed and wrote it back at no version: the change was lost, and a state
    grown past one label chunk became old chunk 0 joined to new chunk 1, JSON no read
    of the session (nor of the app's session list) could parse again."""
    from sidecar.adapters import adk_state

    session = await ours.create_session(app_name=APP, user_id="u", state={"base": 0})
    key = session_key(ours.namespace, APP, "u", session.id)
    before = await adk_state.read_header(client, key)  # what the slow writer read
    other = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert other is not None
    await ours.append_event(other, said("grow", state_delta={"k": "x" * 2500}))

    read_header = adk_state.read_header

    async def read_before_the_change(by: AsyncClient, at: str) -> object:
        return before if at == key else await read_header(by, at)

    monkeypatch.setattr(adk_state, "read_header", read_before_the_change)
    await ours.append_event(session, said("no state change", author="agent"))
    monkeypatch.undo()
    stored = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored is not None
    assert stored.state == {"base": 0, "k": "x" * 2500}
    assert [s.id for s in (await ours.list_sessions(app_name=APP)).sessions] == [session.id]


async def test_long_and_non_ascii_names_work_on_every_call(service: BaseSessionService) -> None:
    # ADK's ids have no length limit; the service's are 128 characters, which escaped
    # non-ASCII characters (nine each) or a long user id pass at once.
    app, user = "天気アプリ", "maria.fernanda.gonzalez+agents@example-company.com" * 2
    made = await service.create_session(
        app_name=app, user_id=user, session_id="会話-2024", state={"user:lang": "ja"}
    )
    await service.append_event(made, said("こんにちは", state_delta={"k": 1}))
    got = await service.get_session(app_name=app, user_id=user, session_id="会話-2024")
    assert got is not None
    assert [e.id for e in got.events] == [e.id for e in made.events]
    assert got.state == {"user:lang": "ja", "k": 1}
    listed = await service.list_sessions(app_name=app, user_id=user)
    assert [s.id for s in listed.sessions] == ["会話-2024"]
    other = await service.create_session(app_name=app, user_id=user, session_id="会話-2025")
    assert other.state == {"user:lang": "ja"}
    await service.delete_session(app_name=app, user_id=user, session_id="会話-2024")
    assert await service.get_session(app_name=app, user_id=user, session_id="会話-2024") is None
    assert await service.get_session(app_name=app, user_id=user, session_id="会話-2025")


async def test_a_call_whose_arguments_hold_a_nan_is_stored(service: BaseSessionService) -> None:
    # Python's JSON (a LiteLLM model's arguments, an agent's own call) reads NaN and
    # Infinity; ADK stores such a call (pydantic writes them as null), and so must we.
    session = await service.create_session(app_name=APP, user_id="u")
    call = types.FunctionCall(id="c1", name="plot", args={"low": float("-inf"), "mid": 1.5})
    event = Event(
        invocation_id="inv",
        author="agent",
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )
    await service.append_event(session, event)
    stored = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored is not None
    assert [e.id for e in stored.events] == [event.id]
    content = stored.events[0].content
    assert content is not None
    assert content.parts is not None
    (part,) = content.parts
    assert part.function_call is not None
    assert part.function_call.args is not None
    assert part.function_call.args["mid"] == 1.5


async def test_an_event_past_the_services_limit_is_refused_and_nothing_stored(
    ours: CompactionSessionService,
) -> None:
    """The session service is the store of record: an event past --max-event-bytes (1 MiB)
    is a ValueError naming the limit, and neither it nor its state change is stored."""
    session = await ours.create_session(app_name=APP, user_id="u")
    with pytest.raises(ValueError, match="max_event_bytes"):
        await ours.append_event(session, said("x" * (1 << 20) + "y", state_delta={"k": 1}))
    stored = await ours.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert stored is not None
    assert stored.events == []
    assert "k" not in stored.state
