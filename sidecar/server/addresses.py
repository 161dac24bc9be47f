"""Whether an address a server is to listen on can be bound, and if not, why.

gRPC's own bind says only that it failed (and C-core logs a line of its own
first), so ``serve`` tries each address itself before anything is started or
created: a port that is taken, a host that is not this machine's, text that
is not ``host:port``, a socket file in a folder that does not exist or one
another server listens on, each get a one-line error naming the setting.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from typing import Any
from urllib.parse import unquote

from sidecar.errors import InvalidConfig

LISTENERS = ("listen", "health_listen", "metrics_listen")
"""The settings that are addresses to listen on."""


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
    TIME_WAIT by the previous run is not called taken; released at once (port
    0 too: the host must still be this machine's). gRPC's other server forms
    are tried as it would bind them (percent-decoded, as it reads them):
    ``unix:`` its socket file, ``unix-abstract:`` and ``vsock:`` their
    sockets; ``ipv4:`` and ``ipv6:``, which its server does not bind, are
    refused with the form it takes.
    """
    where = f"from {source}: " if source else ""
    refused = f"{where}cannot listen on {address!r}: "
    if address.startswith("unix:"):
        _check_unix_path(address, setting, refused)
    elif address.startswith("unix-abstract:"):
        name = unquote(address.removeprefix("unix-abstract:"))
        if not name:
            raise InvalidConfig(setting, refused + "it names no socket")
        _probe(setting, refused, socket.AF_UNIX, "\0" + name)
    elif address.startswith("vsock:"):
        cid, _, port = address.removeprefix("vsock:").partition(":")
        if not (cid.isdigit() or cid == "-1") or not port.isdigit():
            raise InvalidConfig(setting, f"{where}{address!r} is not vsock:CID:PORT")
        if not hasattr(socket, "AF_VSOCK"):
            raise InvalidConfig(setting, refused + "vsock is not available here")
        _probe(setting, refused, socket.AF_VSOCK, (int(cid) & 0xFFFFFFFF, int(port)))
    elif address.startswith(("ipv4:", "ipv6:")):
        raise InvalidConfig(
            setting,
            refused + "gRPC's server takes host:port here ('127.0.0.1:50051', '[::1]:50051'),"
            " not the ipv4:/ipv6: forms of its clients",
        )
    else:
        _check_host_port(address, setting, source)


def _probe(setting: str, refused: str, family: int, sockaddr: Any) -> None:
    try:
        with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as probe:
            probe.bind(sockaddr)
    except (OSError, ValueError) as exc:
        raise InvalidConfig(setting, refused + _why(exc)) from None


def _check_host_port(address: str, setting: str, source: str) -> None:
    """``address``, a host:port, bound and released at once."""
    flag = "--" + setting.replace("_", "-")
    variable = "COMPACTION_" + setting.upper()
    where = f"from {source}: " if source else ""
    parts = split(address)
    if parts is None:
        hint = "" if source else f" (set {flag} or {variable})"
        raise InvalidConfig(setting, f"{where}{address!r} is not host:port{hint}")
    host, port = parts
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


def unix_path(address: str) -> str:
    """The socket file of a ``unix:path`` or ``unix:///absolute/path`` address, as gRPC reads
    it (percent-decoded: ``unix:/run/my%20app.sock`` is ``/run/my app.sock``)."""
    rest = address.removeprefix("unix:")
    return unquote(rest.removeprefix("//") if rest.startswith("///") else rest)


def _check_unix_path(address: str, setting: str, refused: str) -> None:
    """Refuse a socket file gRPC could not bind, or one another server is listening on.

    A stale socket file (nobody listening) is left for gRPC, which replaces
    it; a live one would be taken from its server without a word, so it is
    refused as a taken port is. A link is followed, as gRPC follows it. A
    path that is free is bound once and removed (only if it is still ours).
    """
    path = unix_path(address)
    if not path:
        raise InvalidConfig(setting, refused + "it names no socket file")
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.lexists(path):
            raise InvalidConfig(setting, f"{refused}{path!r} is a link to nothing") from None
        mode = None
    except (OSError, ValueError) as exc:
        raise InvalidConfig(setting, refused + _why(exc)) from None
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as probe:
        if mode is not None:
            if not stat.S_ISSOCK(mode):
                raise InvalidConfig(setting, f"{refused}{path!r} exists and is not a socket")
            if _answers(probe, path):
                raise InvalidConfig(setting, f"{refused}another process is listening on it")
            return
        try:
            probe.bind(path)
            ours = os.stat(path).st_ino
        except (OSError, ValueError) as exc:  # ValueError: a NUL; OSError: the rest
            folder = os.path.dirname(path) or "."
            cause = (
                f"folder {folder!r} does not exist"
                if isinstance(exc, FileNotFoundError) and not os.path.isdir(folder)
                else _why(exc)
            )
            raise InvalidConfig(setting, refused + cause) from None
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ours:  # not a socket another server bound meanwhile
                os.unlink(path)


def _answers(probe: socket.socket, path: str) -> bool:
    """Whether a server listens on the socket file ``path``: it accepts, or its backlog is
    full (a wedged server: a blocking connect would wait for ever)."""
    probe.setblocking(False)
    try:
        probe.connect(path)
    except (BlockingIOError, InterruptedError):
        return True  # EAGAIN: listening, its backlog full
    except OSError:
        return False  # ECONNREFUSED: nobody listens on it
    return True


def _why(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)


_ANY_HOSTS = ("", "0.0.0.0", "::", "*")


def check_apart(addresses: dict[str, str], sources: dict[str, str] | None = None) -> None:
    """Refuse two settings' host:port addresses that one listener would hold both of.

    Each alone can be bound, so the probes pass them, and the second bind
    fails only once the store is open. A wildcard host overlaps every host on
    its port; port 0 (the kernel picks) never collides; a ``unix:`` or other
    form is compared as written.
    """
    seen: list[tuple[str, str]] = []
    for setting, address in addresses.items():
        if not address:
            continue
        for earlier, other in seen:
            if _overlap(address, other):
                where = f"from {sources[setting]}: " if sources and setting in sources else ""
                raise InvalidConfig(
                    setting,
                    f"{where}{address!r} is where {earlier} listens ({other!r});"
                    " give each its own port",
                )
        seen.append((setting, address))


def _overlap(one: str, other: str) -> bool:
    a, b = split(one), split(other)
    if a is None or b is None:
        return one == other
    (host_a, port_a), (host_b, port_b) = a, b
    if port_a != port_b or port_a == 0:
        return False
    return host_a == host_b or host_a in _ANY_HOSTS or host_b in _ANY_HOSTS
