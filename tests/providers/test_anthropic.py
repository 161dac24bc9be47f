"""Anthropic Messages: system and messages, as the anthropic SDK's request types read them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.tokens import count_event
from sidecar.model import Event
from sidecar.providers.conversation import LEADING_USER_TEXT, NO_RESULT
from sidecar.providers.render import ContextFormat, render
from sidecar.providers.wire import JsonObject
from sidecar.tokenizer import default_estimator
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


def test_thinking_without_a_signature_with_a_binary_one_or_another_providers_is_dropped() -> None:
    blocks = [thought("unsigned"), thought("x", b"\xff"), thought("y", b"gAAAA", id="rs_1")]
    body = rendered([u(), a("ok", reasoning=blocks)])
    assert messages(body)[1]["content"] == [{"type": "text", "text": "ok"}]


def test_a_signed_block_whose_text_the_provider_omitted_goes_back_on_a_tool_use_turn() -> None:
    # display: "omitted" -- the API's thinking is empty, the signature carries it
    omitted = thought(signature=b"EqQBCkYIBxgC")
    events = [u(), a(reasoning=[omitted], calls=[call("c1")]), t(result("c1"))]
    assert messages(rendered(events))[1]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgC"},
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": 1}},
    ]


def test_only_the_thinking_our_clearing_emptied_is_left_out() -> None:
    old = a(reasoning=[thought("long reasoning", b"EqOld")], calls=[call("c1")])
    omitted = a(reasoning=[thought(signature=b"EqOmitted")], calls=[call("c2")])
    window = [u("one"), old, t(result("c1")), u("two"), omitted, t(result("c2"))]
    window = [e.evolve(token_count=count_event(e, default_estimator())) for e in window]
    plan = ClearToolResults(keep_tool_uses=5, keep_reasoning_turns=1).plan(window)
    clears = {e.id: e for e in plan.clears}
    assert set(clears) == {old.id}
    out = messages(rendered([clears.get(e.id, e) for e in window]))
    thinking = [b for m in out for b in m["content"] if b["type"] == "thinking"]
    assert thinking == [{"type": "thinking", "thinking": "", "signature": "EqOmitted"}]


def test_whitespace_only_text_is_never_a_text_block() -> None:
    events = [
        u("  \n"),
        a("\n\n", calls=[call("c1")]),
        t(result("c1", " \t ")),
        u("\u00a0"),
        a(" ", reasoning=[thought("t", b"sig")]),
        u("go on"),
    ]
    out = messages(rendered(events))
    blocks = [b for m in out for b in m["content"]]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    assert texts
    assert all(text.strip() for text in texts)
    assert all(str(b.get("content", "x")).strip() for b in blocks if b["type"] == "tool_result")


def test_tool_ids_the_api_refuses_are_mapped_the_same_way_on_the_call_and_its_result() -> None:
    ids = ["functions.get_weather:0", "functions.get_weather:1", "a.b", "a:b", "", "call_ok-1"]
    events = [u(), a(calls=[call(i) for i in ids]), t(*(result(i) for i in ids))]
    first, again = messages(rendered(events)), messages(rendered(list(events)))
    assert first == again
    uses = [b["id"] for b in first[1]["content"] if b["type"] == "tool_use"]
    answers = [b["tool_use_id"] for b in first[2]["content"]]
    assert uses == answers
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses)
    assert len(set(uses)) == len(ids)
    assert uses[-1] == "call_ok-1"  # an id the API takes is sent as it is


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
