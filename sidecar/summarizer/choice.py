"""Which summarizer ``--summarizer auto`` (the default) serves with.

Gemini when its credentials are in the environment (the SDK's own variables:
a key, or Vertex AI switched on), else the offline extractive summarizer: a
server started on the defaults, as ``make serve`` starts it, summarizes out of
the box, and one with a key summarizes with the model. Reading the variables
here needs no SDK: the Gemini module is imported only when it is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping

AUTO = "auto"
KINDS = (AUTO, "extractive", "gemini", "none")
VERTEX_ON = ("true", "1", "yes", "on")


def gemini_configured(environ: Mapping[str, str]) -> bool:
    """A Gemini key or Vertex AI in ``environ``, read as the SDK reads them (blank is unset)."""
    keys = (environ.get(name, "").strip() for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY"))
    vertex = environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in VERTEX_ON
    return any(keys) or vertex


def resolve(kind: str, environ: Mapping[str, str]) -> str:
    """The summarizer ``kind`` stands for: ``auto`` becomes gemini or extractive, others stay."""
    if kind != AUTO:
        return kind
    return "gemini" if gemini_configured(environ) else "extractive"
