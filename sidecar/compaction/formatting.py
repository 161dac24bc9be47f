"""The one way an event is rendered for token accounting.

``User: <text>``, ``Assistant: <text>``, ``System: <text>``,
``Assistant [tool calls: name(args), ...]`` (or ``Assistant: <text> [tool calls: ...]``),
``Tool [responses: name -> data, ...]``. Non-text parts become a placeholder
such as ``[image/png content]``, never their bytes. Reasoning text comes
first, as ``Assistant [reasoning: ...] <text>``; signatures are never text.
"""

from __future__ import annotations

from sidecar.model import Event, Part, Role

_LABEL = {
    Role.USER: "User",
    Role.ASSISTANT: "Assistant",
    Role.SYSTEM: "System",
    Role.TOOL: "Tool",
}


def part_placeholder(part: Part) -> str:
    """What a non-text part contributes to text: its kind, never its content."""
    return f"[{part.mime_type or 'application/octet-stream'} content]"


def format_event(event: Event) -> str:
    """Render ``event`` the way token counts and the trigger see it."""
    label = _LABEL[event.role]
    text = event.text
    if event.reasoning:
        thoughts = " ".join(r.text for r in event.reasoning if r.text)
        if thoughts:
            text = f"[reasoning: {thoughts}] {text}" if text else f"[reasoning: {thoughts}]"
    if event.parts:
        placeholders = " ".join(part_placeholder(p) for p in event.parts)
        text = f"{text} {placeholders}" if text else placeholders
    if event.tool_results:
        responses = ", ".join(f"{r.name} -> {r.content}" for r in event.tool_results)
        head = f"{label}: {text} " if text else f"{label} "
        return f"{head}[responses: {responses}]"
    if event.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments_json})" for c in event.tool_calls)
        head = f"{label}: {text} " if text else f"{label} "
        return f"{head}[tool calls: {calls}]"
    return f"{label}: {text}"
