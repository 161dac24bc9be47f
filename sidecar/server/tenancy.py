"""Tenant namespaces: how one tenant's sessions are kept out of another's sight.

In multi-tenant mode (see ``auth``) a session a client calls ``s1`` is stored
as ``acme#s1`` for tenant ``acme``. ``#`` can never appear in a session id a
client sends, so two tenants' ids can never collide, and a tenant can only
ever name sessions inside its own namespace: another tenant's session is
NOT_FOUND, just like one that does not exist. Listing and search are held to
the namespace by an id prefix in the store. Everything the server sends back
(session ids, error messages) is translated back to the client's names.

In single-tenant mode the scope is the identity, and ids are stored as sent.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from sidecar.engine.validation import check_session_id
from sidecar.model import NAMESPACE_SEPARATOR


@dataclass(frozen=True, slots=True)
class Scope:
    """One caller's view of the session ids: its tenant's namespace, or all of them."""

    tenant: str | None = None

    @property
    def prefix(self) -> str:
        return "" if self.tenant is None else self.tenant + NAMESPACE_SEPARATOR

    def inside(self, session_id: str, field: str = "session_id") -> str:
        """The stored id of a session the client names; InvalidArgument for a bad id."""
        check_session_id(session_id, field)
        return self.prefix + session_id

    def outside(self, stored_id: str) -> str:
        """The id the client knows a stored session by."""
        return stored_id.removeprefix(self.prefix)

    def scrub(self, text: str) -> str:
        """``text`` (an error message) with the namespace taken out of the ids it names."""
        return text.replace(self.prefix, "") if self.prefix else text


UNSCOPED = Scope()

current_scope: ContextVar[Scope] = ContextVar("current_scope", default=UNSCOPED)
"""The scope of the call being served; each RPC runs in its own task and context."""
