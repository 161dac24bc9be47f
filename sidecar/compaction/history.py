"""The summarizer's input: history as role-preserving, XML-like data, within a budget.

```
<previous-summary>...</previous-summary>
<conversation>
<user>Check the weather in Delhi.</user>
<assistant>
<tool-call id="weather-1" name="getWeather">{"city":"Delhi"}</tool-call>
</assistant>
<tool-result id="weather-1" name="getWeather">20 C</tool-result>
</conversation>
<recent-context>...</recent-context>
```

All content is escaped, so nothing inside an event can open or close a tag.
Non-text parts become placeholders. The input has its own token budget, so the
summary request itself can never overflow the summarizer's window: long tool
results are truncated with a visible marker, then the oldest conversation
events are dropped, with a marker saying how many.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.formatting import part_placeholder
from sidecar.model import Event, Role
from sidecar.tokenizer import TokenEstimator, truncate_to_tokens

DEFAULT_MAX_INPUT_TOKENS = 100_000
DEFAULT_MAX_TOOL_RESULT_TOKENS = 2_000

_TAG = {
    Role.USER: "user",
    Role.ASSISTANT: "assistant",
    Role.SYSTEM: "system",
    Role.TOOL: "tool",
}


def _text(value: str) -> str:
    return html.escape(value, quote=False)


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


@dataclass(frozen=True, slots=True)
class FormattedHistory:
    """The summarizer input, with what the budget cost."""

    text: str
    tokens: int
    dropped_events: int
    truncated_results: int


def _result_content(content: str, limit: int, estimator: TokenEstimator) -> tuple[str, bool]:
    kept = truncate_to_tokens(content, limit, estimator)
    if len(kept) == len(content):
        return content, False
    omitted = estimator.count(content) - estimator.count(kept)
    return f"{kept}[... truncated {omitted} tokens ...]", True


def render_event(
    event: Event, max_result_tokens: int, estimator: TokenEstimator
) -> tuple[str, int]:
    """One event as a tagged block; returns it and the number of tool results truncated."""
    truncated = 0
    lines: list[str] = []
    body = _text(event.text)
    placeholders = " ".join(_text(part_placeholder(p)) for p in event.parts)
    if placeholders:
        body = f"{body} {placeholders}" if body else placeholders
    author = f' author="{_attr(event.author)}"' if event.author else ""
    tag = _TAG[event.role]
    if event.tool_calls:
        lines.append(f"<{tag}{author}>{body}")
        for call in event.tool_calls:
            lines.append(
                f'<tool-call id="{_attr(call.id)}" name="{_attr(call.name)}">'
                f"{_text(call.arguments_json)}</tool-call>"
            )
        lines.append(f"</{tag}>")
    elif body or not event.tool_results:
        lines.append(f"<{tag}{author}>{body}</{tag}>")
    for result in event.tool_results:
        content, cut = _result_content(result.content, max_result_tokens, estimator)
        truncated += cut
        error = ' error="true"' if result.is_error else ""
        lines.append(
            f'<tool-result id="{_attr(result.call_id)}" name="{_attr(result.name)}"{error}>'
            f"{_text(content)}</tool-result>"
        )
    return "\n".join(lines), truncated


def format_history(
    *,
    previous_summary: str | None,
    archived: Sequence[Event],
    overlap: Sequence[Event],
    estimator: TokenEstimator,
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS,
    max_tool_result_tokens: int = DEFAULT_MAX_TOOL_RESULT_TOKENS,
) -> FormattedHistory:
    """Format the summarizer input within ``max_input_tokens``.

    The previous summary and the overlap (context only, marked as such) are
    always included; the oldest archived events go first when over budget.
    """
    truncated = 0
    head = ""
    if previous_summary:
        head = f"<previous-summary>\n{_text(previous_summary)}\n</previous-summary>\n"
    tail = ""
    if overlap:
        rendered = []
        for event in overlap:
            block, cut = render_event(event, max_tool_result_tokens, estimator)
            truncated += cut
            rendered.append(block)
        tail = (
            '<recent-context note="kept verbatim after the summary; for continuity only, '
            'do not summarize">\n' + "\n".join(rendered) + "\n</recent-context>\n"
        )
    blocks: list[str] = []
    costs: list[int] = []
    for event in archived:
        block, cut = render_event(event, max_tool_result_tokens, estimator)
        truncated += cut
        blocks.append(block)
        costs.append(estimator.count(block) + 1)
    fixed = estimator.count(head) + estimator.count(tail) + 8
    total = fixed + sum(costs)
    dropped = 0
    while dropped < len(blocks) and total > max_input_tokens:
        total -= costs[dropped]
        dropped += 1
    marker = f'<omitted events="{dropped}"/>\n' if dropped else ""
    conversation = "<conversation>\n" + marker + "".join(b + "\n" for b in blocks[dropped:])
    text = head + conversation + "</conversation>\n" + tail
    return FormattedHistory(
        text=text,
        tokens=estimator.count(text),
        dropped_events=dropped,
        truncated_results=truncated,
    )
