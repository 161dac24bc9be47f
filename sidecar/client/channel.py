"""How a client reaches the server: address, TLS and the bearer token.

Shared by the asyncio and the sync client, so both connect and authenticate
the same way. The token travels as ``authorization: Bearer <token>``
metadata on every call rather than as call credentials: gRPC refuses call
credentials on a plaintext channel, and a sidecar is often reached over
localhost without TLS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

Options = Sequence[tuple[str, Any]]

# Reconnect quickly after the sidecar restarts: it is usually local, so a
# long backoff only makes retried calls fail while the server is already up.
# Take answers of any size: the server bounds each by its --max-message-bytes
# (16 MiB by default, past gRPC's 4 MiB receive default) and says
# content_omitted past it, and a window it answers must be readable.
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.max_receive_message_length", -1),
)


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS settings, as PEM bytes.

    ``root_certificates`` unset means the system's roots. ``private_key`` and
    ``certificate_chain`` go together, for servers that require client
    certificates (mutual TLS).
    """

    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None

    def __post_init__(self) -> None:
        if (self.private_key is None) != (self.certificate_chain is None):
            raise ValueError("Tls: private_key and certificate_chain go together")

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata every call carries: the bearer token, when there is one."""
    if not token:
        return ()
    return (("authorization", f"Bearer {token}"),)


def channel_options(options: Options) -> list[tuple[str, Any]]:
    """The defaults above, overridden by the caller's options of the same name."""
    given = {name for name, _ in options}
    return [o for o in DEFAULT_OPTIONS if o[0] not in given] + list(options)
