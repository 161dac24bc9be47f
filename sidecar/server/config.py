"""Server configuration: defaults that work on a laptop, knobs for production.

Each setting comes from, in increasing priority: its default, a ``--config``
YAML/JSON file, an environment variable (``COMPACTION_*``), a flag.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.errors import InvalidConfig
from sidecar.store.urls import is_postgres_url

DEFAULT_POLICY: dict[str, Any] = {
    "trigger": {"token_count": 8000},
    "strategy": {"token_budget": {"max_tokens": 4000}, "boundary": "TURN"},
}


@dataclass(slots=True)
class ServerConfig:
    """Everything ``compaction-sidecar serve`` can be told."""

    listen: str = "127.0.0.1:50051"
    health_listen: str = ""
    metrics_listen: str = ""
    store: str = "sqlite:///./compaction.db"
    default_policy: str = field(default_factory=lambda: json.dumps(DEFAULT_POLICY))
    max_event_bytes: int = 1 << 20
    max_message_bytes: int = 16 << 20
    max_events_per_append: int = 1000
    max_streams_per_connection: int = 100
    auth_token_file: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    log_level: str = "INFO"
    log_format: str = "text"
    log_event_content: bool = False
    summarizer: str = "none"
    summary_timeout_s: float = 60.0
    gemini_model: str = ""
    gemini_base_url: str = ""
    gemini_api_version: str = ""
    gemini_timeout_s: float = 30.0
    gemini_max_retries: int = 3
    shutdown_grace_s: float = 10.0
    sqlite_synchronous: str = "NORMAL"
    store_pool_size: int = 10
    store_open_timeout_s: float = 30.0
    store_probe_interval_s: float = 5.0
    read_cache_mib: int = 64
    read_cache_idle_s: float = 30.0

    def policy(self) -> CompactionPolicy | None:
        """The default policy document, parsed; "none" means no default."""
        text = self.default_policy.strip()
        if text.lower() in ("", "none", "null"):
            return None
        if not text.startswith(("{", "[")) and Path(text).is_file():
            text = Path(text).read_text()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidConfig("default_policy", f"is not JSON or YAML: {exc}") from None
        try:
            return policy_from_dict(data)
        except InvalidConfig as exc:
            raise InvalidConfig(f"default_policy.{exc.field}", exc.description) from None

    def read_cache_bytes(self) -> tuple[int, int]:
        """``read_cache_mib`` split: (the store's decoded events, the servicer's GetContext caches).

        Half each: the store's share holds each event once; the servicer's
        holds events' wire bytes and whole answers.
        """
        total = self.read_cache_mib << 20
        return total // 2, total - total // 2

    def sqlite_path(self) -> str | None:
        """The file of a ``sqlite:///path`` store, or None for another kind."""
        if self.store.startswith("sqlite:///"):
            return self.store.removeprefix("sqlite:///")
        if self.store.startswith("sqlite://"):
            raise InvalidConfig("store", "use sqlite:///relative/path or sqlite:////absolute/path")
        return None

    def postgres_url(self) -> str | None:
        """The URL of a ``postgres://`` / ``postgresql://`` store, or None for another kind."""
        return self.store if is_postgres_url(self.store) else None


def _env_name(name: str) -> str:
    return "COMPACTION_" + name.upper()


def _to_bool(value: object) -> bool:
    """true/false, yes/no, on/off, 1/0 (any case), or a YAML/JSON boolean."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"{value!r} is not a boolean")


_KINDS: dict[str, Any] = {"int": int, "float": float, "bool": _to_bool}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; defaults are left unset so that lower layers show through."""
    parser.add_argument("--config", help="a YAML or JSON file with any of the settings below")
    for f in fields(ServerConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = _KINDS.get(str(f.type), str)
        parser.add_argument(flag, type=kind, default=None, help=f"(env {_env_name(f.name)})")


def load(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """Merge defaults, the config file, the environment and the flags."""
    environ = dict(os.environ) if environ is None else environ
    config = ServerConfig()
    known = {f.name: f for f in fields(ServerConfig)}

    def put(name: str, value: Any, source: str) -> None:
        kind = _KINDS.get(str(known[name].type), str)
        try:
            setattr(config, name, kind(value) if not isinstance(value, dict) else json.dumps(value))
        except (TypeError, ValueError):
            expected = str(known[name].type)
            raise InvalidConfig(
                name, f"from {source}: {value!r} is not a valid {expected}"
            ) from None

    if getattr(args, "config", None):
        data = yaml.safe_load(Path(args.config).read_text()) or {}
        if not isinstance(data, dict):
            raise InvalidConfig("config", "must be a mapping of settings")
        for key, value in data.items():
            name = key.replace("-", "_")
            if name not in known:
                raise InvalidConfig(f"config.{key}", "unknown setting")
            put(name, value, args.config)
    for name in known:
        env = environ.get(_env_name(name))
        if env is not None:
            put(name, env, _env_name(name))
    for name in known:
        value = getattr(args, name, None)
        if value is not None:
            put(name, value, "--" + name.replace("_", "-"))
    if config.log_format not in ("text", "json"):
        raise InvalidConfig("log_format", "must be text or json")
    if config.read_cache_mib < 0:
        raise InvalidConfig("read_cache_mib", "must be 0 (no caches) or more")
    if config.read_cache_idle_s < 0:
        raise InvalidConfig("read_cache_idle_s", "must be 0 (never release) or more")
    if config.summarizer not in ("none", "extractive", "gemini"):
        raise InvalidConfig("summarizer", "must be none, extractive or gemini")
    return config
