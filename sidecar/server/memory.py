"""Giving memory back to the machine once the server has been idle a while.

The read caches (``--read-cache-mib``) make a busy server's reads fast; a
sidecar whose agent has gone quiet should not keep holding them. Dropping
the Python objects is not enough for the process to shrink: CPython hands
small and medium blocks back to the C allocator, and glibc keeps freed heap
pages mapped until asked. ``malloc_trim(0)`` asks; measured on the memory
benchmark it takes the server from 120 to 98 MiB where clearing alone gave
118.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    trim: Callable[[int], int] | None = getattr(libc, "malloc_trim", None)
    return trim


def return_freed_memory() -> bool:
    """Collect garbage and hand freed heap back to the OS; False where that cannot be asked."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
