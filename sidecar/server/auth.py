"""Optional bearer-token authentication.

Tokens are compared in constant time. Health checking and reflection are
exempt: Kubernetes probes cannot send credentials, and listing services
reveals nothing about sessions.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

EXEMPT_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


def read_tokens(path: str) -> tuple[bytes, ...]:
    """One token per non-empty line; lines starting with # are comments."""
    lines = Path(path).read_text().splitlines()
    tokens = tuple(
        line.strip().encode() for line in lines if line.strip() and not line.startswith("#")
    )
    if not tokens:
        raise ValueError(f"{path} holds no token")
    return tokens


def _deny(kind: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
    async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

    async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        yield  # pragma: no cover - makes this an async generator

    if kind.request_streaming and kind.response_streaming:
        return grpc.stream_stream_rpc_method_handler(streaming)
    if kind.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary)
    if kind.response_streaming:
        return grpc.unary_stream_rpc_method_handler(streaming)
    return grpc.unary_unary_rpc_method_handler(unary)


if TYPE_CHECKING:  # generic in the type stubs only
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor


class BearerTokenInterceptor(_Interceptor):
    """Rejects calls without ``authorization: Bearer <token>`` matching a known token."""

    def __init__(self, tokens: tuple[bytes, ...]) -> None:
        self._tokens = tokens

    def _allowed(self, metadata: Any) -> bool:
        for key, value in metadata or ():
            if key == "authorization":
                raw = value.encode() if isinstance(value, str) else value
                if raw[:7].lower() != b"bearer ":
                    return False
                presented = raw[7:].strip()
                # Compare against every token, always, so timing tells nothing.
                matches = [hmac.compare_digest(presented, t) for t in self._tokens]
                return any(matches)
        return False

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(EXEMPT_PREFIXES):
            return handler
        if self._allowed(handler_call_details.invocation_metadata):
            return handler
        return _deny(handler)
