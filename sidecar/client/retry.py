"""Retrying calls that are safe to repeat, on UNAVAILABLE only, with bounded backoff.

A call is safe to repeat when doing it twice has the effect of doing it once:
reads, and appends whose events all carry an id chosen before the first
attempt (the server answers a re-sent id with the stored event). Compact and
CreateSession are never retried: a lost answer leaves no way to tell "done"
from "not done" apart.

Two bounds hold every retried call: at most ``retries`` repeats, and the
call's time budget is a deadline for all attempts and backoffs together, so a
retried call never takes longer than an unretried one could.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from sidecar.client.errors import rpc_code

T = TypeVar("T")

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to repeat a call that failed with UNAVAILABLE.

    The n-th backoff (from 0) is ``initial_backoff_s * multiplier**n``, capped
    at ``max_backoff_s``, and jittered down by up to half so that clients cut
    off together do not come back together.
    """

    retries: int = 3
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    multiplier: float = 2.0

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        ceiling = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)


NO_RETRY = RetryPolicy(retries=0)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _next_delay(
    exc: grpc.RpcError, attempt: int, policy: RetryPolicy, deadline: float | None
) -> float | None:
    """The backoff before the next attempt, or None to give up and raise ``exc``."""
    if rpc_code(exc) not in RETRYABLE or attempt >= policy.retries:
        return None
    delay = policy.backoff(attempt)
    if deadline is not None and time.monotonic() + delay >= deadline:
        return None
    return delay


async def retry_async(
    attempt: Callable[[float | None], Awaitable[T]],
    policy: RetryPolicy,
    budget_s: float | None,
) -> T:
    """Await ``attempt(time_left)`` until it succeeds or may not be repeated.

    ``time_left`` is what remains of ``budget_s`` (None: no deadline); pass it
    to the call as its own timeout. The last error is raised unchanged.
    """
    deadline = _deadline(budget_s)
    number = 0
    while True:
        try:
            return await attempt(_remaining(deadline))
        except grpc.RpcError as exc:
            delay = _next_delay(exc, number, policy, deadline)
            if delay is None:
                raise
        await asyncio.sleep(delay)
        number += 1


def retry_sync(
    attempt: Callable[[float | None], T],
    policy: RetryPolicy,
    budget_s: float | None,
) -> T:
    """The blocking twin of ``retry_async``, for the sync client."""
    deadline = _deadline(budget_s)
    number = 0
    while True:
        try:
            return attempt(_remaining(deadline))
        except grpc.RpcError as exc:
            delay = _next_delay(exc, number, policy, deadline)
            if delay is None:
                raise
        time.sleep(delay)
        number += 1
