"""What every server interceptor here shares: the base class and the handler rebuild.

grpc.aio lets an interceptor swap a method's handler for another; metrics,
tracing and the decode-error guard each wrap the handler's behavior (a
coroutine for unary responses, an async generator for streamed ones) and
rebuild a handler of the same kind around it.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc

if TYPE_CHECKING:  # generic in the type stubs only
    ServerInterceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    ServerInterceptor = grpc.aio.ServerInterceptor

Behavior = Any
"""A handler's behavior: the stubs type it for the sync server; under grpc.aio it is async."""

_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def ended_with(context: grpc.aio.ServicerContext[Any, Any], failed: bool) -> grpc.StatusCode:
    """The status a call ended with: the one it set, else UNKNOWN if it raised, else OK.

    The aio context may keep the code as a StatusCode or as its number.
    """
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int) and code in _BY_NUMBER:
        return _BY_NUMBER[code]
    return grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK


def rebuilt(
    handler: grpc.RpcMethodHandler[Any, Any],
    *,
    around_unary: Callable[[Behavior], Behavior],
    around_stream: Callable[[Behavior], Behavior],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with its behavior wrapped: ``around_stream`` when the response streams.

    Keeps the handler's kind and serializers; ``request_deserializer``, when
    given, replaces the handler's.
    """
    deserializer = request_deserializer or handler.request_deserializer
    serializer = handler.response_serializer
    if handler.response_streaming:
        behavior = around_stream(_generating(handler.stream_stream or handler.unary_stream))
        if handler.request_streaming:
            return grpc.stream_stream_rpc_method_handler(behavior, deserializer, serializer)
        return grpc.unary_stream_rpc_method_handler(behavior, deserializer, serializer)
    behavior = around_unary(handler.unary_unary or handler.stream_unary)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behavior, deserializer, serializer)
    return grpc.unary_unary_rpc_method_handler(behavior, deserializer, serializer)


def _generating(behavior: Behavior) -> Behavior:
    """A streaming behavior as an async generator, which is what every ``around_stream`` wraps.

    grpc.aio also takes a coroutine that sends its responses with
    ``context.write`` (grpc_health's Watch does); that one runs whole inside
    a generator that yields nothing, its writes going out as it makes them.
    """
    if inspect.isasyncgenfunction(behavior):
        return behavior

    async def generator(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        await behavior(request, context)
        return
        yield  # makes this an async generator

    return generator


class HandlerCache:
    """Wrapped handlers by method, so a wrapper is built once per method, not per call.

    A cached wrapper is reused only while the inner handler is the very same
    object (another interceptor may hand out a fresh one per call, e.g. a
    refusal), so caching never changes what a call gets.
    """

    def __init__(self) -> None:
        self._by_method: dict[str, tuple[object, grpc.RpcMethodHandler[Any, Any]]] = {}

    def get(
        self,
        method: str,
        handler: grpc.RpcMethodHandler[Any, Any],
        build: Callable[[], grpc.RpcMethodHandler[Any, Any]],
    ) -> grpc.RpcMethodHandler[Any, Any]:
        cached = self._by_method.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = build()
        self._by_method[method] = (handler, wrapped)
        return wrapped
