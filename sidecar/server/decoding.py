"""Requests that do not decode are INVALID_ARGUMENT, not grpcio's UNKNOWN.

grpcio answers a request its deserializer cannot parse (invalid UTF-8 in a
string field, a corrupt length, nesting past protobuf's recursion limit) with
``UNKNOWN "Unexpected <class DecodeError>"``: to a client that reads as a
server fault worth retrying. This interceptor gives every handler a
deserializer that returns a marker instead of raising, and a behaviour that
answers the marker with INVALID_ARGUMENT (for a stream: the whole call, since
a message that does not decode has no request id to answer by).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError


@dataclass(frozen=True, slots=True)
class Undecodable:
    """What a request that does not decode becomes, with the parser's complaint."""

    error: str


def _message(marker: Undecodable) -> str:
    return f"request does not decode as protobuf: {marker.error}"


def _safe(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except (DecodeError, RecursionError, UnicodeDecodeError) as exc:
            return Undecodable(str(exc) or type(exc).__name__)

    return deserialize


async def _checked(
    requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
        yield request


if TYPE_CHECKING:  # generic in the type stubs only
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor


class DecodeErrorInterceptor(_Interceptor):
    """Answers requests that do not decode with INVALID_ARGUMENT (see the module docstring)."""

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
        return _guarded(handler)


def _guarded(handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    deserializer = _safe(handler.request_deserializer)
    serializer = handler.response_serializer
    # The stubs type behaviors for the sync server; under grpc.aio they are coroutines.
    if handler.request_streaming:
        streaming: Any = handler.stream_stream or handler.stream_unary

        if handler.response_streaming:

            async def stream_stream(
                requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
            ) -> Any:
                async for response in streaming(_checked(requests, context), context):
                    yield response

            return grpc.stream_stream_rpc_method_handler(stream_stream, deserializer, serializer)

        async def stream_unary(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> Any:
            return await streaming(_checked(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, deserializer, serializer)

    single: Any = handler.unary_unary or handler.unary_stream
    if handler.response_streaming:

        async def unary_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if isinstance(request, Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
            async for response in single(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(unary_stream, deserializer, serializer)

    async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
        return await single(request, context)

    return grpc.unary_unary_rpc_method_handler(unary_unary, deserializer, serializer)
