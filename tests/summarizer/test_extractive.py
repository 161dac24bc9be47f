"""The offline summarizer's usage figures: a model's for the same request."""

from __future__ import annotations

from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.summarizer.prompts import DEFAULT_SYSTEM_PROMPT, with_must_keep
from sidecar.summarizer.protocol import SummaryRequest
from sidecar.tokenizer import default_estimator

HISTORY = '<conversation>\n<user>Cancel ZFA04Y.</user>\n<tool-call id="c1" name="cancel">'


async def test_input_tokens_count_the_instruction_and_must_keep_list_as_well_as_the_history() -> (
    None
):
    """A model is sent the system instruction (with the must-keep identifiers) and the history;
    the bench bills the summarizer's input_tokens, so the offline stand-in reports both."""
    request = SummaryRequest(DEFAULT_SYSTEM_PROMPT, HISTORY, identifiers=("ZFA04Y", "HAT136"))
    answer = await ExtractiveSummarizer().summarize(request)
    count = default_estimator().count
    instruction = with_must_keep(DEFAULT_SYSTEM_PROMPT, request.identifiers)
    assert answer.input_tokens == count(instruction) + count(HISTORY)
    assert answer.input_tokens > count(HISTORY) + 200
    assert answer.output_tokens == count(answer.text)
