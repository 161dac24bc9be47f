"""How ADK events, state and compaction settings map to the service's, both ways.

Events map to ours field by field (text, thoughts and their signatures,
function calls and responses, inline and file data, author, branch; see
``adk_content``) and back without loss: the rest of the ADK event
(invocation id, actions with their state delta, usage...) travels as JSON in
the event's metadata, and content that the field mapping cannot rebuild
exactly (several text parts, media before the text) is kept verbatim beside
it. Session state lives in the session's labels, in chunks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.events.event import Event as AdkEvent
from google.adk.sessions.state import State
from google.genai import types
from pydantic_core import to_jsonable_python

from sidecar.adapters.adk_content import cleared_content, content_of, fields_of
from sidecar.adapters.clients import fitted, fitted_key
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import AnyOf, Interval, TokenCount, Trigger
from sidecar.engine.validation import MAX_AUTHOR_CHARS, MAX_BRANCH_CHARS
from sidecar.model import Event, Part, Role, Session, ToolResult

META_EVENT = "adk.event"  # the ADK event without its content, as JSON
META_CONTENT = "adk.content"  # the content verbatim, when the field mapping loses something
# "parts": META_CONTENT's inline data was left out, and is the event's parts' (in order).
META_CONTENT_DATA = "adk.content.data"

LABEL_KIND = "adk.kind"
LABEL_NAMESPACE = "adk.namespace"
LABEL_APP = "adk.app_name"
LABEL_USER = "adk.user_id"
LABEL_SESSION = "adk.session_id"
LABEL_UPDATE_TIME = "adk.last_update_time"  # the last appended event's timestamp, as ADK keeps
LABEL_AGENT = "adk.last_agent"  # the last agent that spoke: who a summary turn is shown to
_STATE_LABEL = "adk.state."
_STATE_CHUNK = 1000  # a label value holds at most 1024 characters
# 64 labels per session, less the 5 identity labels and the 2 an append sets (last update
# time, last agent).
_MAX_STATE_CHUNKS = 57

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~@+=-")


def _escape(part: str) -> str:
    """One id part in the service's alphabet; ``/`` and anything unsafe become ``:XX``."""
    return "".join(
        ch if ch in _SAFE else "".join(f":{byte:02X}" for byte in ch.encode()) for ch in part
    )


def session_key(namespace: str, app_name: str, user_id: str, session_id: str) -> str:
    """The service's session id for an ADK session: unambiguous, ``/``-separated (hashed
    past the service's 128 characters, which ADK's ids know nothing of)."""
    return fitted_key("/".join(_escape(p) for p in (namespace, app_name, user_id, session_id)))


def app_state_key(namespace: str, app_name: str) -> str:
    """The service's id of the session that holds an app's state."""
    return session_key(namespace + "-app", app_name, "", "")


def user_state_key(namespace: str, app_name: str, user_id: str) -> str:
    """The service's id of the session that holds a user's state."""
    return session_key(namespace + "-user", app_name, user_id, "")


def session_labels(namespace: str, app_name: str, user_id: str, session_id: str) -> dict[str, str]:
    """What identifies a session among the labels (and lets list_sessions filter)."""
    return {
        LABEL_NAMESPACE: namespace,
        LABEL_KIND: "session",
        LABEL_APP: app_name,
        LABEL_USER: user_id,
        LABEL_SESSION: session_id,
    }


def holder_labels(namespace: str, kind: str, app_name: str, user_id: str = "") -> dict[str, str]:
    """What identifies a state holder (``kind`` ``app_state`` or ``user_state``)."""
    labels = {LABEL_NAMESPACE: namespace, LABEL_KIND: kind, LABEL_APP: app_name}
    if user_id:
        labels[LABEL_USER] = user_id
    return labels


# -- policy -----------------------------------------------------------------------------


def adk_policy(
    *,
    compaction_interval: int | None = None,
    overlap_size: int | None = None,
    token_threshold: int | None = None,
    event_retention_size: int | None = None,
    max_summary_tokens: int = 512,
    clear_tool_results: ClearToolResults | None = None,
) -> CompactionPolicy:
    """A summarizing policy mirroring ADK's ``EventsCompactionConfig``.

    ``compaction_interval`` turns since the last compaction, or
    ``token_threshold`` tokens in the window, fire it (either, as in ADK).
    The interval fires as the turn after the interval begins, so with
    ``CompactionSessionService`` that turn's model calls carry the summary of
    every turn before it, as ADK's calls do after its post-invocation
    compaction. The summary keeps ``event_retention_size`` recent events
    verbatim (token mode) or the newest turn (interval mode).

    ``overlap_size`` differs in kind: ADK re-summarizes that many earlier
    invocations into the next summary; here the previous summary is folded
    into the next one whole, and ``overlap_size`` kept events are shown to
    the summarizer as context.

    The cost check is ADK's: a pass is made when it can shrink the context,
    the new summary expected as long as the previous one, so one-line turns
    compact as in ADK; ``max_summary_tokens`` caps the summary. With no
    previous summary any archived event counts as a saving, so a first pass
    over very short turns can leave the context a little longer, as ADK's
    first compaction does. Needs a server with a summarizer (any but
    ``--summarizer none``; the default is Gemini with a key, else extractive).

    ``clear_tool_results`` (beyond ADK) makes the strategy a pipeline that
    clears old tool results first and summarizes only if the trigger still
    fires on the cleared window. A clearing moves no event, so it does not
    restart ``compaction_interval``'s count: in interval mode the summary
    still comes every interval, written from the cleared window; in token
    mode it comes only when clearing did not bring the window under
    ``token_threshold``.
    """
    triggers: list[Trigger] = []
    if token_threshold is not None:
        triggers.append(TokenCount(token_threshold))
    if compaction_interval is not None:
        triggers.append(Interval(compaction_interval))
    if not triggers:
        raise ValueError("set compaction_interval, token_threshold, or both")
    overlap = overlap_size or 0
    keep = event_retention_size if token_threshold is not None else None
    keep = max(keep if keep is not None else overlap + 1, overlap + 1, 1)
    trigger = triggers[0] if len(triggers) == 1 else AnyOf(tuple(triggers))
    summarize = Summarize(
        max_events_to_keep=keep,
        overlap=overlap,
        max_summary_tokens=max_summary_tokens,
        min_saved_tokens=1,
    )
    if clear_tool_results is None:
        return CompactionPolicy(trigger=trigger, strategy=summarize)
    return CompactionPolicy(trigger=trigger, strategy=Pipeline((clear_tool_results, summarize)))


def policy_from_events_compaction_config(config: Any) -> CompactionPolicy:
    """``adk_policy`` from an ADK ``EventsCompactionConfig`` (its summarizer is not used:
    the service's summarizer writes the summary)."""
    return adk_policy(
        compaction_interval=config.compaction_interval,
        overlap_size=config.overlap_size,
        token_threshold=config.token_threshold,
        event_retention_size=config.event_retention_size,
    )


# -- events -----------------------------------------------------------------------------


def _role(event: AdkEvent, results: Sequence[ToolResult]) -> Role:
    if results:
        return Role.TOOL
    content = event.content
    if content is not None and content.role == "user":
        return Role.USER
    if content is None and event.author == "user":
        return Role.USER
    return Role.ASSISTANT


def event_to_sidecar(event: AdkEvent) -> Event:
    """Our event for an ADK event; ``event_from_sidecar`` gives back an equal ADK event."""
    content = event.content
    fields = fields_of(content, event.id)
    role = _role(event, fields.tool_results)
    ours = Event(
        id=event.id,
        role=role,
        text=fields.text,
        # Only the model's events carry reasoning and calls (the service refuses others');
        # anywhere else they stay in the verbatim content.
        reasoning=fields.reasoning if role is Role.ASSISTANT else (),
        tool_calls=fields.tool_calls if role is Role.ASSISTANT else (),
        tool_results=fields.tool_results,
        parts=fields.parts,
        # ADK bounds neither an agent's name nor the dotted path of names that is a branch:
        # one past the service's bound is stored fitted, and comes back whole from the
        # verbatim event below.
        author=fitted(event.author, MAX_AUTHOR_CHARS),
        branch=fitted(event.branch or "", MAX_BRANCH_CHARS),
    )
    metadata = {META_EVENT: event.model_dump_json(exclude_none=True, exclude={"content"})}
    if content is None:
        metadata[META_CONTENT] = "null"
    elif content_of(ours) != content:
        # Verbatim but for inline data, which the parts hold already: an image before
        # its text would otherwise be stored twice, the second time in base64.
        verbatim = content.model_dump(mode="json", exclude_none=True)
        for part in verbatim.get("parts") or ():
            if part.get("inline_data", {}).get("data"):
                part["inline_data"]["data"] = ""
                metadata[META_CONTENT_DATA] = "parts"
        metadata[META_CONTENT] = json.dumps(verbatim, ensure_ascii=False, separators=(",", ":"))
    return ours.evolve(metadata=metadata)


def _with_inline_data(content: types.Content, parts: Sequence[Part]) -> types.Content:
    """``content`` with each inline data taken from ``parts``, which ``fields_of`` made of its
    media in order (an inline data, and a file with a URI, one part each)."""
    media = iter(parts)
    for part in content.parts or ():
        if part.inline_data is not None:
            held = next(media, None)
            if part.inline_data.data is not None and held is not None:
                part.inline_data.data = held.data
        if part.file_data is not None and part.file_data.file_uri:
            next(media, None)
    return content


def prompt_tokens(event: AdkEvent) -> int | None:
    """The prompt tokens the provider reported for the model call this event answers (None
    for every event but a model's final answer: only that one carries usage)."""
    usage = event.usage_metadata
    return usage.prompt_token_count if usage is not None else None


def event_from_sidecar(event: Event, *, author: str, timestamp: float | None = None) -> AdkEvent:
    """The ADK event for one of ours: exactly the stored one when this adapter wrote it.

    Events it did not write (a summary turn, another client's events) are
    rendered from their fields, with ``author`` and ``timestamp``. A cleared
    event shows what the clearing left (placeholders, cleared reasoning
    text), with every thought and signature of the original.
    """
    raw = event.metadata.get(META_EVENT)
    if raw is None:
        return AdkEvent(
            id=event.id,
            author=author,
            invocation_id="",
            branch=event.branch or None,
            content=content_of(event),
            timestamp=event.create_time.timestamp() if timestamp is None else timestamp,
        )
    adk = AdkEvent.model_validate_json(raw)
    stored = event.metadata.get(META_CONTENT)
    if stored is None:
        adk.content = content_of(event)
    elif stored != "null":
        content = types.Content.model_validate_json(stored)
        if event.metadata.get(META_CONTENT_DATA) == "parts":
            content = _with_inline_data(content, event.parts)
        # A cleared event shows its placeholders, its thoughts and signatures where they were.
        adk.content = cleared_content(content, event) if event.cleared else content
    return adk


def window_to_adk(
    window: Sequence[Event], summary_author: str | None = None, default_author: str = "model"
) -> list[AdkEvent]:
    """The active window as ADK events, in log order.

    The summary turn (a user shadow prompt and the model's summary) is
    attributed to ``summary_author``, by default the agent that speaks next
    in the window (``default_author`` when none does yet), so ADK shows it to
    that agent as its own earlier turn. Its timestamp is set just before the
    next event's, so time filters and ordering see it where it stands.
    """
    authors = [e.author for e in window if not e.synthetic and e.author not in ("", "user")]
    following = math.inf
    rendered: list[AdkEvent] = []
    next_author = authors[-1] if authors else default_author
    for event in reversed(window):
        if event.synthetic:
            stamp = min(event.create_time.timestamp(), following - 1e-6)
            author = "user" if event.role is Role.USER else (summary_author or next_author)
            adk = event_from_sidecar(event, author=author, timestamp=stamp)
        else:
            adk = event_from_sidecar(event, author=event.author or "user")
            if adk.author != "user":
                next_author = adk.author
        following = adk.timestamp
        rendered.append(adk)
    rendered.reverse()
    return rendered


# -- state ------------------------------------------------------------------------------


def split_state(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Session, app and user state (prefixes removed); temp state is never stored."""
    session: dict[str, Any] = {}
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return session, app, user


def merged_state(
    session: Mapping[str, Any], app: Mapping[str, Any], user: Mapping[str, Any]
) -> dict[str, Any]:
    merged = dict(session)
    merged.update({State.APP_PREFIX + k: v for k, v in app.items()})
    merged.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return merged


def json_safe(state: Mapping[str, Any]) -> dict[str, Any]:
    """State as JSON values, as ADK's own services store it: rich types (datetimes,
    models) faithfully, and values with no JSON form (callables) as their ``repr``."""
    try:
        safe: dict[str, Any] = to_jsonable_python(dict(state))
    except Exception:  # pydantic-core raises several types for unserializable values
        safe = to_jsonable_python(dict(state), serialize_unknown=True)
    return safe


def state_labels(state: Mapping[str, Any], scope: str = "session") -> dict[str, str]:
    """State as JSON in label chunks (labels are the service's per-session key/value store).

    Raises ``ValueError`` naming the scope when the state is over the limit.
    """
    if not state:
        return {}
    text = json.dumps(json_safe(state), ensure_ascii=True, sort_keys=True)
    chunks = [text[i : i + _STATE_CHUNK] for i in range(0, len(text), _STATE_CHUNK)]
    if len(chunks) > _MAX_STATE_CHUNKS:
        raise ValueError(
            f"{scope} state would be {len(text)} characters as JSON; the limit is"
            f" {_MAX_STATE_CHUNKS * _STATE_CHUNK} (keep large data in artifacts)"
        )
    return {f"{_STATE_LABEL}{i}": chunk for i, chunk in enumerate(chunks)}


def state_change(
    labels: Mapping[str, str], delta: Mapping[str, Any], scope: str
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The label changes that merge ``delta`` into the state held in ``labels``:
    chunks to set, and stale chunks to remove. Refused (``ValueError``) over the limit."""
    chunks = state_labels({**state_of(labels), **delta}, scope)
    stale = tuple(k for k in labels if k.startswith(_STATE_LABEL) and k not in chunks)
    return chunks, stale


def state_of(labels: Mapping[str, str]) -> dict[str, Any]:
    chunks: list[str] = []
    while (chunk := labels.get(f"{_STATE_LABEL}{len(chunks)}")) is not None:
        chunks.append(chunk)
    if not chunks:
        return {}
    state: dict[str, Any] = json.loads("".join(chunks))
    return state


def identity_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if not k.startswith(_STATE_LABEL)}


# -- the session header -----------------------------------------------------------------


def event_labels(event: AdkEvent) -> dict[str, str]:
    """What the session header keeps of its last event: ADK's last_update_time, the agent."""
    labels = {LABEL_UPDATE_TIME: repr(event.timestamp)}
    if event.author not in ("", "user"):
        labels[LABEL_AGENT] = event.author[:1024]
    return labels


def update_time(header: Session) -> float:
    """ADK's ``last_update_time``: the timestamp of the last appended event, else creation."""
    stamp = header.labels.get(LABEL_UPDATE_TIME)
    return float(stamp) if stamp is not None else header.update_time.timestamp()
