"""ADK state in the service: read, merged and written at a version, with the events it rides on.

Session state lives in the session's labels; app and user state in one
holder session per app and per user (see ``adk_mapping`` for the labels).
Every change is a read-merge-write at the version it was read at, so two
writers never lose each other's update: the loser merges again. An event
and the state changes it makes are stored in one request, or not at all
(``append_with_state``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event as AdkEvent

from sidecar.adapters.adk_mapping import (
    app_state_key,
    event_labels,
    holder_labels,
    identity_labels,
    json_safe,
    state_change,
    state_labels,
    state_of,
    user_state_key,
)
from sidecar.adapters.usage import append_reporting
from sidecar.client import (
    AlreadyExistsError,
    AppendResult,
    AsyncClient,
    FailedPreconditionError,
    ModelUsage,
    NotFoundError,
    ResourceExhaustedError,
)
from sidecar.model import Event, LabelUpdate, Session

# Attempts at a read-merge-write of state before giving up (each lost race retries).
_ATTEMPTS = 16


@dataclass(frozen=True, slots=True)
class StateHolder:
    """A shared (app or user) state an event changes: the holder session's ``key``, the
    ``delta`` to merge into it, its ``scope`` (for errors) and the ``identity`` labels a
    holder is created with."""

    key: str
    delta: Mapping[str, Any]
    scope: str
    identity: Mapping[str, str]


def state_holders(
    namespace: str, app_name: str, user_id: str, app: Mapping[str, Any], user: Mapping[str, Any]
) -> list[StateHolder]:
    """The shared states that the ``app`` and ``user`` deltas change (an empty one, none)."""
    holders = []
    if app:
        identity = holder_labels(namespace, "app_state", app_name)
        holders.append(StateHolder(app_state_key(namespace, app_name), app, "app", identity))
    if user:
        identity = holder_labels(namespace, "user_state", app_name, user_id)
        holders.append(
            StateHolder(user_state_key(namespace, app_name, user_id), user, "user", identity)
        )
    return holders


async def read_header(client: AsyncClient, key: str) -> Session | None:
    """The session's header, None when there is no such session."""
    try:
        return await client.get_session(key)
    except NotFoundError:
        return None


async def read_state(client: AsyncClient, key: str) -> dict[str, Any]:
    """The state a session (or a holder) keeps; empty when there is none."""
    header = await read_header(client, key)
    return state_of(header.labels) if header is not None else {}


async def merge_state(
    client: AsyncClient, key: str, identity: Mapping[str, str], delta: Mapping[str, Any], scope: str
) -> dict[str, Any]:
    """Merge ``delta`` into a holder's state: read, merge, write at that version."""
    for _ in range(_ATTEMPTS):
        current = await read_header(client, key)
        if current is None:
            try:
                await client.create_session(key, None, {**identity, **state_labels(delta)})
                return json_safe(delta)
            except AlreadyExistsError:
                continue
        state = {**state_of(current.labels), **delta}
        labels = {**identity_labels(current.labels), **state_labels(state, scope)}
        try:
            await client.update_session(key, labels=labels, expected_version=current.version)
            return json_safe(state)
        except FailedPreconditionError:
            continue  # someone else wrote meanwhile: merge again
    raise RuntimeError(f"state of {key!r} kept changing; gave up after {_ATTEMPTS} attempts")


async def shared_state(
    client: AsyncClient,
    key: str,
    holder: Session | None,
    identity: Mapping[str, str],
    delta: Mapping[str, Any],
    scope: str,
) -> dict[str, Any]:
    """A shared (app or user) state after merging ``delta``; written only when there is
    something to merge, so creating sessions does not contend on the holder."""
    if not delta:
        return state_of(holder.labels) if holder is not None else {}
    return await merge_state(client, key, identity, delta, scope)


async def ensure_holder(client: AsyncClient, key: str, identity: Mapping[str, str]) -> Session:
    """A state holder's header, creating the holder when absent, so that every change to
    it can be made at a version (two first writers must not both think it empty)."""
    header = await read_header(client, key)
    if header is not None:
        return header
    with contextlib.suppress(AlreadyExistsError):
        return await client.create_session(key, None, dict(identity))
    header = await read_header(client, key)
    if header is None:  # created and deleted in between: a caller's race, not ours
        raise RuntimeError(f"state holder {key!r} vanished while it was created")
    return header


async def append_with_state(
    client: AsyncClient,
    *,
    key: str,
    session_id: str,
    ours: Event,
    event: AdkEvent,
    usage: ModelUsage | None,
    own: Mapping[str, Any],
    holders: Sequence[StateHolder],
) -> tuple[AppendResult, bool]:
    """One AppendEvents carrying the event, every state change it makes and ``usage``.

    ``own`` is the session's state delta, ``holders`` the shared states it
    changes. Each state that changes is merged at the version it was read
    at; when another writer got there first the whole append is refused
    (nothing stored), and this merges again after a short random pause. An
    event that changes no session state is appended at no version, so
    writers of one session only race on the state they both change. True
    when this call wrote the event.
    """
    for attempt in range(_ATTEMPTS):
        header, others = await asyncio.gather(
            read_header(client, key),
            asyncio.gather(*(ensure_holder(client, h.key, h.identity) for h in holders)),
        )
        if header is None:
            raise SessionNotFoundError(f"Session {session_id} not found.")
        # No session state change, no state written: what was read may be older than
        # another writer's change, and writing it back at no version would undo that.
        chunks, stale = state_change(header.labels, own, "session") if own else ({}, ())
        updates = [
            LabelUpdate(
                set={**chunks, **event_labels(event)},
                remove=stale,
                expected_version=header.version if own else None,
            )
        ]
        for holder, current in zip(holders, others, strict=True):
            chunks, stale = state_change(current.labels, holder.delta, holder.scope)
            updates.append(
                LabelUpdate(
                    session_id=holder.key,
                    set=chunks,
                    remove=stale,
                    expected_version=current.version,
                )
            )
        try:
            result = await append_reporting(
                client.session(key), [ours], usage, label_updates=updates
            )
        except NotFoundError as exc:
            raise SessionNotFoundError(f"Session {session_id} not found.") from exc
        except AlreadyExistsError as exc:
            raise AdkAlreadyExistsError(
                f"Event {event.id} already exists in session {session_id} with"
                " different content; an event id may be re-sent only unchanged."
            ) from exc
        except ResourceExhaustedError as exc:
            raise ValueError(f"event {event.id} refused: {exc}") from exc
        except FailedPreconditionError:
            # Another writer changed this session's or a shared state: merge again.
            await asyncio.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))
            continue
        return result, result.version != header.version
    raise StaleSessionError(
        f"session {session_id!r}: its state kept changing under append_event;"
        f" gave up after {_ATTEMPTS} merges"
    )
