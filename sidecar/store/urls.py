"""Store URLs: which store a URL selects, and how to print one without its secret."""

from __future__ import annotations

from urllib.parse import urlsplit

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def is_postgres_url(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, for logs and error messages."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # a malformed port or netloc: show nothing of the authority
        return url.split("://", 1)[0] + "://…"
    if password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{password}@", ":***@", 1)).geturl()
