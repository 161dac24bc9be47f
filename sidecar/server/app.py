"""``compaction-sidecar serve``: the grpc.aio server with health, reflection, auth and TLS.

Startup opens the store, builds the engine, and serves the API on ``listen``
(and health alone on ``health_listen`` when set, for Kubernetes probes that
reach the pod IP and cannot send credentials). SIGTERM or SIGINT drains:
health turns NOT_SERVING, in-flight calls get ``shutdown_grace_s``, in-flight
summaries are finished or dropped, the store is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import _async as health_aio  # health.aio, importable for the type checker
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from sidecar.compaction.calibration import uses_context_fraction
from sidecar.engine.engine import SessionEngine, TokenCounting
from sidecar.errors import InvalidConfig, StoreUnavailable
from sidecar.gen.compaction.v1 import compaction_service_pb2, compaction_service_pb2_grpc
from sidecar.providers.profiles import ModelProfiles
from sidecar.server import addresses, tracing
from sidecar.server.auth import BearerTokenInterceptor, TokenFile
from sidecar.server.config import ServerConfig
from sidecar.server.decoding import DecodeErrorInterceptor
from sidecar.server.descriptors import enable_documented_reflection
from sidecar.server.memory import return_freed_memory
from sidecar.server.servicer import CompactionServicer
from sidecar.server.streams import TRANSPORT_OPTIONS
from sidecar.store import paging
from sidecar.store.protocol import Store
from sidecar.store.urls import postgres_url_problem, redact
from sidecar.summarizer import choice
from sidecar.summarizer.protocol import Summarizer

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from sidecar.server.metrics import Metrics

log = logging.getLogger(__name__)

SERVICE = compaction_service_pb2.DESCRIPTOR.services_by_name["CompactionService"].full_name
IDLE_CHECK_MIN_S = 0.05
"""The shortest wait between two checks for a quiet spell, however short the spell."""
LIVENESS = "liveness"
"""The health service name that reports the process alone, not the store behind it."""


def open_store(config: ServerConfig) -> Store:
    path = config.sqlite_path()
    if path is not None:
        from sidecar.store.sqlite import SqliteStore

        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidConfig(
                "store", f"cannot create the directory of {path!r}: {exc.strerror or exc}"
            ) from None
        log.info("store: SQLite file %s", Path(path).resolve())
        return SqliteStore(
            path,
            synchronous=config.sqlite_synchronous,
            decoded_cache_bytes=config.read_cache_bytes()[0],
        )
    url = config.postgres_url()
    if url is not None:
        from sidecar.store.postgres import PostgresStore

        if config.store_pool_size < 1:
            raise InvalidConfig("store_pool_size", "must be at least 1")
        problem = postgres_url_problem(url)
        if problem is not None:
            raise InvalidConfig("store", problem)
        return PostgresStore(
            url,
            pool_size=config.store_pool_size,
            decoded_cache_bytes=config.read_cache_bytes()[0],
        )
    raise InvalidConfig(
        "store",
        f"unsupported store URL {redact(config.store)!r};"
        " use sqlite:///PATH or postgresql://USER@HOST:PORT/DB",
    )


async def open_store_patiently(store: Store, timeout_s: float) -> None:
    """Open ``store``, retrying while it is unavailable for up to ``timeout_s``.

    A shared database may come up after the pods that use it (or be failing
    over); waiting a little at start beats a crash loop. Errors other than
    StoreUnavailable (a schema too new, bad credentials) fail at once.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            await store.open()
            return
        except StoreUnavailable as exc:
            if loop.time() >= deadline:
                raise
            log.warning("store unavailable at start, retrying: %s", exc)
            await asyncio.sleep(1.0)


def make_summarizer(
    config: ServerConfig, environ: Mapping[str, str] | None = None
) -> Summarizer | None:
    """The configured summarizer; Gemini's key or Vertex project come from the environment.

    ``auto`` (the default) is Gemini when a key or Vertex AI is configured,
    else the offline extractive summarizer (``sidecar.summarizer.choice``).
    """
    env = os.environ if environ is None else environ
    kind = choice.resolve(config.summarizer, env)
    if kind == "extractive":
        from sidecar.summarizer.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if kind == "gemini":
        from sidecar.summarizer.gemini import GeminiSettings, GeminiSummarizer

        settings = GeminiSettings.from_env(env)
        overrides: dict[str, Any] = {
            "timeout_s": config.gemini_timeout_s,
            "max_retries": config.gemini_max_retries,
        }
        if config.gemini_model:
            overrides["model"] = config.gemini_model
        if config.gemini_base_url:
            overrides["base_url"] = config.gemini_base_url
        if config.gemini_api_version:
            overrides["api_version"] = config.gemini_api_version
        return GeminiSummarizer(replace(settings, **overrides))
    return None


def _read(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidConfig(setting, f"cannot read {path!r}: {exc.strerror or exc}") from None


def _certificates(pem: bytes, setting: str) -> None:
    """InvalidConfig naming ``setting`` unless ``pem`` holds PEM certificates."""
    import ssl  # only a server with TLS pays for it

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cadata=pem.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError, ValueError):
        raise InvalidConfig(setting, "holds no PEM certificate") from None


def _check_tls(config: ServerConfig, cert: bytes, client_ca: bytes | None) -> None:
    """The TLS files are what their settings say, checked here: grpc takes any bytes and
    then fails the bind, which would blame the listen address."""
    import ssl

    _certificates(cert, "tls_cert")
    if client_ca is not None:
        _certificates(client_ca, "tls_client_ca")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # An encrypted key gets an empty password, and fails: grpc cannot take one either.
        context.load_cert_chain(config.tls_cert, config.tls_key, password=lambda: b"")
    except ssl.SSLError as exc:
        raise InvalidConfig(
            "tls_key",
            f"is not an unencrypted PEM private key of --tls-cert's certificate"
            f" ({exc.reason or exc})",
        ) from None


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    if not (config.tls_cert or config.tls_key):
        if config.tls_client_ca:
            raise InvalidConfig("tls_client_ca", "needs --tls-cert and --tls-key")
        return None
    if not (config.tls_cert and config.tls_key):
        raise InvalidConfig("tls_cert", "--tls-cert and --tls-key go together")
    cert = _read(config.tls_cert, "tls_cert")
    key = _read(config.tls_key, "tls_key")
    client_ca = _read(config.tls_client_ca, "tls_client_ca") if config.tls_client_ca else None
    _check_tls(config, cert, client_ca)
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


@dataclass
class Sidecar:
    """A running server: its ports, its engine, and how to stop it."""

    config: ServerConfig
    engine: SessionEngine
    servicer: CompactionServicer
    server: grpc.aio.Server
    health_server: grpc.aio.Server | None
    health: health_aio.HealthServicer
    port: int
    health_port: int | None
    metrics: Metrics | None  # collected only where --metrics-listen exports them
    metrics_server: WSGIServer | None = None
    _probe: asyncio.Task[None] | None = None
    _idle: asyncio.Task[None] | None = None
    _stopped: asyncio.Event = field(default_factory=asyncio.Event)
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", SERVICE):
            await self.health.set(name, status)

    async def probe_store(self) -> None:
        """Health follows the store: NOT_SERVING while it cannot be reached."""
        healthy = True
        while True:
            await asyncio.sleep(self.config.store_probe_interval_s)
            try:
                await self.engine.store.ping()
                ok = True
            except Exception as exc:
                ok = False
                if healthy:
                    log.warning("store unreachable: %s", exc)
            if ok != healthy:
                healthy = ok
                await self.set_serving(ok)

    async def release_when_idle(self) -> None:
        """Drop the read caches and return freed memory once no call came for a while.

        ``read_cache_idle_s`` after the last call (checked a few times within
        that span); once per quiet spell. The next read rebuilds what it needs.
        """
        idle_s = self.config.read_cache_idle_s
        released = True  # a fresh server holds nothing
        while True:
            await asyncio.sleep(min(max(idle_s / 4, IDLE_CHECK_MIN_S), 5.0))
            if time.monotonic() - self.servicer.last_call < idle_s:
                released = False
                continue
            if released:
                continue
            self.servicer.drop_caches()
            drop = getattr(self.engine.store, "drop_caches", None)
            if drop is not None:
                drop()
            await asyncio.to_thread(return_freed_memory)
            released = True
            log.debug("idle for %g s: read caches dropped, freed memory returned", idle_s)

    async def stop(self, grace_s: float | None = None) -> None:
        """Drain and stop; safe to call more than once."""
        if self._stopped.is_set():
            await self._done.wait()
            return
        self._stopped.set()
        grace = self.config.shutdown_grace_s if grace_s is None else grace_s
        await self.health.enter_graceful_shutdown()
        for task in (self._probe, self._idle):
            if task is not None:
                task.cancel()
        # One grace for the whole drain: calls and the summaries in flight share it
        # (one after the other, a drain took twice the grace and more).
        await asyncio.gather(self.server.stop(grace), self.engine.close(grace, threads=False))
        self.engine.close_threads()  # after the calls drained: they count and plan on them
        if self.health_server is not None:
            await self.health_server.stop(0)
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
        aclose = getattr(self.engine.summarizer, "aclose", None)
        if aclose is not None:
            await aclose()
        await self.engine.store.close()
        self._done.set()

    async def wait(self) -> None:
        """Return once a stop has drained everything and closed the store."""
        await self._done.wait()


async def start(
    config: ServerConfig,
    *,
    summarizer: Summarizer | None = None,
    store: Store | None = None,
) -> Sidecar:
    """Open the store and start serving; returns once the ports are bound.

    Everything that can reject the configuration is checked before the store
    opens; a failure after it (a port taken) stops what was started and
    closes the store before it is raised, so a misconfigured process exits
    at once instead of hanging on the store's threads.
    """
    summarizer = summarizer or make_summarizer(config)
    default_policy = config.policy()
    if (
        default_policy is not None
        and default_policy.strategy.name == "summarize"
        and not summarizer
    ):
        raise InvalidConfig("default_policy", "summarizes, but --summarizer is none")
    if uses_context_fraction(default_policy):
        raise InvalidConfig(
            "default_policy.trigger.context_fraction",
            "needs a session model, and sessions an append creates have none: use token_count",
        )
    profiles = config.profiles()
    if summarizer is not None and tracing.enabled():
        summarizer = tracing.TracedSummarizer(summarizer)
    credentials = _credentials(config)
    tokens = None
    if config.auth_token_file:
        try:
            tokens = TokenFile(config.auth_token_file)
        except OSError as exc:
            path = config.auth_token_file
            raise InvalidConfig(
                "auth_token_file", f"cannot read {path!r}: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:
            raise InvalidConfig("auth_token_file", str(exc)) from None
    # Replicas on one PostgreSQL database share its URL (credentials included), so by
    # default they share a key and a client can page across them; set page_token_key
    # to choose one. A SQLite server's own random key is the default there.
    paging.use_key(config.page_token_key or (config.postgres_url() or ""))
    listeners = {name: getattr(config, name) for name in addresses.LISTENERS}
    addresses.check_apart(listeners)
    for setting, address in listeners.items():
        if address:  # before the store: a taken port creates no file
            addresses.check_bindable(address, setting)
    created = _new_sqlite_file(config) if store is None else None
    store = store or open_store(config)
    await open_store_patiently(store, config.store_open_timeout_s)
    undo: list[Callable[[], Awaitable[None]]] = []
    try:
        return await _serve_on(
            config, store, summarizer, default_policy, credentials, tokens, undo, profiles
        )
    except BaseException:
        for step in reversed(undo):
            with contextlib.suppress(Exception):
                await step()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(store.close(), timeout=5)
        if created is not None:  # nothing was ever served from it
            for leftover in (created, *(created.with_name(created.name + x) for x in _SIDE)):
                leftover.unlink(missing_ok=True)
        raise


_SIDE = ("-wal", "-shm", "-journal")


def _new_sqlite_file(config: ServerConfig) -> Path | None:
    """The SQLite file this start is about to create, or None (it exists, or is not a file)."""
    path = config.sqlite_path()
    if path is None or Path(path).exists():
        return None
    return Path(path)


def _close_http(server: Any) -> None:
    server.shutdown()
    server.server_close()


def _bound(server: grpc.aio.Server, address: str, setting: str, credentials: Any = None) -> int:
    """Bind ``address``; a taken or malformed address is an InvalidConfig naming the setting."""
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError:
        port = 0
    if port == 0:
        raise InvalidConfig(
            setting,
            f"cannot listen on {address!r}: gRPC could not bind it (its line above says why)",
        )
    return port


async def _serve_on(
    config: ServerConfig,
    store: Store,
    summarizer: Summarizer | None,
    default_policy: Any,
    credentials: grpc.ServerCredentials | None,
    tokens: TokenFile | None,
    undo: list[Callable[[], Awaitable[None]]],
    profiles: ModelProfiles,
) -> Sidecar:
    """The part of ``start`` after the store opened: the engine, the servers, the ports."""
    interceptors: list[grpc.aio.ServerInterceptor[Any, Any]] = []
    metrics = None
    engine_store = store
    if config.metrics_listen:
        # Collected only where exported: nothing else reads them, and without them
        # the server neither imports prometheus_client (3 MiB) nor times every call.
        from sidecar.server.metrics import Metrics, RpcMetricsInterceptor, TimedStore

        metrics = Metrics()
        engine_store = TimedStore.wrap(store, metrics)
        interceptors.append(RpcMetricsInterceptor(metrics))
    engine = SessionEngine(
        engine_store,
        observer=metrics,
        log_event_content=config.log_event_content,
        summarizer=summarizer,
        default_policy=default_policy,
        limits=config.limits(),
        summary_timeout_s=config.summary_timeout_s,
        profiles=profiles,
        token_counting=TokenCounting(config.token_counting),
    )
    undo.append(functools.partial(engine.close, 0))
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes),
        ("grpc.so_reuseport", 0),
        *TRANSPORT_OPTIONS,  # what grpc reads ahead of a stream, fixed (see streams.py)
    ]
    on_compaction_elsewhere = getattr(store, "on_compaction_elsewhere", None)
    if on_compaction_elsewhere is not None:  # a store shared by replicas: relay their news
        engine.follow_other_replicas()
        on_compaction_elsewhere(engine.relay_compaction, engine.catch_up)
    if tracing.enabled():
        interceptors.insert(0, tracing.TracingInterceptor())
    if tokens is not None:
        interceptors.append(BearerTokenInterceptor(tokens))
    # Innermost, so the safe deserializer it installs is the one the outer ones pass on.
    interceptors.append(DecodeErrorInterceptor(config.limits()))
    server = grpc.aio.server(options=options, interceptors=interceptors)
    servicer = CompactionServicer(
        engine,
        tokens,
        max_streams_per_connection=config.max_streams_per_connection,
        cache_bytes=config.read_cache_bytes()[1],
        max_message_bytes=config.max_message_bytes,
        search_timeout_s=config.search_timeout_s,
        max_inflight_bytes=config.max_inflight_mib << 20,
    )
    compaction_service_pb2_grpc.add_CompactionServiceServicer_to_server(servicer, server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_documented_reflection((SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = _bound(server, config.listen, "listen", credentials)
    health_server = None
    health_port = None
    if config.health_listen:
        health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, health_server)
        health_port = _bound(health_server, config.health_listen, "health_listen")
        await health_server.start()
        undo.append(functools.partial(health_server.stop, 0))
    metrics_server = None
    if metrics is not None:
        metrics.bind_engine(engine)
        metrics.bind_servicer(servicer)
        try:
            metrics_server = metrics.serve(config.metrics_listen)
        except (OSError, ValueError) as exc:
            raise InvalidConfig(
                "metrics_listen", f"cannot listen on {config.metrics_listen!r}: {exc}"
            ) from exc
        undo.append(functools.partial(asyncio.to_thread, _close_http, metrics_server))
    await server.start()
    undo.append(functools.partial(server.stop, 0))
    sidecar = Sidecar(
        config,
        engine,
        servicer,
        server,
        health_server,
        health_servicer,
        port,
        health_port,
        metrics,
        metrics_server,
    )
    await sidecar.set_serving(True)
    # For liveness probes: SERVING for as long as the process serves, whatever the
    # store does (restarting every pod during a database outage helps no one).
    await health_servicer.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
    sidecar._probe = asyncio.create_task(sidecar.probe_store())
    if config.read_cache_idle_s > 0:
        sidecar._idle = asyncio.create_task(sidecar.release_when_idle())
    log.info("serving %s on %s (port %d)", SERVICE, config.listen, port)
    return sidecar


async def serve(config: ServerConfig) -> None:
    """Run until SIGTERM or SIGINT, then drain.

    The handlers are set before the store is opened: a signal while the server
    still waits for its database (``--store-open-timeout-s``) ends the wait at
    once. As PID 1 in a container a signal without a handler is ignored, and the
    pod would otherwise be killed only at the end of its grace.
    """
    loop = asyncio.get_running_loop()
    starting = asyncio.ensure_future(start(config))
    started: list[Sidecar] = []
    stops: list[asyncio.Future[None]] = []  # held, so the loop cannot collect a stop midway

    def on_signal() -> None:
        if started:
            stops.append(asyncio.ensure_future(started[0].stop()))
        else:
            starting.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, on_signal)
    try:
        sidecar = await starting
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # serve itself was cancelled, not stopped by a signal
        log.info("stopped before serving")
        return
    started.append(sidecar)
    print(f"compaction-sidecar listening on {config.listen} (port {sidecar.port})", flush=True)
    log.info("summarizer: %s", choice.resolve(config.summarizer, os.environ))
    await sidecar.wait()
    log.info("stopped")
