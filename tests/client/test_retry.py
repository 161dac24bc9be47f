"""Retries on UNAVAILABLE: only for safe calls, bounded, and never storing an event twice."""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from sidecar.client import AsyncClient, RetryPolicy, UnavailableError, with_ids
from sidecar.client.retry import NO_RETRY
from sidecar.server.app import Sidecar
from tests.client.conftest import turn, u
from tests.server.harness import address

if TYPE_CHECKING:  # generic in the type stubs only
    _Interceptor = grpc.aio.UnaryUnaryClientInterceptor[Any, Any]
else:
    _Interceptor = grpc.aio.UnaryUnaryClientInterceptor

FAST = RetryPolicy(retries=3, initial_backoff_s=0.01, max_backoff_s=0.02)


def _method(details: grpc.aio.ClientCallDetails) -> str:
    name: str | bytes = details.method
    return (name.decode() if isinstance(name, bytes) else name).rsplit("/", 1)[-1]


def _unavailable(why: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), why, None
    )


class Flaky(_Interceptor):
    """Fails the first ``failures`` calls of ``method`` with UNAVAILABLE; counts every attempt.

    With ``lose_answer`` the call reaches the server and only its answer is
    lost: the worst case for a retry, since the server did the work.
    """

    def __init__(self, method: str, failures: int = 1, *, lose_answer: bool = False) -> None:
        self.method = method
        self.failures = failures
        self.lose_answer = lose_answer
        self.attempts: Counter[str] = Counter()

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        method = _method(client_call_details)
        self.attempts[method] += 1
        if method != self.method or self.failures == 0:
            return await continuation(client_call_details, request)
        self.failures -= 1
        if self.lose_answer:
            await (await continuation(client_call_details, request))
        raise _unavailable("connection reset (simulated)")


async def test_retried_append_after_a_lost_answer_stores_each_event_once(
    sidecar: Sidecar,
) -> None:
    flaky = Flaky("AppendEvents", failures=2, lose_answer=True)
    async with AsyncClient(address(sidecar), retry_policy=FAST, interceptors=[flaky]) as client:
        handle = client.session("s1")
        await client.create_session("s1")

        result = await handle.append([u("hi"), u("no id either"), u("mine", id="e3")])
        logged = [e async for e in handle.events()]

    assert flaky.attempts["AppendEvents"] == 3
    ids = [e.id for e in logged]
    assert Counter(ids) == Counter({i: 1 for i in ids})
    assert ids == [e.id for e in result.events]
    assert [e.position for e in result.events] == [1, 2, 3]
    assert [e.text for e in logged] == ["hi", "no id either", "mine"]


async def test_retried_append_with_expected_version_is_still_a_success(
    sidecar: Sidecar,
) -> None:
    flaky = Flaky("AppendEvents", failures=1, lose_answer=True)
    async with AsyncClient(address(sidecar), retry_policy=FAST, interceptors=[flaky]) as client:
        handle = client.session("s1")
        session = await client.create_session("s1")

        result = await handle.append(turn(0), expected_version=session.version)
        logged = [e async for e in handle.events()]

    assert flaky.attempts["AppendEvents"] == 2
    assert [e.id for e in logged] == [e.id for e in result.events]
    assert len(logged) == 2


async def test_reads_are_retried(sidecar: Sidecar) -> None:
    flaky = Flaky("GetContext", failures=2)
    async with AsyncClient(address(sidecar), retry_policy=FAST, interceptors=[flaky]) as client:
        await client.session("s1").append(turn(0), create_if_missing=True)

        context = await client.session("s1").context()

    assert len(context.events) == 2
    assert flaky.attempts["GetContext"] == 3


@pytest.mark.parametrize("method", ["CreateSession", "Compact", "UpdateSession", "DeleteSession"])
async def test_calls_unsafe_to_repeat_are_not_retried(sidecar: Sidecar, method: str) -> None:
    flaky = Flaky(method)
    async with AsyncClient(address(sidecar), retry_policy=FAST, interceptors=[flaky]) as client:
        if method != "CreateSession":
            await client.session("s1").append(turn(0), create_if_missing=True)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "CreateSession": lambda: client.create_session("s1"),
            "Compact": lambda: client.session("s1").compact(force=True),
            "UpdateSession": lambda: client.update_session("s1", labels={"a": "b"}),
            "DeleteSession": lambda: client.delete_session("s1"),
        }
        with pytest.raises(UnavailableError):
            await calls[method]()

    assert flaky.attempts[method] == 1


def _dead_address() -> str:
    """An address where nothing listens: a port the OS just handed out and took back."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


async def test_retries_are_bounded_in_number() -> None:
    counter = Flaky("none")
    async with AsyncClient(_dead_address(), retry_policy=FAST, interceptors=[counter]) as client:
        with pytest.raises(UnavailableError):
            await client.get_session("s1")

    assert counter.attempts["GetSession"] == 4


async def test_retries_stop_at_the_call_deadline() -> None:
    patient = RetryPolicy(retries=100, initial_backoff_s=0.1, multiplier=1.0)
    counter = Flaky("none")
    started = time.monotonic()
    async with AsyncClient(
        _dead_address(), retry_policy=patient, default_timeout=0.5, interceptors=[counter]
    ) as client:
        with pytest.raises(UnavailableError):
            await client.get_session("s1")

    assert time.monotonic() - started < 1.5
    assert 2 <= counter.attempts["GetSession"] < 20


async def test_retries_zero_means_one_attempt() -> None:
    counter = Flaky("none")
    async with AsyncClient(_dead_address(), retries=0, interceptors=[counter]) as client:
        with pytest.raises(UnavailableError):
            await client.session("s1").append([u()])

    assert counter.attempts["AppendEvents"] == 1
    assert NO_RETRY.retries == 0


def test_with_ids_keeps_given_ids_and_fills_the_rest_once() -> None:
    given = [u("a", id="mine"), u("b")]

    once = with_ids(given)

    assert once[0].id == "mine"
    assert len(once[1].id) == 32
    assert with_ids(once) == once


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    policy = RetryPolicy(initial_backoff_s=0.1, multiplier=2.0, max_backoff_s=0.5)

    for attempt, ceiling in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.5), (10, 0.5)]:
        delays = [policy.backoff(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
