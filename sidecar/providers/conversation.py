"""The provider-neutral shape of a window: its system text, then messages with every call answered.

Every provider checks the same pairing: a tool result must answer a call of
the assistant message just before it, and (Anthropic, OpenAI) every call
must be answered before anything else is said. An agent may log anything,
so the window is reshaped here, once, for all of them:

- the latest SYSTEM event's text is the system instruction (the one the
  token trigger counts); earlier SYSTEM events were superseded by it and
  are not rendered, wherever they stand;
- a result pairs with the latest earlier call of its id that no result has
  answered yet (call ids are unique in a window, as every provider makes
  them), and is rendered right after that call's assistant message, in the
  call's order, even when the agent logged it later (a slow tool that
  answered after the user spoke again);
- a call no result answers is answered by a placeholder (``NO_RESULT``,
  an error), so the request stays valid;
- a result with no call before it (an orphan, or a second answer to a call)
  is rendered as user text that says so (``orphan_text``), at its place;
- a TOOL event's own text and parts are user content at its place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.providers.fragments import Fragments
from sidecar.providers.wire import Block, Message

NO_RESULT = "[no result was recorded for this call]"
"""The placeholder result of a call that no result in the window answers."""

LEADING_USER_TEXT = "(continuing the conversation)"
"""The user message put first where a provider needs one (Gemini, Anthropic)
and the window starts with the assistant: after a cut inside a turn, or an
assistant preamble."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A call's answer, rendered right after it: a logged result, or the placeholder."""

    call: ToolCall
    content: str
    is_error: bool
    result: ToolResult | None  # None: the placeholder


@dataclass(frozen=True, slots=True)
class Answers:
    """The answers to the calls of the assistant event just before, one per call, in order."""

    answers: tuple[Answer, ...]


@dataclass(frozen=True, slots=True)
class Orphans:
    """Results with no call before them in the window: rendered as user text."""

    results: tuple[ToolResult, ...]


Item: TypeAlias = Event | Answers | Orphans
"""An event stands for its own content (text, parts, reasoning; calls if it is an
ASSISTANT event), said by the assistant if it is an ASSISTANT event, else by the
user: a TOOL event's own text and parts are user content."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """What every rendering renders: the system text (may be empty) and the items in order."""

    system: str
    items: tuple[Item, ...]


def orphan_text(result: ToolResult) -> str:
    """The user text an orphan result becomes: it says what it is, then its content."""
    kind = "error" if result.is_error else "result"
    name = result.name or "a tool"
    return (
        f"[{kind} of {name} for call {result.call_id}, whose call is not in this context]\n"
        f"{result.content}"
    )


def conversation(events: Sequence[Event]) -> Conversation:
    """The window ``events`` (log order) reshaped by the rules of the module docstring."""
    system_role, assistant_role = Role.SYSTEM, Role.ASSISTANT  # read once: this runs per read
    open_calls: dict[str, list[tuple[int, int]]] = {}
    paired: dict[tuple[int, int], ToolResult] = {}
    orphans: dict[int, list[ToolResult]] = {}
    system = ""
    for i, event in enumerate(events):
        role = event.role
        if role is system_role:
            system = event.text
        elif role is assistant_role:
            for j, call in enumerate(event.tool_calls):
                open_calls.setdefault(call.id, []).append((i, j))
        elif event.tool_results:
            for result in event.tool_results:
                waiting = open_calls.get(result.call_id)
                if waiting:
                    paired[waiting.pop()] = result
                else:
                    orphans.setdefault(i, []).append(result)
    items: list[Item] = []
    for i, event in enumerate(events):
        role = event.role
        if role is system_role:
            continue
        if orphans and i in orphans:
            items.append(Orphans(tuple(orphans[i])))
        if role is assistant_role:
            items.append(event)
            if event.tool_calls:
                items.append(Answers(_answers(i, event.tool_calls, paired)))
        elif event.text or event.parts:
            items.append(event)
    return Conversation(system, tuple(items))


def messages(
    shaped: Conversation,
    names: tuple[str, str, str],
    fragments: Fragments,
    assistant: Callable[[Event], list[Block]],
    user: Callable[[Event], list[Block]],
    answer: Callable[[Answer], list[Block]],
    orphan: Callable[[ToolResult], list[Block]],
) -> list[Message]:
    """One ``(role, chunks)`` per item, built by the provider's functions; empty ones left out.

    ``names`` is the provider's (format's) name, then what it calls the
    assistant and the user; answers and orphan results are said by the user.
    Chunks are kept in ``fragments`` under the format's name: an event's by
    the event, an answer's by its result (or its call).
    """
    tag, by_assistant, by_user = names
    assistant_role = Role.ASSISTANT  # read once: this runs per read
    out: list[Message] = []
    said_by_assistant, said_by_user, orphaned = tag + ":a", tag + ":u", tag + ":o"
    for item in shaped.items:
        if isinstance(item, Event):  # the common case, kept short
            if item.role is assistant_role:
                said = fragments.chunk(item, said_by_assistant, assistant, item)
                if said.blocks:
                    out.append((by_assistant, [said]))
            else:
                said = fragments.chunk(item, said_by_user, user, item)
                if said.blocks:
                    out.append((by_user, [said]))
            continue
        if isinstance(item, Answers):
            role = by_user
            chunks = [
                fragments.chunk(a.result or a.call, f"{tag}:r:{a.call.id}:{a.call.name}", answer, a)
                for a in item.answers
            ]
        else:
            role = by_user
            chunks = [fragments.chunk(r, orphaned, orphan, r) for r in item.results]
        chunks = [c for c in chunks if c.blocks]
        if chunks:
            out.append((role, chunks))
    return out


def _answers(
    i: int, calls: Sequence[ToolCall], paired: dict[tuple[int, int], ToolResult]
) -> tuple[Answer, ...]:
    out = []
    for j, call in enumerate(calls):
        result = paired.get((i, j))
        if result is None:
            out.append(Answer(call, NO_RESULT, True, None))
        else:
            out.append(Answer(call, result.content, result.is_error, result))
    return tuple(out)
