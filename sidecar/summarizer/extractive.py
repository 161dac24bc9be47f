"""An offline summarizer that needs no model: it extracts, it does not write.

For the demo and for running without a Gemini key. It keeps what the default
prompt asks an LLM to keep that can be found mechanically: the user's requests
verbatim (newest last), the exact tool names used, and the assistant's latest
conclusions, folded with the previous summary, capped at the token budget,
and it ends with the request's must-keep identifiers as the trail line
(``Identifiers: ...``), which the request's budget already leaves room for.
Its usage figures are a model's for the same request: the input counts the
instruction (with the must-keep list) as well as the history, as the Gemini
summarizer's ``prompt_token_count`` does, so what it stands in for is billed
whole.
"""

from __future__ import annotations

import html
import re

from sidecar.summarizer.prompts import with_must_keep
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse, trail_line
from sidecar.tokenizer import default_estimator, truncate_to_tokens

_CONVERSATION = re.compile(r"<conversation>(.*?)</conversation>", re.S)
_PREVIOUS = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.S)
_USER = re.compile(r"<user(?: [^>]*)?>(.*?)</user>", re.S)
_ASSISTANT = re.compile(r"<assistant(?: [^>]*)?>([^<\n]+)</assistant>")
_TOOL = re.compile(r'<tool-call id="[^"]*" name="([^"]*)">')


class ExtractiveSummarizer:
    """Builds a summary from the formatted history without any model call."""

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        found = _CONVERSATION.search(request.history)
        conversation = found.group(1) if found else ""
        previous = _PREVIOUS.search(request.history)
        folded = _parse(html.unescape(previous.group(1))) if previous else {}
        # Fold into the previous summary's sections rather than appending to it,
        # so the summary does not nest or repeat itself pass after pass.
        tools = folded.get(_TOOLS, []) + _TOOL.findall(conversation)
        asked = folded.get(_ASKED, []) + [
            html.unescape(m).strip() for m in _USER.findall(conversation)
        ]
        answers = [html.unescape(m).strip() for m in _ASSISTANT.findall(conversation)]
        findings = (folded.get(_FINDINGS, []) + answers)[-3:]
        lines = [
            f"{label}{_SEPARATOR.join(dict.fromkeys(items))}"
            for label, items in ((_TOOLS, tools), (_ASKED, asked), (_FINDINGS, findings))
            if items
        ]
        estimator = default_estimator()
        text = truncate_to_tokens("\n".join(lines), request.max_output_tokens, estimator)
        if request.identifiers:
            text = f"{text}\n{trail_line(request.identifiers)}" if text else ""
        return SummaryResponse(
            text=text,
            input_tokens=estimator.count(with_must_keep(request.system_prompt, request.identifiers))
            + estimator.count(request.history),
            output_tokens=estimator.count(text),
            finish_reason="STOP",
        )


_TOOLS = "Tools used: "
_ASKED = "User asked: "
_FINDINGS = "Latest findings: "
_SEPARATOR = " | "


def _parse(summary: str) -> dict[str, list[str]]:
    """The sections of a summary this summarizer wrote."""
    sections: dict[str, list[str]] = {}
    for line in summary.splitlines():
        for label in (_TOOLS, _ASKED, _FINDINGS):
            if line.startswith(label):
                sections[label] = line.removeprefix(label).split(_SEPARATOR)
    return sections
