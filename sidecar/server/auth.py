"""Bearer-token authentication, re-read when the token file changes, with tenants.

The token file holds one token per line, optionally preceded by the name of
the tenant it belongs to (here one token without a tenant, and one each for
the tenants ``acme`` and ``globex``)::

    # lines starting with # and blank lines are ignored
    s3cr3t-shared-token
    acme    0f9c1e...
    globex  77ab20...

When any line names a tenant, the server is multi-tenant: every session
belongs to the tenant of the token that created it, and a tenant can neither
see nor touch another's sessions (they answer NOT_FOUND, exactly as absent
ones do, so nothing reveals that they exist). Lines without a tenant then
belong to the tenant ``default``: they see the sessions made with tenant-less
tokens and no others. A file that also names a tenant ``default`` is refused,
since that tenant would silently share them.

The file is checked for changes at most once a second and re-read when its
modification time, size or inode changes (a Kubernetes Secret update swaps a
symlink, which changes the inode), so tokens can be rotated without a
restart. A file that becomes unreadable or empty keeps the tokens already
loaded, with a warning: a botched rotation must not lock every client out.

Tokens are looked up by their SHA-256 digest, so the time a lookup takes says
nothing about how much of a guess was right. Health checking and reflection
are exempt: Kubernetes probes cannot send credentials, and listing services
reveals nothing about sessions.

A call's token is looked up once, as its handler starts: that one answer lets
it in and fixes its tenant (``tenancy.current_scope``), so a reload landing
while the call is set up cannot make it half-authenticated. Long-lived calls
look again later only to notice a revocation (``CompactionServicer.revoked``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from sidecar.server.interceptors import Behavior, HandlerCache, ServerInterceptor, rebuilt
from sidecar.server.tenancy import Scope, current_scope

log = logging.getLogger(__name__)

EXEMPT_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)
DEFAULT_TENANT = "default"
CHECK_INTERVAL_S = 1.0
_TENANT = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token digests and their tenants; ``multi_tenant`` when any line named one."""

    tenants: dict[bytes, str | None]
    multi_tenant: bool

    def tenant_of(self, token: bytes) -> str | bool | None:
        """The token's tenant (None when single-tenant), or False for an unknown token."""
        digest = hashlib.sha256(token).digest()
        if digest not in self.tenants:
            return False
        return self.tenants[digest]


def parse_tokens(lines: Iterable[str], where: str) -> Tokens:
    """Read token lines (see the module docstring); ValueError names the bad line."""
    entries: list[tuple[str | None, str]] = []
    tenant_less: int | None = None  # the first line without a tenant
    named_default: int | None = None  # the first line naming DEFAULT_TENANT
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 1:
            entries.append((None, parts[0]))
            tenant_less = tenant_less or number
        elif len(parts) == 2 and _TENANT.fullmatch(parts[0]):
            entries.append((parts[0], parts[1]))
            if parts[0] == DEFAULT_TENANT:
                named_default = named_default or number
        else:
            raise ValueError(
                f"{where}:{number}: expected TOKEN or TENANT TOKEN"
                " (a tenant is 1-64 letters, digits, '.', '_' or '-')"
            )
    if not entries:
        raise ValueError(f"{where} holds no token")
    if tenant_less is not None and named_default is not None:
        raise ValueError(
            f"{where}:{named_default}: the tenant {DEFAULT_TENANT!r} is the one the tokens"
            f" without a tenant belong to (line {tenant_less}), so the two would share sessions:"
            f" name this tenant otherwise, or write {DEFAULT_TENANT!r} before those tokens too"
        )
    multi = any(tenant is not None for tenant, _ in entries)
    tenants: dict[bytes, str | None] = {}
    for tenant, token in entries:
        digest = hashlib.sha256(token.encode()).digest()
        owner = (tenant or DEFAULT_TENANT) if multi else None
        if tenants.get(digest, owner) != owner:
            raise ValueError(f"{where}: one token is given to two tenants")
        tenants[digest] = owner
    return Tokens(tenants, multi)


def read_tokens(path: str) -> Tokens:
    return parse_tokens(Path(path).read_text().splitlines(), path)


class TokenFile:
    """The tokens of a file, re-read when it changes (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._tokens = read_tokens(path)  # a bad file at start is a configuration error
        self._signature = self._stat()
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def current(self) -> Tokens:
        """The tokens now in force; checks the file at most once per CHECK_INTERVAL_S."""
        now = time.monotonic()
        if now - self._checked < CHECK_INTERVAL_S:
            return self._tokens
        with self._lock:
            if now - self._checked < CHECK_INTERVAL_S:
                return self._tokens
            self._checked = now
            signature = self._stat()
            if signature is None and self._signature is not None:
                log.warning("token file %s is gone, keeping the current tokens", self.path)
                self._signature = None  # said once; the file written again is read again
            if signature is not None and signature != self._signature:
                try:
                    tokens = read_tokens(self.path)
                except (OSError, ValueError) as exc:
                    log.warning("token file not reloaded, keeping the current tokens: %s", exc)
                else:
                    if tokens.multi_tenant != self._tokens.multi_tenant:
                        # Switching modes would move every session into or out of a
                        # namespace under running clients: that takes a restart.
                        log.warning(
                            "token file not reloaded: it switches between single- and"
                            " multi-tenant, which needs a restart"
                        )
                    else:
                        self._tokens = tokens
                        log.info("token file reloaded: %d tokens", len(tokens.tenants))
                self._signature = signature
        return self._tokens

    def tenant_of(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> str | bool | None:
        """The caller's tenant from its ``authorization`` header; False when refused."""
        for key, value in metadata or ():
            if key == "authorization":
                raw = value.encode() if isinstance(value, str) else value
                if raw[:7].lower() != b"bearer ":
                    return False
                return self.current().tenant_of(raw[7:].strip())
        return False


UNAUTHENTICATED = "missing or invalid bearer token"


class BearerTokenInterceptor(ServerInterceptor):
    """Lets in calls whose ``authorization: Bearer <token>`` is a known token, in its tenant.

    The handler it hands grpc looks the token up when the call starts (once:
    see the module docstring), refuses it UNAUTHENTICATED, or sets the call's
    scope and runs the servicer's handler.
    """

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens
        self._handlers = HandlerCache()

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
        return self._handlers.get(method, handler, lambda: self._checked(handler))

    async def _admit(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """The call's one token lookup: its scope set, or the call aborted."""
        tenant = self.tokens.tenant_of(context.invocation_metadata())
        if tenant is False:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED)
        # In the handler's own task and context, so the servicer and its tasks see it.
        current_scope.set(Scope(tenant if isinstance(tenant, str) else None))

    def _checked(self, handler: grpc.RpcMethodHandler[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        admit = self._admit

        def around_stream(behavior: Behavior) -> Behavior:
            async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                await admit(context)
                async for response in behavior(request, context):
                    yield response

            return streaming

        def around_unary(behavior: Behavior) -> Behavior:
            async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                await admit(context)
                return await behavior(request, context)

            return unary

        return rebuilt(handler, around_unary=around_unary, around_stream=around_stream)
