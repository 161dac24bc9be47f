"""Requests that do not decode are INVALID_ARGUMENT, not grpcio's UNKNOWN.

grpcio answers a request its deserializer cannot parse (invalid UTF-8 in a
string field, a corrupt length, nesting past protobuf's recursion limit) with
``UNKNOWN "Unexpected <class DecodeError>"``: to a client that reads as a
server fault worth retrying. This interceptor gives every handler a
deserializer that returns a marker instead of raising, and a behaviour that
answers the marker with INVALID_ARGUMENT. Streamed requests reach the
servicer with the marker in their place: StreamEvents answers that one
message with an error and goes on, as it does for any bad request (aborting
the call from inside the request iterator, another task, would race the
answers already on their way).

Given the server's limits, the deserializer also counts a large request's
fields on the wire before parsing it (``wire_counts``): one past a count is
refused as the same count found after the parse would be (RESOURCE_EXHAUSTED
naming the limit; INVALID_ARGUMENT naming a policy's trigger list), without
being parsed (protobuf's parser holds the event loop for seconds on a request
of millions of tiny fields). It reaches the behaviour as a ``Refused``
marker, answered like ``Undecodable``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from sidecar.engine.validation import Limits
from sidecar.errors import SidecarError
from sidecar.server.fields import abort
from sidecar.server.interceptors import Behavior, HandlerCache, ServerInterceptor, rebuilt
from sidecar.server.wire_counts import WireCounts, echoed_ids


@dataclass(frozen=True, slots=True)
class Undecodable:
    """What a request that does not decode becomes, with the parser's complaint."""

    error: str


def undecodable_message(marker: Undecodable) -> str:
    return f"request does not decode as protobuf: {marker.error}"


@dataclass(frozen=True, slots=True)
class Refused:
    """What a request past a count on the wire becomes (``wire_counts``), unparsed: its
    error, and the ids a streamed request's answer echoes."""

    error: SidecarError
    request_id: str = ""
    session_id: str = ""


Marker = Undecodable | Refused
"""What a request that was not parsed becomes: answered with an error, not handled."""


def _safe(
    deserializer: Callable[[bytes], Any] | None, counts: WireCounts | None
) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None
    message_type = getattr(deserializer, "__self__", None)  # Message.FromString's class
    descriptor = getattr(message_type, "DESCRIPTOR", None)

    def deserialize(raw: bytes) -> Any:
        if counts is not None and descriptor is not None:
            problem = counts.problem(raw, descriptor)
            if problem is not None:
                return Refused(problem, **echoed_ids(raw, descriptor))
        try:
            return deserializer(raw)
        except (DecodeError, RecursionError, UnicodeDecodeError) as exc:
            return Undecodable(str(exc) or type(exc).__name__)

    return deserialize


class DecodeErrorInterceptor(ServerInterceptor):
    """Answers requests that do not decode with INVALID_ARGUMENT (see the module docstring)."""

    def __init__(self, limits: Limits | None = None) -> None:
        """``limits``: count large requests' fields on the wire against them first."""
        self._handlers = HandlerCache()
        self._counts = WireCounts(limits) if limits is not None else None

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return self._handlers.get(
            handler_call_details.method, handler, lambda: _guarded(handler, self._counts)
        )


def _guarded(
    handler: grpc.RpcMethodHandler[Any, Any], counts: WireCounts | None
) -> grpc.RpcMethodHandler[Any, Any]:
    streamed_requests = handler.request_streaming

    async def checked(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        """The request as the behavior expects it, or the call aborted."""
        if streamed_requests:  # markers pass through, one per message (see the docstring)
            return request
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, undecodable_message(request))
        if isinstance(request, Refused):
            await abort(context, request.error)
        return request

    def around_stream(behavior: Behavior) -> Behavior:
        async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            async for response in behavior(await checked(request, context), context):
                yield response

        return streaming

    def around_unary(behavior: Behavior) -> Behavior:
        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            return await behavior(await checked(request, context), context)

        return unary

    return rebuilt(
        handler,
        around_unary=around_unary,
        around_stream=around_stream,
        request_deserializer=_safe(handler.request_deserializer, counts),
    )
