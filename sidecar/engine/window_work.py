"""Work that grows with a session's window, run off the event loop, and stopped with its caller.

Planning a pass is a pure function of the window it reads: on a window of
200,000 events a walk of more than a second of Python, which on the event
loop would make every other session's call wait for it. So the engine hands
such work to its worker threads. The loop goes on serving meanwhile; the GIL
is shared, so the work takes turns with it (every few milliseconds) rather
than holding it for the whole walk.

The work is bounded in time and ends with its caller. Past ``timeout_s`` the
caller gets TimeoutError (DEADLINE_EXCEEDED); a caller that is cancelled (its
client went away, its deadline passed) stops waiting at once. Either way the
walk itself is stopped too: work not started yet never starts, and a walk
already running gets ``Stopped`` raised inside it at its next bytecode
(CPython's ``PyThreadState_SetAsyncExc``), so the worker is free for the next
session's planning instead of finishing a plan nobody will apply. That is
safe because a walk holds no lock and writes nothing (every plan is applied
only after it is made), and the stop is sent only while the walk runs: once
it has returned, a stop it did not see yet is withdrawn before the thread
goes back to its pool.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
"""How long planning one pass may take when the caller gives no deadline of its own."""

# The same C function twice: with an exception to raise, and with NULL to withdraw one.
_raise_in = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
_withdraw_in = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


class Stopped(BaseException):
    """Raised inside a walk whose caller stopped waiting for it (never reaches a caller)."""


class _Walk:
    """One call of ``fn`` on a worker thread, which its caller can stop while it runs."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self._fn = fn
        self._lock = threading.Lock()
        self._state = "waiting"  # then running and done, or stopped at any point
        self._thread = 0

    def __call__(self) -> object:
        """Run ``fn`` (on the worker); raises Stopped if the caller stopped it first."""
        try:
            with self._lock:
                if self._state == "stopped":
                    raise Stopped
                self._state, self._thread = "running", threading.get_ident()
            try:
                return self._fn()  # a caller that stopped meanwhile ignores it
            finally:
                self._finish()
        except Stopped:
            self._finish()
            raise

    def _finish(self) -> None:
        """The walk is over: a stop sent while it ran and not raised yet is withdrawn."""
        with self._lock:
            if self._state == "stopped" and self._thread:
                _withdraw_in(self._thread, None)
            self._state = "stopped" if self._state == "stopped" else "done"

    def stop(self) -> None:
        """Stop the walk: before it starts, or inside it while it runs."""
        with self._lock:
            if self._state == "running":
                _raise_in(self._thread, Stopped)
            if self._state != "done":
                self._state = "stopped"


class WindowWork:
    """Runs window-sized functions on ``executor``, bounded by a timeout and stopped with
    their caller."""

    def __init__(self, executor: Executor, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._executor = executor
        self.timeout_s = timeout_s

    async def run(
        self,
        fn: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(*args, **kwargs)`` on a worker thread, within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        walk = _Walk(lambda: fn(*args, **kwargs))
        future = loop.run_in_executor(self._executor, walk)
        try:
            value = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            walk.stop()
            raise TimeoutError(
                f"planning the pass took longer than {self.timeout_s:g} s"
                " (the active window is too large to walk in time)"
            ) from None
        except asyncio.CancelledError:
            walk.stop()
            raise
        return value  # type: ignore[return-value]
