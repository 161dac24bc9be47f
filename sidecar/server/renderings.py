"""GetContext's ``format``: which rendering was asked, and the answer that carries it.

The rendering itself is ``sidecar.providers``'; here it is only asked for
and attached. An answer whose events alone pass the send limit is sent
without content (see ``answers.fit_context``) and is never rendered: the
client renders the events it reads in parts.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def rendered(
    answer: pb.GetContextResponse,
    events: Sequence[Event],
    fmt: ContextFormat,
    limit: int,
    fragments: Fragments,
) -> pb.GetContextResponse:
    """A copy of ``answer`` (the plain answer for ``events``) with ``rendered_json`` in ``fmt``.

    ``answer`` itself when its events alone pass ``limit``: it goes out
    without content, so without a rendering. ``fragments`` keeps the
    events' encoded blocks, so the next window (this one and an append)
    encodes only its new events.
    """
    if not answers.fits(answer, limit):
        return answer
    out = pb.GetContextResponse()
    out.CopyFrom(answer)
    out.rendered_json = render_json(events, fmt, fragments)
    return out
