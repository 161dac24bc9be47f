"""Reasoning on LangChain messages: into the event's fields, and back through the store unchanged.

Providers refuse a tool loop whose reasoning comes back altered (Anthropic's
thinking signatures, OpenAI's encrypted reasoning, Gemini's thought
signatures); each shape their LangChain integrations produce must survive
the service's log block for block, and be in the fields the service counts,
summarizes and renders.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from sidecar.adapters.langchain import (
    SessionCompactionMiddleware,
    clear_tool_uses_policy,
    cleared_message,
    event_to_message,
    message_to_event,
)
from sidecar.adapters.langchain_reasoning import META_CONTENT, META_SHAPE
from sidecar.client import Client
from sidecar.engine.validation import MAX_AUTHOR_CHARS
from sidecar.model import Event, Reasoning, Role
from sidecar.providers.render import ContextFormat, render
from sidecar.providers.wire import PROVIDER_KEY
from tests.adapters.chat_models import RecordingModel

GEMINI_SIG = b"\x12\x00gemini\xff"
CALL = {"id": "toolu_1", "name": "get_weather", "args": {"city": "Oslo"}, "type": "tool_call"}

ANTHROPIC = AIMessage(
    content=[
        {"type": "thinking", "thinking": "Oslo first.", "signature": "EqQBCkYIARgCKkA="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    tool_calls=[CALL],
    response_metadata={"model_provider": "anthropic"},
    id="ai-anthropic",
)
STANDARD = AIMessage(
    content=[
        {"type": "reasoning", "reasoning": "Oslo first.", "extras": {"signature": "EqQBCkYI"}},
        {"type": "text", "text": "Sunny."},
    ],
    response_metadata={"model_provider": "anthropic"},
    id="ai-standard",
)
RESPONSES = AIMessage(
    content=[
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Look it up."}],
            "encrypted_content": "gAAAAB-opaque",
        },
        {"type": "text", "text": "Sunny.", "annotations": [], "id": "msg_1"},
    ],
    response_metadata={"model_provider": "openai"},
    id="ai-responses",
)
OPENAI_V03 = AIMessage(
    content="",
    additional_kwargs={
        "reasoning": {
            "id": "rs_2",
            "type": "reasoning",
            "summary": [],
            "encrypted_content": "gAAAAB-v03",
        }
    },
    tool_calls=[{**CALL, "id": "call_1"}],
    response_metadata={"model_provider": "openai"},
    id="ai-openai-v03",
)
GEMINI = AIMessage(
    content=[
        {"type": "thinking", "thinking": "Oslo.", "signature": base64.b64encode(b"th").decode()},
        {"type": "text", "text": "Checking."},
    ],
    additional_kwargs={
        "__gemini_function_call_thought_signatures__": {
            "fc-1": base64.b64encode(GEMINI_SIG).decode()
        }
    },
    tool_calls=[{**CALL, "id": "fc-1"}],
    response_metadata={"model_provider": "google_genai"},
    id="ai-gemini",
)
SHAPES = [ANTHROPIC, STANDARD, RESPONSES, OPENAI_V03, GEMINI]


def same_message(back: AIMessage, message: AIMessage) -> None:
    assert back.content == message.content
    assert back.additional_kwargs == message.additional_kwargs
    assert [(c["id"], c["name"], c["args"]) for c in back.tool_calls] == [
        (c["id"], c["name"], c["args"]) for c in message.tool_calls
    ]


def through_the_store(address: str, key: str, event: Event) -> Event:
    """``event`` appended to a new session ``key`` at ``address``, as its window gives it back."""
    with Client(address) as client:
        client.create_session(key, None, {})
        client.session(key).append([event])
        (stored,) = client.session(key).context().events
    return stored


def test_each_shape_lands_in_the_fields() -> None:
    def fields(message: AIMessage) -> tuple[Reasoning, ...]:
        event = message_to_event(message)
        assert event is not None
        return event.reasoning

    assert fields(ANTHROPIC) == (
        Reasoning("Oslo first.", b"EqQBCkYIARgCKkA="),
        Reasoning("", b"EmwKAhgBEgy3va3pzix/LafPsn4a", redacted=True),
    )
    assert fields(STANDARD) == (Reasoning("Oslo first.", b"EqQBCkYI"),)
    assert fields(RESPONSES) == (Reasoning("Look it up.", b"gAAAAB-opaque", id="rs_1"),)
    assert fields(OPENAI_V03) == (Reasoning("", b"gAAAAB-v03", id="rs_2"),)
    # Gemini's signatures are its bytes, not LangChain's base64 of them.
    assert fields(GEMINI) == (Reasoning("Oslo.", b"th"),)
    gemini = message_to_event(GEMINI)
    assert gemini is not None
    assert [c.signature for c in gemini.tool_calls] == [GEMINI_SIG]


@pytest.mark.parametrize("message", SHAPES, ids=lambda m: str(m.id))
def test_a_message_comes_back_from_the_store_unchanged(
    sidecar_address: str, message: AIMessage
) -> None:
    event = message_to_event(message)
    assert event is not None
    stored = through_the_store(sidecar_address, f"lc-reasoning/{message.id}", event)
    assert stored.reasoning == event.reasoning
    assert stored.tool_calls == event.tool_calls
    back = event_to_message(stored)
    assert isinstance(back, AIMessage)
    same_message(back, message)


def test_a_name_and_a_reasoning_id_past_the_services_bounds_are_stored_and_come_back(
    sidecar_address: str,
) -> None:
    """LangChain bounds neither a message's name nor a block's id: the name is stored
    fitted, an id no provider gives (OpenAI's are some 50 characters) is left out, and the
    message comes back whole from its verbatim content."""
    message = AIMessage(
        content=[
            {
                "type": "reasoning",
                "id": "rs_" + "x" * 300,
                "summary": [{"type": "summary_text", "text": "Look it up."}],
                "encrypted_content": "gAAAAB-opaque",
            },
            {"type": "text", "text": "Sunny."},
        ],
        name="n" * 300,
        response_metadata={"model_provider": "openai"},
        id="ai-long-names",
    )
    event = message_to_event(message)
    assert event is not None
    assert len(event.author) <= MAX_AUTHOR_CHARS
    assert [r.id for r in event.reasoning] == [""]
    stored = through_the_store(sidecar_address, "lc-reasoning/long-names", event)
    back = event_to_message(stored)
    assert isinstance(back, AIMessage)
    same_message(back, message)


def cleared_reasoning(message: AIMessage) -> Event:
    """The message's event as ``keep_reasoning_turns`` leaves it: texts gone, signatures kept."""
    event = message_to_event(message)
    assert event is not None
    blocks = tuple(Reasoning("", r.signature, r.redacted, r.id) for r in event.reasoning)
    return event.evolve(reasoning=blocks, cleared=True)


def test_cleared_reasoning_text_is_shown_cleared_with_every_signature_in_place() -> None:
    shown = cleared_message(ANTHROPIC, cleared_reasoning(ANTHROPIC))
    assert isinstance(shown, AIMessage)
    content: Any = ANTHROPIC.content
    assert shown.content == [{**content[0], "thinking": ""}, *content[1:]]
    assert ANTHROPIC.content[0] == content[0]  # the state's message keeps the original
    responses = event_to_message(cleared_reasoning(RESPONSES))
    assert isinstance(responses, AIMessage)
    assert isinstance(responses.content, list)
    assert responses.content[0] == {**RESPONSES.content[0], "summary": []}  # type: ignore[dict-item]
    assert responses.content[1:] == RESPONSES.content[1:]


def test_an_event_no_clearing_touched_gives_its_message_back_exactly() -> None:
    for message in SHAPES:
        event = message_to_event(message)
        assert event is not None
        shown = cleared_message(message, event.evolve(cleared=True))
        assert isinstance(shown, AIMessage)
        same_message(shown, message)
        assert json.dumps(shown.content) == json.dumps(message.content)  # order kept too


# -- a real agent ---------------------------------------------------------------------------

NOTES = "Compare with the last three days and the regional forecast. " * 8


@tool
def get_weather(city: str, notes: str) -> str:
    """Returns today's weather report for a city."""
    return f"{city}: sunny, 21 C, light wind from the west. " * 8


class ThinkingModel(RecordingModel):
    """Claude-like: every reply opens with a signed thinking block; records what it is sent."""

    replies: list[AIMessage] = Field(default_factory=list)

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        self.seen.append(list(messages))
        n = len(self.replies)
        thinking = {"type": "thinking", "thinking": f"Step {n}.", "signature": f"sig-{n}=="}
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content=[thinking, {"type": "text", "text": "Sunny."}])
        else:
            city = str(messages[-1].content).rsplit(" ", 1)[-1]
            args = {"city": city, "notes": NOTES}
            use = {"type": "tool_use", "id": f"toolu_{n}", "name": "get_weather", "input": args}
            call = {"id": f"toolu_{n}", "name": "get_weather", "args": args}
            reply = AIMessage(content=[thinking, use], tool_calls=[call])
        reply.response_metadata = {"model_provider": "anthropic"}
        self.replies.append(reply.model_copy(deep=True))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def converse(sidecar_address: str, session_id: str, **policy: Any) -> ThinkingModel:
    """Three weather questions to an agent on the middleware with a clearing policy."""
    model = ThinkingModel()
    with Client(sidecar_address) as client:
        cleared = clear_tool_uses_policy(trigger=600, keep=1, clear_tool_inputs=True, **policy)
        middleware = SessionCompactionMiddleware(client, policy=cleared, session_id=session_id)
        agent = create_agent(
            model, [get_weather], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": session_id}}
        for city in ["Oslo", "Lima", "Perth"]:
            agent.invoke({"messages": [HumanMessage(content=f"Weather in {city}")]}, config)
    assert len(model.seen) == 6
    return model


def test_an_agent_gets_every_thinking_block_back_unchanged_across_a_clearing(
    sidecar_address: str,
) -> None:
    model = converse(sidecar_address, "thinking")
    cleared = 0
    for k, messages in enumerate(model.seen):
        sent = [m for m in messages if isinstance(m, AIMessage)]
        # Each earlier reply's content comes back block for block, signatures byte for byte.
        assert [m.content for m in sent] == [r.content for r in model.replies[:k]]
        cleared += sum(c["args"] == {"cleared": True} for m in sent for c in m.tool_calls)
    assert cleared > 0  # a clearing landed in between


def test_older_turns_thinking_is_sent_cleared_with_its_signature(sidecar_address: str) -> None:
    model = converse(sidecar_address, "thinking-cleared", keep_reasoning_turns=1)
    last = [m for m in model.seen[-1] if isinstance(m, AIMessage)]
    blocks = [b for m in last for b in m.content if isinstance(b, dict) and b["type"] == "thinking"]
    # Turns 1 and 2 (replies 0-3) cleared, the turn in progress (reply 4) kept; every
    # signature as the model gave it.
    assert [b["thinking"] for b in blocks] == ["", "", "", "", "Step 4."]
    assert [b["signature"] for b in blocks] == [f"sig-{n}==" for n in range(5)]


MIXED = AIMessage(
    content=[
        "Plain string block. ",
        {"type": "text", "text": "A text block with its own keys.", "annotations": [], "id": "m1"},
        {"type": "tool_use", "id": "call_9", "name": "lookup", "input": {"q": "x"}},
        {"type": "text", "text": ""},
        {"type": "text"},  # no text at all: joins as nothing
        {"type": "text", "text": " Last, with ünïcode ✓ and\x00a NUL."},
    ],
    id="ai-mixed",
)


@pytest.mark.parametrize("message", [*SHAPES, MIXED], ids=lambda m: str(m.id))
def test_a_list_contents_text_is_stored_once_and_comes_back_in_its_blocks(
    sidecar_address: str, message: AIMessage
) -> None:
    event = message_to_event(message)
    assert event is not None
    stored_metadata = json.dumps(event.metadata, ensure_ascii=False)
    for block in message.content if isinstance(message.content, list) else ():
        text = block if isinstance(block, str) else block.get("text")
        if (isinstance(block, str) or block.get("type") == "text") and text:
            assert text not in stored_metadata  # only in the event's text
    stored = through_the_store(sidecar_address, f"lc-shape/{message.id}", event)
    back = event_to_message(stored)
    assert isinstance(back, AIMessage)
    same_message(back, message)


def test_a_text_block_whose_text_is_not_a_string_is_kept_verbatim() -> None:
    odd = AIMessage(content=[{"type": "text", "text": ["not", "a", "string"]}], id="ai-odd")
    event = message_to_event(odd)
    assert event is not None
    assert META_CONTENT in event.metadata
    back = event_to_message(event)
    assert back.content == odd.content


def test_an_event_stored_with_the_verbatim_content_still_comes_back() -> None:
    """Events written before the content's shape was stored carry it verbatim."""
    event = message_to_event(MIXED)
    assert event is not None
    verbatim = {
        **{k: v for k, v in event.metadata.items() if k != META_SHAPE},
        META_CONTENT: json.dumps(MIXED.content, ensure_ascii=False),
    }
    back = event_to_message(event.evolve(metadata=verbatim))
    assert back.content == MIXED.content


def test_a_text_that_no_longer_adds_up_comes_back_as_the_text() -> None:
    event = message_to_event(MIXED)
    assert event is not None
    back = event_to_message(event.evolve(text="changed"))
    assert back.content == "changed"


def _items(window: list[Event], fmt: ContextFormat, key: str) -> list[Any]:
    value = render(window, fmt)[key]
    assert isinstance(value, list)
    return value


@pytest.mark.parametrize(
    ("message", "provider"),
    [(ANTHROPIC, "anthropic"), (STANDARD, "anthropic"), (RESPONSES, "openai"), (GEMINI, "gemini")],
    ids=lambda m: str(getattr(m, "id", m)),
)
def test_reasoning_goes_back_to_the_provider_that_wrote_it_only(
    message: AIMessage, provider: str
) -> None:
    event = message_to_event(message)
    assert event is not None
    assert event.metadata[PROVIDER_KEY] == provider
    window = [Event("u", Role.USER, "weather?"), event]
    signed = {
        ContextFormat.ANTHROPIC: any(
            b["type"] in ("thinking", "redacted_thinking")
            for m in _items(window, ContextFormat.ANTHROPIC, "messages")
            for b in m["content"]
        ),
        ContextFormat.GEMINI: any(
            p.get("thought")
            for c in _items(window, ContextFormat.GEMINI, "contents")
            for p in c["parts"]
        ),
        ContextFormat.OPENAI_RESPONSES: any(
            i["type"] == "reasoning"
            for i in _items(window, ContextFormat.OPENAI_RESPONSES, "input")
        ),
    }
    wrote = {
        "anthropic": ContextFormat.ANTHROPIC,
        "gemini": ContextFormat.GEMINI,
        "openai": ContextFormat.OPENAI_RESPONSES,
    }[provider]
    assert signed == {fmt: fmt is wrote for fmt in signed}
