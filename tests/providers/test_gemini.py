"""Gemini generateContent: systemInstruction and contents, as google-genai parses them."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from sidecar.model import Event
from sidecar.providers.conversation import LEADING_USER_TEXT, NO_RESULT
from sidecar.providers.render import ContextFormat, render
from sidecar.providers.wire import JsonObject
from tests.providers import sdk
from tests.providers.builders import (
    PNG,
    REMOTE_PDF,
    a,
    call,
    result,
    s,
    summary_pair,
    t,
    thought,
    u,
)


def rendered(events: Sequence[Event]) -> JsonObject:
    return render(events, ContextFormat.GEMINI)


def contents(body: JsonObject) -> list[Any]:
    value = body["contents"]
    assert isinstance(value, list)
    return value


def parsed_parts(body: JsonObject) -> list[list[Any]]:
    """The parts of each content as google-genai parsed them."""
    _, parsed = sdk.gemini(body)
    return [list(c.parts or []) for c in parsed]


def test_system_text_is_the_system_instruction_and_roles_are_user_and_model() -> None:
    body = rendered([s("old rules"), u("hi"), a("hello"), s("new rules")])
    config, parsed = sdk.gemini(body)
    assert config.system_instruction is not None
    assert [c.role for c in parsed] == ["user", "model"]
    assert body["systemInstruction"] == {"parts": [{"text": "new rules"}]}


def test_a_call_carries_its_signature_as_the_function_call_parts_thought_signature() -> None:
    body = rendered([u(), a(calls=[call("c1", signature=b"\x00\xffsig")]), t(result("c1"))])
    part = parsed_parts(body)[1][0]
    assert part.function_call is not None
    assert part.function_call.id == "c1"
    assert part.thought_signature == b"\x00\xffsig"


def test_reasoning_text_is_a_thought_part_with_its_signature() -> None:
    body = rendered([u(), a("answer", reasoning=[thought("let me see", b"sig1")])])
    thought_part, text_part = parsed_parts(body)[1]
    assert (thought_part.text, thought_part.thought) == ("let me see", True)
    assert thought_part.thought_signature == b"sig1"
    assert text_part.text == "answer"
    assert not text_part.thought


def test_a_signature_without_reasoning_text_goes_on_the_events_text_part() -> None:
    body = rendered([u(), a("answer", reasoning=[thought(signature=b"turn-sig")])])
    assert contents(body)[1]["parts"] == [
        {"text": "answer", "thoughtSignature": base64.b64encode(b"turn-sig").decode()}
    ]


def test_a_signature_without_any_text_goes_on_a_text_less_part() -> None:
    body = rendered([u(), a(reasoning=[thought(signature=b"only")])])
    (part,) = parsed_parts(body)[1]
    assert part.text == ""
    assert part.thought_signature == b"only"


def test_the_last_text_less_signature_is_the_text_parts_and_a_cleared_thought_keeps_its_place() -> (
    None
):
    # A thought whose text a clearing took, a signed thought, then the turn's text signature:
    # the same parts the ADK adapter builds from these fields (adk_content.content_of).
    reasoning = [
        thought(signature=b"cleared"),
        thought("next", b"kept"),
        thought(signature=b"turn"),
    ]
    body = rendered([u(), a("answer", reasoning=reasoning)])

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    assert contents(body)[1]["parts"] == [
        {"text": "", "thoughtSignature": b64(b"cleared")},
        {"text": "next", "thought": True, "thoughtSignature": b64(b"kept")},
        {"text": "answer", "thoughtSignature": b64(b"turn")},
    ]


def test_redacted_reasoning_is_not_sent_to_gemini() -> None:
    body = rendered([u(), a("ok", reasoning=[thought(signature=b"x", redacted=True)])])
    assert contents(body)[1]["parts"] == [{"text": "ok"}]


def test_function_responses_follow_in_a_user_content_even_when_logged_later() -> None:
    events = [
        u("look"),
        a(calls=[call("c1"), call("c2")]),
        u("hurry"),
        t(result("c2"), result("c1")),
    ]
    _, parsed = sdk.gemini(rendered(events))
    assert [c.role for c in parsed] == ["user", "model", "user", "user"]
    responses, (text,) = parsed_parts(rendered(events))[2:]
    assert [p.function_response.id for p in responses] == ["c1", "c2"]
    assert text.text == "hurry"


def test_a_json_object_result_is_the_response_itself_and_text_is_wrapped() -> None:
    events = [
        u(),
        a(calls=[call("c1"), call("c2"), call("c3")]),
        t(result("c1", '{"rows": 3}'), result("c2", "plain"), result("c3", "boom", error=True)),
    ]
    responses = [p["functionResponse"] for p in contents(rendered(events))[2]["parts"]]
    assert [r["response"] for r in responses] == [
        {"rows": 3},
        {"result": "plain"},
        {"error": "boom"},
    ]


def test_an_unanswered_call_gets_the_placeholder_as_an_error_response() -> None:
    body = rendered([u(), a(calls=[call("c1")])])
    (part,) = contents(body)[2]["parts"]
    assert part["functionResponse"]["response"] == {"error": NO_RESULT}


def test_contents_of_one_role_in_a_row_merge_and_the_user_opens() -> None:
    body = rendered([a("hello"), a("again"), u("one"), u("two")])
    sdk.gemini(body)
    assert contents(body) == [
        {"role": "user", "parts": [{"text": LEADING_USER_TEXT}]},
        {"role": "model", "parts": [{"text": "hello"}, {"text": "again"}]},
        {"role": "user", "parts": [{"text": "one"}, {"text": "two"}]},
    ]


def test_parts_are_inline_data_in_base64_or_file_data_by_uri() -> None:
    body = rendered([u("see", parts=[PNG, REMOTE_PDF])])
    _, inline, file = parsed_parts(body)[0]
    assert inline.inline_data.data == PNG.data
    assert inline.inline_data.mime_type == "image/png"
    assert file.file_data.file_uri == REMOTE_PDF.uri


def test_the_summary_turn_is_a_user_then_model_content() -> None:
    body = rendered([*summary_pair("we fixed the pool"), u("next?")])
    assert [c["role"] for c in contents(body)] == ["user", "model", "user"]
    assert contents(body)[1]["parts"] == [{"text": "we fixed the pool"}]
