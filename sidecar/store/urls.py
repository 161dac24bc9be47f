"""Store URLs: which store a URL selects, what no wait mends in one, how to print one safely."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote_plus, urlsplit

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def is_postgres_url(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
"""libpq's query parameters that hold a secret (the password, the client key's passphrase)."""


def redact(url: str) -> str:
    """``url`` with every secret replaced by ``***``, for logs and error messages.

    The password of ``user:password@``, and the value of each
    SECRET_PARAMETERS in the query (``?password=...``), which libpq and
    asyncpg take as well; the rest of the URL is shown as it was written.
    """
    try:
        password = urlsplit(url).password
    except ValueError:  # a malformed port or netloc: show nothing of the authority
        return url.split("://", 1)[0] + "://…"
    head, mark, query = url.partition("?")
    if password is not None:  # the first ":...@" is the authority's: a scheme holds no "@"
        head = head.replace(f":{password}@", ":***@", 1)
    if not mark:
        return head
    return head + mark + "&".join(_redacted(item) for item in query.split("&"))


def _redacted(item: str) -> str:
    """One ``name=value`` of a query, its value hidden if the name is a secret's."""
    name = item.partition("=")[0]
    return f"{name}=***" if unquote_plus(name).lower() in SECRET_PARAMETERS else item


SSL_FILES = ("sslrootcert", "sslcert", "sslkey", "sslcrl")
"""libpq's query parameters that name a file the client reads before it connects."""


def postgres_url_problem(url: str) -> str | None:
    """What is wrong with the PostgreSQL URL ``url`` that no wait would mend, or None.

    A port out of 1-65535, or not a number, in the host list
    (``host:port,host:port``) or in ``?port=``: asyncpg hands it to the
    socket, which fails with OverflowError or ValueError. A certificate or
    key file (SSL_FILES) that cannot be read: asyncpg fails with the same
    OSError as a server that is down.
    """
    authority = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    hosts = authority.rpartition("@")[2]
    ports = [_port_of(host) for host in hosts.split(",")]
    files = []
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if name == "port":
            ports.extend(value.split(","))
        elif name in SSL_FILES and value:
            files.append((name, value))
    for port in ports:
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            return f"port {port!r} in {redact(url)} is not a number from 1 to 65535"
    for name, path in files:
        if not (os.path.isfile(path) and os.access(path, os.R_OK)):
            return f"{name} {path!r} in {redact(url)} is not a file this process can read"
    return _ssl_files_problem(dict(files), url)


def _ssl_files_problem(files: dict[str, str], url: str) -> str | None:
    """The first of ``files`` (SSL_FILES, readable) that asyncpg could not load, or None.

    asyncpg loads them as below before it connects, and an SSLError there
    looks like a server that is down: every retry would fail the same way.
    """
    if not files:
        return None
    import ssl  # only for a URL that names such files: startup stays light

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if "sslrootcert" in files:
            name, what = "sslrootcert", "certificates"
            context.load_verify_locations(cafile=files["sslrootcert"])
        if "sslcrl" in files:
            name, what = "sslcrl", "a certificate revocation list"
            context.load_verify_locations(cafile=files["sslcrl"])
        if "sslcert" in files:
            name, what = "sslcert", "a certificate and its key (sslkey)"
            password = dict(parse_qsl(urlsplit(url).query)).get("sslpassword")
            context.load_cert_chain(
                files["sslcert"], files.get("sslkey"), password=lambda: password or ""
            )
    except ssl.SSLError as exc:
        return f"{name} {files[name]!r} in {redact(url)} does not hold {what}: {exc.reason or exc}"
    return None


def _port_of(host: str) -> str:
    """The port of ``host:port`` or ``[v6]:port``; empty when there is none."""
    if host.startswith("["):
        return host.partition("]")[2].removeprefix(":")
    return host.rpartition(":")[2] if ":" in host else ""
