"""Anthropic Messages: system and messages, as the anthropic SDK's request types read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.model import Event
from sidecar.providers.conversation import LEADING_USER_TEXT, NO_RESULT
from sidecar.providers.render import ContextFormat, render
from sidecar.providers.wire import JsonObject
from tests.providers import sdk
from tests.providers.builders import PNG, REMOTE_PDF, a, call, result, s, t, thought, u


def rendered(events: Sequence[Event]) -> JsonObject:
    return render(events, ContextFormat.ANTHROPIC)


def messages(body: JsonObject) -> list[Any]:
    sdk.anthropic(body)
    value = body["messages"]
    assert isinstance(value, list)
    return value


def test_system_is_the_latest_system_text() -> None:
    body = rendered([s("old"), u(), s("new")])
    assert body["system"] == "new"
    assert messages(body) == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_thinking_and_redacted_thinking_come_first_with_their_signatures_as_strings() -> None:
    blocks = [thought("step 1", b"EqQBCkYI"), thought(signature=b"EmwKAhgB", redacted=True)]
    body = rendered([u(), a("done", reasoning=blocks, calls=[call("c1")]), t(result("c1"))])
    assert messages(body)[1]["content"] == [
        {"type": "thinking", "thinking": "step 1", "signature": "EqQBCkYI"},
        {"type": "redacted_thinking", "data": "EmwKAhgB"},
        {"type": "text", "text": "done"},
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": 1}},
    ]


def test_thinking_without_a_signature_or_text_or_with_a_binary_one_is_dropped() -> None:
    blocks = [thought("unsigned"), thought(signature=b"cleared"), thought("x", b"\xff")]
    body = rendered([u(), a("ok", reasoning=blocks)])
    assert messages(body)[1]["content"] == [{"type": "text", "text": "ok"}]


def test_tool_results_open_the_next_user_message_even_when_logged_after_user_text() -> None:
    events = [u(), a(calls=[call("c1")]), u("still there?"), t(result("c1", "found", error=True))]
    assert messages(rendered(events))[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "found", "is_error": True},
            {"type": "text", "text": "still there?"},
        ],
    }


def test_an_unanswered_call_gets_the_placeholder_as_an_error_result() -> None:
    last = messages(rendered([u(), a(calls=[call("c1")])]))[-1]
    assert last["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": NO_RESULT, "is_error": True}
    ]


def test_the_first_message_is_the_users_and_roles_alternate() -> None:
    events = [a("hello"), a("again", reasoning=[thought("t", b"sig")]), u("a"), u("b")]
    out = messages(rendered(events))
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[0]["content"] == [{"type": "text", "text": LEADING_USER_TEXT}]
    assert [b["type"] for b in out[1]["content"]] == ["thinking", "text", "text"]


def test_user_images_and_pdfs_are_base64_or_url_sources() -> None:
    (message,) = messages(rendered([u("see", parts=[PNG, REMOTE_PDF])]))
    assert message["content"][1:] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "document", "source": {"type": "url", "url": REMOTE_PDF.uri}},
    ]
