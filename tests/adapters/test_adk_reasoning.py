"""Gemini's thoughts and thought signatures on ADK events: mapped to fields, sent back unchanged.

Gemini 3 refuses a multi-turn function-calling exchange whose function calls
come back without their ``thought_signature``; these tests pin that each
signature survives the mapping to the service's fields and back, and a
clearing (the Runner end to end: ``test_adk_runner_reasoning``).
"""

from __future__ import annotations

from dataclasses import replace

from google.adk.events.event import Event as AdkEvent
from google.genai import types

from sidecar.adapters.adk import event_from_sidecar, event_to_sidecar
from sidecar.adapters.adk_mapping import META_CONTENT
from sidecar.compaction.clear_tool_results import CLEARED_ARGUMENTS
from sidecar.model import Event, Reasoning

SIG_CALL = b"\x00sig-call\xff"
SIG_TEXT = b"sig-text\x01"
SIG_THOUGHT = b"sig-thought\x02"


def thought(text: str, signature: bytes | None = None) -> types.Part:
    return types.Part(text=text, thought=True, thought_signature=signature)


def call(call_id: str, signature: bytes | None = None, **args: object) -> types.Part:
    fc = types.FunctionCall(id=call_id, name="get_weather", args=dict(args))
    return types.Part(function_call=fc, thought_signature=signature)


def model(*parts: types.Part) -> AdkEvent:
    return AdkEvent(
        invocation_id="inv", author="agent", content=types.Content(role="model", parts=list(parts))
    )


def cleared_inputs(ours: Event) -> Event:
    """``ours`` as a clear_tool_results pass with ``clear_tool_inputs`` leaves it."""
    calls = tuple(replace(c, arguments_json=CLEARED_ARGUMENTS) for c in ours.tool_calls)
    return ours.evolve(tool_calls=calls, cleared=True)


def test_gemini_shapes_map_to_fields_and_back_without_the_verbatim_copy() -> None:
    shapes = [
        model(call("c1", SIG_CALL, city="Oslo"), call("c2", city="Lima")),  # parallel calls
        model(thought("I should look it up"), call("c1", SIG_CALL, city="Oslo")),
        model(thought("plan", SIG_THOUGHT), types.Part(text="Let me check."), call("c1", SIG_CALL)),
        model(types.Part(text="It is sunny.", thought_signature=SIG_TEXT)),
        model(thought("done"), types.Part(text="Sunny.", thought_signature=SIG_TEXT)),
        model(types.Part(text="", thought_signature=SIG_TEXT)),  # a lone streamed signature
    ]
    for event in shapes:
        ours = event_to_sidecar(event)
        assert META_CONTENT not in ours.metadata, event.content
        back = event_from_sidecar(ours, author="unused")
        assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)
    fields = event_to_sidecar(shapes[2])
    assert fields.reasoning == (Reasoning("plan", SIG_THOUGHT),)
    assert fields.text == "Let me check."
    assert [c.signature for c in fields.tool_calls] == [SIG_CALL]
    assert event_to_sidecar(shapes[3]).reasoning == (Reasoning("", SIG_TEXT),)


def test_shapes_the_fields_cannot_rebuild_keep_their_thoughts_verbatim() -> None:
    event = model(types.Part(text="a"), thought("late thought", SIG_THOUGHT), types.Part(text="b"))
    ours = event_to_sidecar(event)
    assert META_CONTENT in ours.metadata
    assert ours.reasoning == (Reasoning("late thought", SIG_THOUGHT),)
    back = event_from_sidecar(ours, author="unused")
    assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)


def test_a_cleared_call_keeps_its_thought_and_signature() -> None:
    event = model(thought("which city?"), call("c1", SIG_CALL, city="Oslo"))
    rendered = event_from_sidecar(cleared_inputs(event_to_sidecar(event)), author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("which city?"),
        call("c1", SIG_CALL, cleared=True),
    ]


def test_a_cleared_event_kept_verbatim_keeps_every_part_in_place() -> None:
    # Two text parts: only the verbatim copy holds this shape.
    event = model(
        thought("plan", SIG_THOUGHT),
        types.Part(text="Checking"),
        types.Part(text=" now."),
        call("c1", SIG_CALL, city="Oslo"),
        call("c2", city="Lima"),
    )
    ours = event_to_sidecar(event)
    assert META_CONTENT in ours.metadata
    rendered = event_from_sidecar(cleared_inputs(ours), author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("plan", SIG_THOUGHT),
        types.Part(text="Checking"),
        types.Part(text=" now."),
        call("c1", SIG_CALL, cleared=True),
        call("c2", cleared=True),
    ]


def test_cleared_reasoning_text_is_shown_cleared_and_its_signature_kept() -> None:
    event = model(
        thought("long private plan", SIG_THOUGHT),
        thought("unsigned aside"),
        types.Part(text="a"),
        types.Part(text="b"),
        call("c1", SIG_CALL),
    )
    ours = event_to_sidecar(event)
    cleared = ours.evolve(
        reasoning=tuple(replace(r, text="") for r in ours.reasoning), cleared=True
    )
    rendered = event_from_sidecar(cleared, author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("", SIG_THOUGHT),
        types.Part(text="a"),
        types.Part(text="b"),
        call("c1", SIG_CALL),
    ]


def test_a_cleared_thought_leaves_its_signature_in_place() -> None:
    # Mapped natively (no verbatim copy): a signed thought whose text a clearing took
    # (keep_reasoning_turns) is a text-less signature; the text part keeps its own.
    event = model(
        thought("plan", SIG_THOUGHT),
        types.Part(text="Checking.", thought_signature=SIG_TEXT),
        call("c1", SIG_CALL, city="Oslo"),
    )
    ours = event_to_sidecar(event)
    assert META_CONTENT not in ours.metadata
    cleared = ours.evolve(
        reasoning=tuple(replace(r, text="") for r in ours.reasoning), cleared=True
    )
    rendered = event_from_sidecar(cleared, author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        types.Part(text="", thought_signature=SIG_THOUGHT),
        types.Part(text="Checking.", thought_signature=SIG_TEXT),
        call("c1", SIG_CALL, city="Oslo"),
    ]


def test_a_signature_outside_the_models_events_stays_verbatim() -> None:
    # The service takes reasoning on ASSISTANT events only: a user's signed text part
    # (a client replaying a model's text as the user's) is kept verbatim instead.
    signed = types.Part(text="as you said", thought_signature=SIG_TEXT)
    event = AdkEvent(author="user", content=types.Content(role="user", parts=[signed]))
    ours = event_to_sidecar(event)
    assert ours.reasoning == ()
    assert META_CONTENT in ours.metadata
    back = event_from_sidecar(ours, author="unused")
    assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)
