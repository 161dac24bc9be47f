"""Every rendering of any window keeps its provider's rules (hypothesis).

Random windows hold what an agent may append: system messages anywhere, a
summary turn, text and media, reasoning blocks with and without text, ids
and signatures (binary or UTF-8), parallel calls, results logged late, in
one event or several, calls never answered, results answering nothing or
answering twice. Each rendering must parse as its SDK's request types and:
system first; every call answered exactly once, right after its call (the
next user message's first blocks at Anthropic, the next user content's
first parts at Gemini, the next messages or items at OpenAI); no result
without its call; Gemini's and Anthropic's roles alternating, user first;
and every signature the format takes back coming back byte for byte.
Beyond the SDK types, what the APIs themselves check: every rendering is
strict JSON (results hold NaN, 1e999, lone surrogates, deep nesting);
Gemini's function responses stand in contents of their own and every step
of its current turn opens with a signed call; Anthropic's text blocks are
never whitespace alone and its tool ids match its pattern; OpenAI's file
parts are files it reads.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult
from sidecar.providers.fragments import Fragments
from sidecar.providers.gemini import SKIP_SIGNATURE
from sidecar.providers.render import ContextFormat, render_json
from sidecar.providers.wire import JsonObject, origin, utf8
from tests.providers import sdk

_texts = st.text(alphabet="abc xyz-é{}\n", max_size=8)
_signatures = st.one_of(st.binary(max_size=6), _texts.map(str.encode))
_reasoning = st.builds(
    Reasoning,
    text=_texts,
    signature=_signatures,
    redacted=st.booleans(),
    id=st.sampled_from(["", "rs_1", "rs_2"]),
)
_parts = st.lists(
    st.sampled_from(
        [
            Part("image/png", data=b"png"),
            Part("image/jpeg", uri="https://x/y.jpg"),
            Part("application/pdf", data=b"%PDF"),
            Part("audio/wav", data=b"RIFF"),
            Part("text/plain", data=b"notes"),
            Part("application/zip", uri="gs://b/z.zip"),
            Part("video/mp4", data=b"\x00"),
            Part("text/csv", uri="https://x/t.csv"),
        ]
    ),
    max_size=2,
)


_contents = st.sampled_from(
    ["ok", '{"v":1}', "", "[]", " \n", '{"s":"\\ud83d"}', '{"a":NaN}', '{"a":1e999}',
     "[" * 400 + "]" * 400, '{"e":1}']
)  # fmt: skip


@st.composite
def windows(draw: st.DrawFn) -> list[Event]:
    """A window of up to ~16 events in log order, as an agent may have appended it."""
    events: list[Event] = []
    calls: list[str] = []
    if draw(st.booleans()):
        events.append(Event("su", Role.USER, "Summarize", synthetic=True))
        events.append(Event("sa", Role.ASSISTANT, draw(_texts), synthetic=True))
    call_ids = st.sampled_from(["c{n}-{j}", "fn.c{n}:{j}", "c{n} {j}"])
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["system", "user", "assistant", "assistant", "tool", "tool"]))
        if kind == "system":
            events.append(Event(f"s{n}", Role.SYSTEM, draw(_texts)))
        elif kind == "user":
            events.append(Event(f"u{n}", Role.USER, draw(_texts), parts=tuple(draw(_parts))))
        elif kind == "assistant":
            made = [
                ToolCall(draw(call_ids).format(n=n, j=j), "lookup",
                         draw(st.sampled_from(["{}", '{"q":1}', "[1]", "", '{"n":1e999}'])),
                         draw(st.one_of(st.just(b""), _signatures)))
                for j in range(draw(st.integers(0, 3)))
            ]  # fmt: skip
            calls += [c.id for c in made]
            events.append(
                Event(
                    f"a{n}",
                    Role.ASSISTANT,
                    draw(_texts),
                    tool_calls=tuple(made),
                    reasoning=tuple(draw(st.lists(_reasoning, max_size=3))),
                    parts=tuple(draw(_parts)),
                    cleared=draw(st.booleans()),
                )
            )
        else:
            answered = st.sampled_from(calls) if calls else st.just("nowhere")
            ids = draw(st.lists(st.one_of(answered, st.just(f"orphan{n}")), min_size=1, max_size=3))
            results = tuple(
                ToolResult(i, "lookup", draw(_contents),
                           draw(st.booleans()))
                for i in ids
            )  # fmt: skip
            events.append(Event(f"t{n}", Role.TOOL, draw(_texts), tool_results=results))
    return events


def _system(events: Sequence[Event]) -> str:
    texts = [e.text for e in events if e.role is Role.SYSTEM]
    return texts[-1] if texts else ""


def _calls(events: Sequence[Event]) -> list[str]:
    return [c.id for e in events if e.role is Role.ASSISTANT for c in e.tool_calls]


def _blocks(message: JsonObject, key: str) -> list[JsonObject]:
    value = message[key]
    assert isinstance(value, list)
    return value


def _check_alternating(messages: list[JsonObject], user: str) -> None:
    roles = [m["role"] for m in messages]
    assert all(x != y for x, y in itertools.pairwise(roles)), roles
    assert not roles or roles[0] == user


def _reasoning_of(events: Sequence[Event]) -> list[Reasoning]:
    return [r for e in events if e.role is Role.ASSISTANT for r in e.reasoning]


def _ids(blocks: list[JsonObject], kind: str) -> list[str]:
    """The call ids of the ``kind`` blocks: Gemini's ``{kind: {"id"}}``, Anthropic's ``type``."""
    out = []
    for block in blocks:
        inner = block.get(kind)
        if isinstance(inner, dict):
            out.append(str(inner["id"]))
        elif block.get("type") == kind:
            out.append(str(block.get("id", block.get("tool_use_id"))))
    return out


def _answered_in_turn(messages: list[JsonObject], key: str, call: str, answer: str) -> list[str]:
    """Gemini and Anthropic: each message answers exactly the calls of the one before, first."""
    answered: list[str] = []
    calls: list[str] = []
    for message in messages:
        blocks = _blocks(message, key)
        answers = _ids(blocks, answer)
        assert answers == calls
        assert _ids(blocks[: len(answers)], answer) == answers  # the answers come first
        answered += answers
        calls = _ids(blocks, call)
    assert not calls
    return answered


def _decoded(value: object) -> bytes:
    return base64.b64decode(str(value), validate=True)


def _is_responses(content: JsonObject) -> bool:
    return any("functionResponse" in p for p in _blocks(content, "parts"))


def _gemini(events: list[Event], body: JsonObject) -> None:
    sdk.gemini(body)
    system = _system(events)
    if system:
        assert body["systemInstruction"] == {"parts": [{"text": system}]}
    else:
        assert "systemInstruction" not in body
    contents = _blocks(body, "contents")
    roles = [c["role"] for c in contents]
    assert not roles or roles[0] == "user"
    answered: list[str] = []
    calls: list[str] = []
    for before, content in zip([None, *contents], contents, strict=False):
        parts = _blocks(content, "parts")
        if _is_responses(content):  # a content of its own, answering the calls just before
            assert all("functionResponse" in p for p in parts), parts
            assert _ids(parts, "functionResponse") == calls
            answered += calls
        else:
            assert not calls, content  # calls are answered at once
            # roles alternate, but for the text after a content of function responses
            assert before is None or before["role"] != content["role"] or _is_responses(before)
        calls = _ids(parts, "functionCall")
    assert not calls
    assert answered == _calls(events)
    # the current turn: from the last user content that is not function responses
    turn = max((k for k, c in enumerate(contents) if c["role"] == "user" and not _is_responses(c)),
               default=-1)  # fmt: skip
    skipped = 0
    for k, content in enumerate(contents):
        first = [p for p in _blocks(content, "parts") if "functionCall" in p][:1]
        for part in first:
            if k > turn:
                assert "thoughtSignature" in part  # Gemini 3 checks every step's first call
            if part.get("thoughtSignature") == base64.b64encode(SKIP_SIGNATURE).decode():
                skipped += 1
    found = Counter(
        _decoded(p["thoughtSignature"])
        for c in contents
        for p in _blocks(c, "parts")
        if "thoughtSignature" in p
    )
    wanted = Counter(c.signature for e in events if e.role is Role.ASSISTANT for c in e.tool_calls)
    wanted += Counter(
        r.signature
        for e in events
        if e.role is Role.ASSISTANT
        for r in e.reasoning
        if not r.redacted and origin(e, r) in ("", "gemini")
    )
    wanted[SKIP_SIGNATURE] += skipped
    del wanted[b""]
    assert found == wanted


_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")  # what tool_use.id must match


def _anthropic(events: list[Event], body: JsonObject) -> None:
    sdk.anthropic(body)
    assert body.get("system", "") == _system(events)
    messages = _blocks(body, "messages")
    _check_alternating(messages, "user")
    answered = _answered_in_turn(messages, "content", "tool_use", "tool_result")
    calls = _calls(events)  # ids the API refuses are mapped, one to one; the others kept
    assert len(answered) == len(calls)
    assert len(set(answered)) == len(set(calls))
    assert all(x == c for x, c in zip(answered, calls, strict=True) if _TOOL_ID.fullmatch(c))
    for message in messages:
        blocks = _blocks(message, "content")
        kinds = [b["type"] for b in blocks]
        thinking = [k in ("thinking", "redacted_thinking") for k in kinds]
        assert thinking == sorted(thinking, reverse=True), kinds  # thinking first
        for b in blocks:
            if b["type"] == "text":
                assert str(b["text"]).strip()  # "text content blocks must contain non-whitespace"
            if b["type"] in ("tool_use", "tool_result"):
                assert _TOOL_ID.fullmatch(str(b.get("id", b.get("tool_use_id"))))
    found = Counter(
        str(b.get("signature", b.get("data"))).encode()
        for m in messages
        for b in _blocks(m, "content")
        if "thinking" in str(b["type"])
    )
    wanted = Counter(
        r.signature
        for e in events
        if e.role is Role.ASSISTANT
        for r in e.reasoning
        if r.signature
        and utf8(r.signature) is not None
        and origin(e, r) in ("", "anthropic")
        and (r.redacted or r.text or not e.cleared)  # text our clearing emptied is left out
    )
    assert found == wanted


def _openai_pairs(items: list[JsonObject], call: str, answer: str, id_key: str) -> list[str]:
    """OpenAI: after calls, nothing but their answers until all are answered, in order."""
    waiting: list[str] = []
    answered: list[str] = []
    previous: object = None
    for item in items:
        kind = item.get("type", item.get("role"))
        if kind == answer:
            assert waiting
            assert item[id_key] == waiting.pop(0)
            answered.append(str(item[id_key]))
            previous = kind
            continue
        assert not waiting or (kind == call and previous == call), (kind, waiting)
        previous = kind
        if kind == call:
            waiting.append(str(item["call_id"]))
        elif call == "tool_calls" and item.get("tool_calls"):
            waiting += [str(c["id"]) for c in _blocks(item, "tool_calls")]
    assert not waiting
    return answered


def _openai_chat(events: list[Event], body: JsonObject) -> None:
    sdk.openai_chat(body)
    messages = _blocks(body, "messages")
    for m in messages:
        parts: list[Any] = m["content"] if isinstance(m.get("content"), list) else []  # type: ignore[assignment]
        for p in parts:
            if p["type"] == "file":  # Chat Completions reads PDFs only as files
                assert p["file"]["file_data"].startswith("data:application/pdf;")
    system = _system(events)
    roles = [m["role"] for m in messages]
    assert roles.count("system") == (1 if system else 0)
    if system:
        assert messages[0] == {"role": "system", "content": system}
    assert _openai_pairs(messages, "tool_calls", "tool", "tool_call_id") == _calls(events)


def _openai_responses(events: list[Event], body: JsonObject) -> None:
    sdk.openai_responses(body)
    assert body.get("instructions", "") == _system(events)
    items = _blocks(body, "input")
    for item in items:
        parts: list[Any] = item["content"] if isinstance(item.get("content"), list) else []  # type: ignore[assignment]
        for p in parts:
            if p["type"] == "input_file":  # no audio, video or archive
                assert not re.search(r"audio|video|zip", str(p.get("file_data", p.get("file_url"))))
    answered = _openai_pairs(items, "function_call", "function_call_output", "call_id")
    assert answered == _calls(events)
    found = Counter(str(i["encrypted_content"]).encode() for i in items if "encrypted_content" in i)
    wanted = Counter(
        r.signature
        for r in _reasoning_of(events)
        if r.id and not r.redacted and r.signature and utf8(r.signature) is not None
    )
    assert not found - wanted
    for item, after in zip(items, [*items[1:], None], strict=False):
        if item["type"] == "reasoning":
            assert after is not None
            assert (
                after["type"] in ("reasoning", "function_call") or after.get("role") == "assistant"
            )


CHECKS = {
    ContextFormat.GEMINI: _gemini,
    ContextFormat.ANTHROPIC: _anthropic,
    ContextFormat.OPENAI_CHAT: _openai_chat,
    ContextFormat.OPENAI_RESPONSES: _openai_responses,
}


@settings(max_examples=150, deadline=None)
@given(windows(), st.sampled_from(list(ContextFormat)))
def test_every_rendering_keeps_its_providers_rules(events: list[Event], fmt: ContextFormat) -> None:
    text = render_json(events, fmt)
    text.encode("utf-8")  # no lone surrogate
    CHECKS[fmt](events, json.loads(text, parse_constant=_not_json))


def _not_json(name: str) -> object:
    raise AssertionError(f"{name} is not JSON")


KEPT = Fragments(1 << 22)  # shared by every example: blocks kept from earlier windows


@settings(max_examples=100, deadline=None)
@given(windows(), st.sampled_from(list(ContextFormat)))
def test_kept_blocks_never_change_a_rendering(events: list[Event], fmt: ContextFormat) -> None:
    assert render_json(events, fmt, KEPT) == render_json(events, fmt)
    assert render_json(events[1:], fmt, KEPT) == render_json(events[1:], fmt)


@settings(max_examples=100, deadline=None)
@given(windows(), st.sampled_from(list(ContextFormat)))
def test_a_window_grown_event_by_event_renders_as_from_scratch(
    events: list[Event], fmt: ContextFormat
) -> None:
    kept = Fragments(1 << 22)  # each read grows the rendering kept from the one before
    for end in range(1, len(events) + 1):
        assert render_json(events[:end], fmt, kept) == render_json(events[:end], fmt)
