"""OpenAI Chat Completions: messages, as the openai SDK's request types read them."""

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
    return render(events, ContextFormat.OPENAI_CHAT)


def messages(body: JsonObject) -> list[Any]:
    sdk.openai_chat(body)
    value = body["messages"]
    assert isinstance(value, list)
    return value


def test_the_latest_system_text_is_the_first_message() -> None:
    out = messages(rendered([s("old"), u(), s("new")]))
    assert out == [{"role": "system", "content": "new"}, {"role": "user", "content": "hi"}]


def test_calls_are_tool_calls_answered_by_tool_messages_right_after() -> None:
    events = [u(), a("checking", calls=[call("c1", args='{"q":2}')]), u("well?"), t(result("c1"))]
    assert messages(rendered(events))[1:] == [
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "user", "content": "well?"},
    ]


def test_reasoning_is_dropped() -> None:
    events = [u(), a("ok", reasoning=[thought("hmm", b"sig", id="rs_1")])]
    assert messages(rendered(events))[1] == {"role": "assistant", "content": "ok"}


def test_an_assistant_event_with_reasoning_only_is_left_out() -> None:
    assert messages(rendered([u(), a(reasoning=[thought("hmm")])])) == [
        {"role": "user", "content": "hi"}
    ]


def test_an_unanswered_call_gets_the_placeholder_result() -> None:
    out = messages(rendered([u(), a(calls=[call("c1")])]))
    assert out[-1] == {"role": "tool", "tool_call_id": "c1", "content": NO_RESULT}


def test_an_orphan_result_is_user_text_that_says_so() -> None:
    out = messages(rendered([u(), t(result("gone", "42"))]))
    assert out[-1]["role"] == "user"
    assert "gone" in str(out[-1]["content"])
    assert str(out[-1]["content"]).endswith("42")


def test_user_parts_are_images_audio_and_files_and_assistant_parts_placeholders() -> None:
    wav = Part("audio/wav", data=b"RIFF")
    events = [u("look", parts=[PNG, wav, Part("application/pdf", data=b"%PDF"), REMOTE_PDF])]
    events.append(a("drawn", parts=[PNG]))
    user, assistant = messages(rendered(events))
    kinds = [p["type"] for p in user["content"]]
    assert kinds == ["text", "image_url", "input_audio", "file", "text"]
    assert user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert assistant == {"role": "assistant", "content": "drawn [image/png content]"}


def test_only_pdf_is_a_file_part_other_files_are_their_placeholder_and_images_stay() -> None:
    others = [
        Part("text/plain", data=b"notes"),
        Part("text/csv", data=b"a,b"),
        Part("application/zip", data=b"PK"),
        Part("video/mp4", data=b"\x00"),
        Part("audio/ogg", data=b"OggS"),
    ]
    pdf = Part("application/pdf; charset=binary", data=b"%PDF")
    (user,) = messages(rendered([u("look", parts=[*others, pdf, PNG])]))
    content = user["content"]
    files = [p for p in content if p["type"] == "file"]
    assert [f["file"]["file_data"].split(";")[0] for f in files] == ["data:application/pdf"]
    texts = [p["text"] for p in content if p["type"] == "text"]
    assert texts == ["look", *(f"[{p.mime_type} content]" for p in others)]
    assert [p["type"] for p in content][-1] == "image_url"
