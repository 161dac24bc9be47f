"""Work that grows with a session's window, run off the event loop.

Planning a pass is a pure function of the active window: a walk of every
event (partitions, turn starts, tool pairs, placeholders). On a window of
200,000 events that is more than a second of Python, and on the event loop it
would make every other session's call wait for it. So the engine hands such
work to its worker threads. The loop goes on serving meanwhile; the GIL is
shared, so the work takes turns with it (every few milliseconds) rather than
holding it for the whole walk.

The work is bounded in time: past ``timeout_s`` the caller gets TimeoutError
(DEADLINE_EXCEEDED) and nothing is written, since every plan is applied only
after it is made. A caller that is cancelled stops waiting at once; work not
started yet never starts, and a walk already running ends unheard (it holds
no lock and writes nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
"""How long planning one pass may take when the caller gives no deadline of its own."""


class WindowWork:
    """Runs window-sized functions on ``executor``, bounded by a timeout."""

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
        future = loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            raise TimeoutError(
                f"planning the pass took longer than {self.timeout_s:g} s"
                " (the active window is too large to walk in time)"
            ) from None
