"""GetContext's ``format``: which rendering was asked, and the answer that carries it.

The rendering itself is ``sidecar.providers``'; here it is only asked for
and attached. An answer whose events alone pass the send limit is sent
without content (see ``answers.fit_context``) and is never rendered: the
client renders the events it reads in parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.errors import InvalidArgument
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import Event
from sidecar.providers.fragments import Fragments
from sidecar.providers.render import ContextFormat, render_json
from sidecar.server import answers

_FORMATS: dict[int, ContextFormat] = {
    pb.CONTEXT_FORMAT_GEMINI: ContextFormat.GEMINI,
    pb.CONTEXT_FORMAT_OPENAI_CHAT: ContextFormat.OPENAI_CHAT,
    pb.CONTEXT_FORMAT_OPENAI_RESPONSES: ContextFormat.OPENAI_RESPONSES,
    pb.CONTEXT_FORMAT_ANTHROPIC: ContextFormat.ANTHROPIC,
}


def format_in(value: int) -> ContextFormat | None:
    """The format GetContextRequest.format asks for; None when unset.

    A value this server does not know (a newer client's) is INVALID_ARGUMENT
    naming ``format``, never an answer without the rendering it asked for.
    """
    if value == pb.CONTEXT_FORMAT_UNSPECIFIED:
        return None
    fmt = _FORMATS.get(value)
    if fmt is None:
        known = ", ".join(f"CONTEXT_FORMAT_{f.name}" for f in _FORMATS.values())
        raise InvalidArgument("format", f"unknown context format {value}; known: {known}")
    return fmt


@dataclass(frozen=True, slots=True)
class Rendered:
    """The answer to send, and the bytes of its rendering (0: sent without content)."""

    answer: pb.GetContextResponse
    rendering_bytes: int


def rendered(
    answer: pb.GetContextResponse,
    events: Sequence[Event],
    fmt: ContextFormat,
    limit: int,
    fragments: Fragments,
) -> Rendered:
    """The answer to send for ``answer`` (the plain answer for ``events``) asked in ``fmt``.

    A copy with ``rendered_json``, which fits in ``limit``; or, when the
    events alone or with their rendering would not, the answer without
    content and without rendering. ``fragments`` keeps the events' encoded
    blocks and the window's rendering, so the next window (this one and an
    append) encodes only its new events and lays out only what they can
    change (``sidecar.providers.incremental``). Sizes are added up rather
    than measured again: measuring a 400 KB answer costs as much as copying
    it.
    """
    size = answer.ByteSize()
    if not answers.fits_size(size, limit):
        return Rendered(answers.fit_context(answer, limit), 0)
    text = render_json(events, fmt, fragments)
    encoded = len(text) if text.isascii() else len(text.encode())
    out = pb.GetContextResponse()
    out.CopyFrom(answer)
    out.rendered_json = text
    if not answers.fits_size(size + 1 + _varint_size(encoded) + encoded, limit):
        return Rendered(answers.fit_context(out, limit), 0)
    return Rendered(out, encoded)


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)
