"""OpenAI Responses: instructions and input items, as the openai SDK's request types read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.model import Event, Part
from sidecar.providers.conversation import NO_RESULT
from sidecar.providers.render import ContextFormat, render
from sidecar.providers.wire import JsonObject
from tests.providers import sdk
from tests.providers.builders import PNG, REMOTE_PDF, a, call, result, s, t, thought, u


def rendered(events: Sequence[Event]) -> JsonObject:
    return render(events, ContextFormat.OPENAI_RESPONSES)


def items(body: JsonObject) -> list[Any]:
    sdk.openai_responses(body)
    value = body["input"]
    assert isinstance(value, list)
    return value


def test_the_system_text_is_the_instructions() -> None:
    body = rendered([s(), u()])
    assert body["instructions"] == "be nice"
    assert items(body) == [{"type": "message", "role": "user", "content": "hi"}]


def test_reasoning_is_an_item_with_its_id_summary_and_encrypted_content_string() -> None:
    events = [u(), a(calls=[call("c1")], reasoning=[thought("plan", b"gAAAA==", id="rs_1")])]
    events.append(t(result("c1")))
    assert items(rendered(events))[1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "encrypted_content": "gAAAA==",
        },
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]


def test_reasoning_without_an_id_redacted_or_not_utf8_is_dropped() -> None:
    blocks = [thought("a"), thought(signature=b"x", redacted=True, id="rs_2")]
    blocks.append(thought("c", b"\xff\xfe", id="rs_3"))
    body = rendered([u(), a("ok", reasoning=blocks)])
    assert [i["type"] for i in items(body)] == ["message", "message"]


def test_reasoning_that_no_assistant_item_follows_is_dropped() -> None:
    events = [u(), a(reasoning=[thought("stray", id="rs_1")]), u("next")]
    assert [i.get("role") for i in items(rendered(events))] == ["user", "user"]


def test_reasoning_logged_apart_from_its_answer_stays_before_it() -> None:
    events = [u(), a(reasoning=[thought("think", id="rs_1")]), a("answer")]
    kinds = [i["type"] for i in items(rendered(events))]
    assert kinds == ["message", "reasoning", "message"]


def test_outputs_follow_their_calls_and_an_unanswered_call_gets_the_placeholder() -> None:
    events = [u(), a(calls=[call("c1"), call("c2")]), u("and?"), t(result("c2", "two"))]
    out = items(rendered(events))
    assert [(i["type"], i.get("call_id")) for i in out[1:5]] == [
        ("function_call", "c1"),
        ("function_call", "c2"),
        ("function_call_output", "c1"),
        ("function_call_output", "c2"),
    ]
    assert out[3]["output"] == NO_RESULT
    assert out[4]["output"] == "two"


def test_user_parts_are_input_images_and_files() -> None:
    (message,) = items(rendered([u("see", parts=[PNG, REMOTE_PDF])]))
    assert message["content"] == [
        {"type": "input_text", "text": "see"},
        {
            "type": "input_image",
            "detail": "auto",
            "image_url": "data:image/png;base64,iVBORw0KGgo=",
        },
        {"type": "input_file", "file_url": REMOTE_PDF.uri},
    ]


def test_input_file_takes_documents_text_and_spreadsheets_not_audio_or_video() -> None:
    taken = [
        Part("application/pdf", data=b"%PDF"),
        Part("text/plain", data=b"notes"),
        Part("text/csv", data=b"a,b"),
        Part("application/vnd.openxmlformats-officedocument.wordprocessingml.document", data=b"PK"),
        Part("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", data=b"PK"),
        Part("application/json", uri="https://example.com/data.json"),
    ]
    refused = [
        Part("audio/wav", data=b"RIFF"),
        Part("video/mp4", uri="https://example.com/clip.mp4"),
        Part("application/zip", data=b"PK"),
        Part("image/tiff", data=b"II*"),
    ]
    (message,) = items(rendered([u("see", parts=[*taken, *refused, PNG])]))
    content = message["content"]
    assert [p["type"] for p in content] == [
        "input_text",
        *(["input_file"] * len(taken)),
        *(["input_text"] * len(refused)),
        "input_image",
    ]
    texts = [p["text"] for p in content[1 + len(taken) : -1]]
    assert texts == [
        "[audio/wav content]",
        "[video/mp4 content] https://example.com/clip.mp4",
        "[application/zip content]",
        "[image/tiff content]",
    ]
