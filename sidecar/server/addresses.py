"""Whether an address a server is to listen on can be bound, and if not, why.

gRPC's own bind says only that it failed (and C-core logs a line of its own
first), so ``serve`` tries each address itself before anything is started or
created: a port that is taken, a host that is not this machine's, or text
that is not ``host:port`` each get a one-line error naming the setting.
"""

from __future__ import annotations

import contextlib
import errno
import socket

from sidecar.errors import InvalidConfig

# Address forms gRPC binds that are not host:port: left to it.
SCHEMES = ("unix:", "unix-abstract:", "vsock:", "ipv4:", "ipv6:")


def split(address: str) -> tuple[str, int] | None:
    """``host:port`` / ``[v6]:port`` as (host, port); None when it is not host:port."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def check_bindable(address: str, setting: str, source: str = "") -> None:
    """Refuse ``address`` for ``setting`` unless a listening socket can be bound to it now.

    The refusal names ``source``, where the address came from (a config file,
    a variable, a flag), as every other setting's does; without one it says
    how to set it. Bound with SO_REUSEADDR, as gRPC binds, so a port left in
    TIME_WAIT by the previous run is not called taken; released at once. Port
    0 (the kernel picks) and forms other than host:port are left to gRPC.
    """
    flag = "--" + setting.replace("_", "-")
    variable = "COMPACTION_" + setting.upper()
    where = f"from {source}: " if source else ""
    if address.startswith(SCHEMES):
        return
    parts = split(address)
    if parts is None:
        hint = "" if source else f" (set {flag} or {variable})"
        raise InvalidConfig(setting, f"{where}{address!r} is not host:port{hint}")
    host, port = parts
    if port == 0:
        return
    if port > 65535:
        raise InvalidConfig(setting, f"{where}{address!r}: port {port} is out of range (1-65535)")
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise InvalidConfig(
            setting,
            f"{where}cannot listen on {address!r}: host {host!r} is unknown ({exc.strerror})",
        ) from None
    family, kind, proto, _, sockaddr = infos[0]
    with contextlib.closing(socket.socket(family, kind, proto)) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            hint = "" if source else f" (choose another with {flag} or {variable})"
            raise InvalidConfig(setting, where + _cause(address, port, exc, hint)) from None


def _cause(address: str, port: int, exc: OSError, hint: str) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"cannot listen on {address!r}: port {port} is taken by another process{hint}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {address!r}: that host is not an address of this machine"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {address!r}: port {port} needs privileges (use one above 1023)"
    return f"cannot listen on {address!r}: {exc.strerror}"
