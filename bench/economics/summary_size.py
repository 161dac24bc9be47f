"""How long the fake models' summaries are: one stated, length-calibrated rule for every system.

No model is called here, so every summarizer in the benchmark, ours and the
peers', is a deterministic stand-in: the extractive rule (the user's
requests, the tools used, the latest findings) says what a summary holds,
and this module says how long it is. Left to itself the rule's length
follows what it finds (35 tokens for a coding task with one user message,
366 for a chatty τ-bench session), so a system could be billed less only
because its fake found less to quote. Here every summary is the same
function of what it was asked to read:

    summary tokens = clamp(input tokens ÷ RATIO, FLOOR, the cap)

cut to that length, or padded with plain prose (``PAD``: no identifier, so
it keeps nothing the judge counts) when the rule found less. The input is
the conversation the summarizer is sent, without its instruction; the cap
is the policy's own summary budget (ours), or ``PEER_CAP`` for the peers,
whose prompts set no length. A summary ours asks to end with an identifier
trail gets the trail on top, as requested: a model told to copy a list
copies it.

``RATIO``, the calibration: a bachelor thesis measuring LLM context
summarizers reports compression ratios of 12.3 (its "FullContext" method, on
a large set of real ChatGPT conversations, keeping 77 % of their context)
and 5.1 (Cohere Summarize, on a hand-crafted set) ("Efficacy of Context
Summarization Techniques on Large Language Model Chatbots: Balancing
Compression and Recollection", ``SOURCE``); 8 lies between them, and
``--summary-ratio`` reruns the benchmark at either end.
Nothing here was measured against a live model: the size is stated, not
observed. Standard library only: ADK's worker (its own venv) uses it too,
in characters (``CHARS_PER_TOKEN``).
"""

from __future__ import annotations

from collections.abc import Callable

RATIO = 8.0
"""Input tokens per summary token."""
RATIO_RANGE = (5.1, 12.3)
"""The published range ``RATIO`` was taken from (the sensitivity reruns' two ends)."""
FLOOR = 64
"""No summary is shorter: a request, a status line and the tools used."""
PEER_CAP = 2048
"""The longest a peer's summary may be (their prompts set no length; a model's reply limit)."""
CHARS_PER_TOKEN = 4
"""Where no tokenizer is at hand (ADK's worker): characters per token, as ADK's own estimate."""
SOURCE = "https://floreteng.se/projects/bachelor-thesis-in-computer-science"
PAD = "The conversation went on in the same vein, and the agent kept working on what was asked."
"""Filler prose for a summary the extractive rule left short: no identifier in it."""


def target_size(input_size: int, cap: int, ratio: float = RATIO, floor: int = FLOOR) -> int:
    """The summary's size for ``input_size`` (tokens, or characters with ``floor`` in them):
    the input over ``ratio``, at least ``floor``, at most ``cap``."""
    return max(1, min(cap, max(floor, round(input_size / ratio))))


def fit(text: str, size: int, measure: Callable[[str], int], cut: Callable[[str, int], str]) -> str:
    """``text`` cut to ``size`` (as ``measure`` counts it), or padded with ``PAD`` to reach it.

    ``cut(text, size)`` is the longest prefix of ``text`` within ``size``.
    An empty ``text`` stays empty: a blank summary skips the pass.
    """
    if not text.strip():
        return text
    if measure(text) >= size:
        return cut(text, size)
    pad_size = max(1, measure(PAD))
    repeats = (size - measure(text)) // pad_size + 1
    return cut(text + ("\n" + " ".join([PAD] * repeats)), size)


def cut_chars(text: str, size: int) -> str:
    """The first ``size`` characters of ``text`` (``fit``'s cut where sizes are characters)."""
    return text[:size]
