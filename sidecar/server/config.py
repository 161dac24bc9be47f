"""Server configuration: defaults that work on a laptop, knobs for production.

Each setting comes from, in increasing priority: its default, a ``--config``
YAML/JSON file, an environment variable (``COMPACTION_*``), a flag.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.engine.validation import Limits
from sidecar.errors import InvalidConfig
from sidecar.providers.profiles import ModelProfiles
from sidecar.server import addresses, settings
from sidecar.store.urls import is_postgres_url
from sidecar.summarizer.choice import KINDS

if TYPE_CHECKING:
    import yaml

MIN_PAGE_TOKEN_KEY_CHARS = 16
_LIMITS = Limits()  # the engine's own defaults, so the two cannot differ

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
    max_tool_calls_per_event: int = _LIMITS.max_tool_calls_per_event
    max_tool_results_per_event: int = _LIMITS.max_tool_results_per_event
    max_parts_per_event: int = _LIMITS.max_parts_per_event
    max_metadata_entries: int = _LIMITS.max_metadata_entries
    max_items_per_append: int = _LIMITS.max_items_per_append
    max_tool_name_chars: int = _LIMITS.max_tool_name_chars
    max_call_id_chars: int = _LIMITS.max_call_id_chars
    max_streams_per_connection: int = 100
    max_inflight_mib: int = 256
    auth_token_file: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    model_profiles: str = ""
    log_level: str = "INFO"
    log_format: str = "text"
    log_event_content: bool = False
    summarizer: str = "auto"
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
    read_cache_mib: int = 16
    read_cache_idle_s: float = 30.0
    search_timeout_s: float = 5.0
    token_counting: str = "when_needed"
    page_token_key: str = field(default="", repr=False)  # a secret: kept out of reprs

    def policy(self) -> CompactionPolicy | None:
        """The default policy document, parsed; "none" means no default."""
        text = self.default_policy.strip()
        if text.lower() in ("", "none", "null"):
            return None
        if not text.startswith(("{", "[")) and Path(text).is_file():
            text = Path(text).read_text()
        try:
            data = _document(text)
        except ValueError as exc:
            raise InvalidConfig("default_policy", f"is not JSON or YAML: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidConfig("default_policy", _not_a_policy(text))
        try:
            policy = policy_from_dict(data)
        except InvalidConfig as exc:
            raise InvalidConfig(f"default_policy.{exc.field}", exc.description) from None
        # Sessions hold it and answer it as the API's message: a number past what the
        # message's field holds would fail every read of them.
        from google.protobuf import json_format

        from sidecar.gen.compaction.v1 import policy_pb2
        from sidecar.server.convert import policy_out

        try:
            policy_out(policy, policy_pb2.CompactionPolicy())
        except json_format.ParseError as exc:
            raise InvalidConfig("default_policy", f"does not fit the API's policy: {exc}") from None
        return policy

    def profiles(self) -> ModelProfiles:
        """The built-in model profiles, with the ``model_profiles`` file's over them."""
        if not self.model_profiles:
            return ModelProfiles()
        try:
            return ModelProfiles.from_file(self.model_profiles)
        except InvalidConfig as exc:
            field = exc.field.replace("--model-profiles", "model_profiles")
            raise InvalidConfig(field, exc.description) from None

    def limits(self) -> Limits:
        """What one request may store, as the engine checks it."""
        return Limits(
            max_event_bytes=self.max_event_bytes,
            max_events_per_append=self.max_events_per_append,
            max_tool_calls_per_event=self.max_tool_calls_per_event,
            max_tool_results_per_event=self.max_tool_results_per_event,
            max_parts_per_event=self.max_parts_per_event,
            max_metadata_entries=self.max_metadata_entries,
            max_items_per_append=self.max_items_per_append,
            max_tool_name_chars=self.max_tool_name_chars,
            max_call_id_chars=self.max_call_id_chars,
        )

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
            path = self.store.removeprefix("sqlite:///")
            if not path or path == ":memory:" or path.startswith("file:"):
                # Each of the store's connections would open a database of its own.
                raise InvalidConfig(
                    "store", f"{self.store!r} names no file: use sqlite:///PATH to a file"
                )
            return path
        if self.store.startswith("sqlite://"):
            raise InvalidConfig("store", "use sqlite:///relative/path or sqlite:////absolute/path")
        return None

    def postgres_url(self) -> str | None:
        """The URL of a ``postgres://`` / ``postgresql://`` store, or None for another kind."""
        return self.store if is_postgres_url(self.store) else None


def _document(text: str) -> Any:
    """``text`` parsed as JSON if it is JSON, else as YAML; ValueError says what is wrong.

    PyYAML is imported only for a YAML document: a server on the default
    settings, or given JSON, never loads it (1 MiB of a server at rest). JSON
    is YAML but for corners, and there the JSON reading is the one meant
    (``1e3`` is a number in JSON, a string in PyYAML's YAML 1.1).
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except DuplicateKey:
        raise
    except ValueError:
        pass
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        """PyYAML's safe loader, refusing a key given twice in one mapping (it keeps the
        last, silently: a setting given twice would be whichever came last)."""

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Any:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *anchor": merged by construct_mapping, as PyYAML does
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue  # a key PyYAML refuses on its own
            if key in seen:
                mark = key_node.start_mark
                raise DuplicateKey(
                    f"key {key!r} given twice (line {mark.line + 1}, column {mark.column + 1})"
                )
            seen.add(key)
        return loader.construct_mapping(node, deep=True)

    UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=UniqueKeys)
    except yaml.YAMLError as exc:
        raise ValueError(_yaml_problem(exc)) from None


class DuplicateKey(ValueError):
    """A document gives one key twice in a mapping."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; DuplicateKey for a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"key {key!r} given twice")
        out[key] = value
    return out


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: what is wrong, and where."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"{problem}{where}"


def _not_a_policy(text: str) -> str:
    """What to say of a default_policy that is neither a document nor a file nor none."""
    if "/" in text or text.endswith((".yaml", ".yml", ".json")):
        return f"file {text!r} not found (give a policy as JSON or YAML, a file, or none)"
    hint = difflib.get_close_matches(text.lower(), ["none"], n=1)
    suggestion = " (did you mean none?)" if hint else ""
    return f"{text[:60]!r} is not a policy: give a JSON or YAML object, a file, or none{suggestion}"


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
_KIND_NAMES = {
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean (true/false, yes/no, on/off, 1/0)",
    "str": "a string",
}
_CHOICES = {
    "log_level": ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "log_format": ("text", "json"),
    "summarizer": KINDS,
    "sqlite_synchronous": ("OFF", "NORMAL", "FULL", "EXTRA"),
    "token_counting": ("when_needed", "background", "on_append"),
}
# The lowest value each numeric setting may take.
_AT_LEAST: dict[str, float] = {
    "max_event_bytes": 1,
    "max_message_bytes": 1,
    "max_events_per_append": 1,
    "max_tool_calls_per_event": 1,
    "max_tool_results_per_event": 1,
    "max_parts_per_event": 1,
    "max_metadata_entries": 1,
    "max_items_per_append": 1,
    "max_tool_name_chars": 1,
    "max_call_id_chars": 1,
    "max_streams_per_connection": 1,
    "max_inflight_mib": 1,
    "summary_timeout_s": 0.001,
    "gemini_timeout_s": 0.001,
    "gemini_max_retries": 0,
    "shutdown_grace_s": 0,
    "store_pool_size": 1,
    "store_open_timeout_s": 0,
    "store_probe_interval_s": 0.001,
    "read_cache_mib": 0,
    "read_cache_idle_s": 0,
    "search_timeout_s": 0.001,
}


# The highest value a numeric setting may take, where one is below what Python holds.
_AT_MOST: dict[str, float] = {
    "max_message_bytes": 2**31 - 1,  # grpc takes it as a C int
}


def _converted(kind: str, value: Any, name: str, source: str) -> Any:
    """``value`` from ``source`` as setting ``name``'s kind; InvalidConfig naming both if not.

    A YAML or JSON mapping is taken as a policy document (text) by a text
    setting only; a boolean is no number; a number is finite.
    """
    expected = _KIND_NAMES.get(kind, kind)
    if value is None:  # YAML's null (or an empty value): str() would make it the text "None"
        raise InvalidConfig(
            name, f"from {source}: has no value (null); leave it out for its default"
        )
    if kind == "str" and isinstance(value, dict | list):
        return json.dumps(value)
    if isinstance(value, dict | list) or (kind in ("int", "float") and isinstance(value, bool)):
        raise InvalidConfig(name, f"from {source}: {value!r} is not {expected}")
    if kind == "int" and isinstance(value, float) and not value.is_integer():
        # A YAML or JSON number with a fraction: int() would cut it (1.5 bytes to 1).
        raise InvalidConfig(name, f"from {source}: {value!r} is not {expected}")
    try:
        converted = _KINDS.get(kind, str)(value)
    except (TypeError, ValueError):
        raise InvalidConfig(name, f"from {source}: {value!r} is not {expected}") from None
    if kind == "float" and not math.isfinite(converted):
        raise InvalidConfig(name, f"from {source}: must be a finite number, got {value!r}")
    return converted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting; defaults are left unset so that lower layers show through.

    Flags are read as text and converted by ``load``, so that a bad value's
    error names the setting and what it must be.
    """
    parser.add_argument("--config", help="a YAML or JSON file with any of the settings below")
    documented = settings.by_name()
    for f in fields(ServerConfig):
        flag = "--" + f.name.replace("_", "-")
        help_text = settings.help_text(documented[f.name])
        parser.add_argument(flag, default=None, metavar=f.name.upper(), help=help_text)


def load(args: argparse.Namespace, environ: dict[str, str] | None = None) -> ServerConfig:
    """Merge defaults, the config file, the environment and the flags."""
    environ = dict(os.environ) if environ is None else environ
    config = ServerConfig()
    known = {f.name: f for f in fields(ServerConfig)}
    sources: dict[str, str] = {}  # where each value not a default came from

    def put(name: str, value: Any, source: str) -> None:
        sources[name] = source
        setattr(config, name, _converted(str(known[name].type), value, name, source))

    if getattr(args, "config", None):
        try:
            data = _document(Path(args.config).read_text()) or {}
        except OSError as exc:
            raise InvalidConfig("config", f"cannot read {args.config!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise InvalidConfig("config", f"{args.config!r} is not YAML or JSON: {exc}") from None
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
    try:
        check(config)
        if "max_event_bytes" in sources and config.max_event_bytes > config.max_message_bytes:
            # An event arrives in one message: the event limit set would never be the one met.
            # (Left at its default, it is simply the message limit when that is lower.)
            raise InvalidConfig(
                "max_event_bytes",
                f"must be at most max_message_bytes ({config.max_message_bytes}), "
                f"got {config.max_event_bytes}",
            )
        config.policy()  # a bad default policy fails here, naming where it came from
        addresses.check_apart(
            {name: getattr(config, name) for name in addresses.LISTENERS}, sources
        )
        for name in addresses.LISTENERS:
            if name in sources and getattr(config, name):
                # serve probes every address again, later; only here is it known where
                # this one came from, for the refusal to name.
                addresses.check_bindable(getattr(config, name), name, sources[name])
    except InvalidConfig as exc:
        source = sources.get(re.split(r"[.\[]", exc.field)[0])
        if source is None or exc.description.startswith("from "):
            raise
        raise InvalidConfig(exc.field, f"from {source}: {exc.description}") from None
    return config


def check(config: ServerConfig) -> None:
    """Refuse values no setting can take, naming the setting and what it allows."""
    for name, allowed in _CHOICES.items():
        value = getattr(config, name)
        match = next((a for a in allowed if a.lower() == str(value).lower()), None)
        if match is None:
            raise InvalidConfig(name, f"{value!r} is not one of {', '.join(allowed)}")
        setattr(config, name, match)
    for name, low in _AT_LEAST.items():
        value = getattr(config, name)
        if not math.isfinite(value):  # a ServerConfig made in code, not through load
            raise InvalidConfig(name, f"must be a finite number, got {value!r}")
        if value < low:
            bound = "more than 0" if 0 < low < 1 else f"at least {low:g}"
            raise InvalidConfig(name, f"must be {bound}, got {value!r}")
    for name, high in _AT_MOST.items():
        value = getattr(config, name)
        if value > high:
            raise InvalidConfig(name, f"must be at most {high:.0f}, got {value!r}")
    if config.page_token_key and len(config.page_token_key) < MIN_PAGE_TOKEN_KEY_CHARS:
        # The key signs what clients hold: a short one could be guessed from a token.
        raise InvalidConfig(
            "page_token_key",
            f"must be at least {MIN_PAGE_TOKEN_KEY_CHARS} characters (a random secret)",
        )
