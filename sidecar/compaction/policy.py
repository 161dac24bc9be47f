"""A session's compaction policy: a trigger and a strategy, and their plain-data form.

The plain-data form (JSON or YAML) mirrors the protobuf ``CompactionPolicy``:

```yaml
trigger: {any_of: [{turn_count: 20}, {token_count: 8000}]}
strategy: {sliding_window: {max_events: 20}, boundary: TURN}
```

A pipeline lists its steps, each a strategy of its own (pipelines do not
nest, and ``boundary`` and ``min_saved_tokens`` go on the steps):

```yaml
trigger: {token_count: 8000}
strategy: {pipeline: {steps: [{clear_tool_results: {keep_tool_uses: 3}},
                              {summarize: {max_events_to_keep: 10}}]}}
```

Every name may also be written in proto3 JSON's lowerCamelCase, and a
trigger list in the proto's own shape, as protobuf's JSON parser reads them:
the policy GetSession prints is a policy document as it stands:

```json
{"trigger": {"anyOf": {"triggers": [{"turnCount": 20}, {"tokenCount": 8000}]}},
 "strategy": {"slidingWindow": {"maxEvents": 20}, "boundary": "BOUNDARY_TURN"}}
```

Errors name fields in snake_case, as the server's do.

A policy without a trigger never compacts on its own; an explicit forced
compaction still applies its strategy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from sidecar.compaction.clear_tool_results import MAX_PLACEHOLDER_BYTES, ClearToolResults
from sidecar.compaction.pipeline import MAX_STEPS, Pipeline, Step
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize, default_overlap
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import (
    AllOf,
    Always,
    AnyOf,
    ContextFraction,
    EventCount,
    Interval,
    TokenCount,
    Trigger,
    TurnCount,
)
from sidecar.compaction.turn_window import TurnWindow
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary

WindowStrategy = SlidingWindow | TurnWindow | TokenBudget | ClearToolResults
Strategy = WindowStrategy | Summarize | Pipeline

MAX_TRIGGER_DEPTH = 8
MAX_TRIGGERS = 64
"""How many triggers one policy may hold, nested ones included: every append checks them all."""
MAX_POLICY_BYTES = 64 << 10
"""How large a policy's stored document (``CompactionPolicy.to_json``) may be.

A policy is parsed and kept per session; only a summarizer's prompts make
one large, and 64 KiB leaves them room for some 10,000 words.
"""
# Fields every strategy has, set beside its kind rather than inside it (as in the proto).
_STRATEGY_LEVEL = ("boundary", "min_saved_tokens", "max_dropped_identifiers")

_STRATEGIES: dict[
    str,
    type[SlidingWindow]
    | type[TurnWindow]
    | type[TokenBudget]
    | type[Summarize]
    | type[ClearToolResults],
] = {
    "sliding_window": SlidingWindow,
    "turn_window": TurnWindow,
    "token_budget": TokenBudget,
    "summarize": Summarize,
    "clear_tool_results": ClearToolResults,
}
_KINDS = sorted([*_STRATEGIES, Pipeline.name])


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When to compact (``trigger``, optional) and how (``strategy``)."""

    trigger: Trigger | None
    strategy: Strategy

    def to_dict(self, *, defaults: bool = True) -> dict[str, Any]:
        """The policy as plain data; ``defaults=False`` leaves out every field at its default."""
        out: dict[str, Any] = {"strategy": strategy_to_dict(self.strategy, defaults=defaults)}
        if self.trigger is not None:
            out["trigger"] = trigger_to_dict(self.trigger)
        return out

    def to_json(self, *, defaults: bool = True) -> str:
        """The compact document a session stores. ``MAX_POLICY_BYTES`` bounds it without its
        defaults (``defaults=False``): what the policy's author wrote, whatever the release
        stores beside it."""
        return json.dumps(self.to_dict(defaults=defaults), separators=(",", ":"))


def trigger_to_dict(trigger: Trigger) -> dict[str, Any]:
    match trigger:
        case TurnCount(max_turns=n):
            return {"turn_count": n}
        case TokenCount(threshold=n):
            return {"token_count": n}
        case ContextFraction(fraction=x):
            return {"context_fraction": x}
        case EventCount(max_events=n):
            return {"event_count": n}
        case Interval(turns=n):
            return {"interval_turns": n}
        case AnyOf(triggers=ts):
            return {"any_of": [trigger_to_dict(t) for t in ts]}
        case AllOf(triggers=ts):
            return {"all_of": [trigger_to_dict(t) for t in ts]}
        case Always():
            return {"always": True}
    raise TypeError(f"not a trigger: {trigger!r}")


def strategy_to_dict(strategy: Strategy, *, defaults: bool = True) -> dict[str, Any]:
    if isinstance(strategy, Pipeline):
        steps = [strategy_to_dict(step, defaults=defaults) for step in strategy.steps]
        return {strategy.name: {"steps": steps}}
    # Every size and switch as it applies, so a policy prints as written and keeps
    # its meaning if a default moves; texts (a prompt, the placeholder) and unset
    # options only when they differ, so a stored policy follows an improved prompt.
    config = {
        f.name: _plain(getattr(strategy, f.name))
        for f in fields(strategy)
        if f.name not in _STRATEGY_LEVEL
        and ((defaults and _kept_as_set(f.default)) or getattr(strategy, f.name) != f.default)
    }
    out: dict[str, Any] = {strategy.name: config, "boundary": strategy.boundary.name}
    if strategy.min_saved_tokens is not None:
        out["min_saved_tokens"] = strategy.min_saved_tokens
    if strategy.max_dropped_identifiers is not None:
        out["max_dropped_identifiers"] = strategy.max_dropped_identifiers
    return out


def _kept_as_set(default: Any) -> bool:
    """A field stored even at its default: a number or a switch (not a text, not unset)."""
    return isinstance(default, int | float)


def _plain(value: Any) -> Any:
    """A strategy field as plain data: tuples (``exclude_tools``) become lists."""
    return list(value) if isinstance(value, tuple) else value


def _int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(field, f"must be an integer, got {value!r}")
    return value


def _count(value: Any, field: str) -> int:
    """A trigger's size: checked here so a nested trigger's error names its full path."""
    if _int(value, field) < 1:
        raise InvalidConfig(field, f"must be a positive integer, got {value!r}")
    return int(value)


_Node = TypeVar("_Node")


def too_many_triggers(path: str) -> InvalidConfig:
    """The error of a trigger list at ``path`` that takes a policy past ``MAX_TRIGGERS``."""
    return InvalidConfig(
        path,
        f"makes the policy hold more than {MAX_TRIGGERS} triggers (nested ones count),"
        " the most one may hold",
    )


def check_trigger_count(
    root: _Node,
    nested: Callable[[_Node], tuple[str, Sequence[_Node]] | None],
    field: str = "trigger",
) -> None:
    """Refuse a trigger tree of more than ``MAX_TRIGGERS`` triggers before any of it is parsed.

    ``nested`` gives a node's ``any_of``/``all_of`` kind and list, or None: the
    one rule serves every form of a policy (plain data, protobuf). It counts
    level by level with ``len`` and stops once past the limit, so a list of a
    million triggers costs no more than one of 65. The error names the list
    that passed it.
    """
    count = 1
    level = [(root, field)]
    while level:
        deeper: list[tuple[_Node, str]] = []
        for node, path in level:
            found = nested(node)
            if found is None:
                continue
            kind, items = found
            count += len(items)
            if count > MAX_TRIGGERS:
                raise too_many_triggers(f"{path}.{kind}")
            deeper += ((item, f"{path}.{kind}[{i}]") for i, item in enumerate(items))
        level = deeper


_UPPER = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(name: Any) -> Any:
    """A proto3 JSON name (``maxEvents``) as its proto field name (``max_events``).

    A key that is not a string (YAML allows them) is left for the parser to refuse.
    """
    return _UPPER.sub(r"_\1", name).lower() if isinstance(name, str) else name


def snake_keys(data: Mapping[Any, Any], field: str) -> dict[Any, Any]:
    """``data`` with its keys in snake_case; one field given in both spellings is refused."""
    out: dict[Any, Any] = {}
    for key, value in data.items():
        name = snake_case(key)
        if name in out:
            raise InvalidConfig(f"{field}.{name}", "is given twice (camelCase and snake_case)")
        out[name] = value
    return out


def _trigger_list(value: Any) -> Any:
    """An ``any_of``/``all_of`` value as a list: ``[...]``, or the proto's ``{triggers: [...]}``."""
    if isinstance(value, Mapping) and set(value) == {"triggers"}:
        return value["triggers"]
    return value


def _nested_in_dict(data: Any) -> tuple[str, Sequence[Any]] | None:
    if isinstance(data, Mapping) and len(data) == 1:
        ((kind, value),) = data.items()
        kind, value = snake_case(kind), _trigger_list(value)
        if kind in ("any_of", "all_of") and isinstance(value, list):
            return kind, value
    return None  # not a list of triggers (or malformed: trigger_from_dict says how)


def trigger_from_dict(data: Any, field: str = "trigger", depth: int = 0) -> Trigger:
    """Parse one trigger; errors name the offending field by its dotted path."""
    if depth > MAX_TRIGGER_DEPTH:
        raise InvalidConfig(field, f"triggers nest deeper than {MAX_TRIGGER_DEPTH} levels")
    if not isinstance(data, Mapping) or len(data) != 1:
        raise InvalidConfig(field, "must be an object with exactly one trigger kind")
    ((written, value),) = data.items()
    kind = snake_case(written)
    path = f"{field}.{kind}"
    match kind:
        case "turn_count":
            return TurnCount(_count(value, path))
        case "token_count":
            return TokenCount(_count(value, path))
        case "context_fraction":
            try:
                return ContextFraction(value)
            except InvalidConfig as exc:
                raise InvalidConfig(path, exc.description) from None
        case "event_count":
            return EventCount(_count(value, path))
        case "interval_turns":
            return Interval(_count(value, path))
        case "any_of" | "all_of":
            value = _trigger_list(value)
            if not isinstance(value, list):
                raise InvalidConfig(path, "must be a list of triggers")
            parts = tuple(
                trigger_from_dict(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)
            )
            return AnyOf(parts) if kind == "any_of" else AllOf(parts)
        case "always":
            if value is not True:
                raise InvalidConfig(path, "must be true")
            return Always()
    raise InvalidConfig(field, f"unknown trigger kind {written!r}")


def parse_boundary(value: Any, field: str = "strategy.boundary") -> Boundary:
    if isinstance(value, Boundary):
        return value
    if isinstance(value, str):
        name = value.upper().removeprefix("BOUNDARY_")
        if name in Boundary.__members__:
            return Boundary[name]
        if name == "UNSPECIFIED":  # the proto's zero value: the default
            return Boundary.TURN
    raise InvalidConfig(field, f"must be TURN or TOOL_PAIR, got {value!r}")


def strategy_from_dict(data: Any, field: str = "strategy") -> Strategy:
    """Parse a strategy; exactly one kind plus an optional ``boundary``."""
    if not isinstance(data, Mapping):
        raise InvalidConfig(field, "must be an object")
    data = snake_keys(data, field)
    kinds = [k for k in data if k not in _STRATEGY_LEVEL]
    if len(kinds) != 1:
        raise InvalidConfig(field, f"must name exactly one strategy of {_KINDS}")
    kind = kinds[0]
    if kind == Pipeline.name:
        return _pipeline_from_dict(data, field)
    return _step_from_dict(data, kind, field)


def _pipeline_from_dict(data: Mapping[str, Any], field: str) -> Pipeline:
    """A pipeline: its steps parsed one by one, none of them a pipeline, at least one."""
    for key in _STRATEGY_LEVEL:
        if key in data:
            raise InvalidConfig(f"{field}.{key}", "is set on a pipeline's steps, not on it")
    path = f"{field}.{Pipeline.name}"
    config = data[Pipeline.name] or {}
    if not isinstance(config, Mapping):
        raise InvalidConfig(path, "must be an object")
    config = snake_keys(config, path)
    unknown = set(config) - {"steps"}
    if unknown:
        raise InvalidConfig(f"{path}.{sorted(unknown)[0]}", "unknown field")
    steps = config.get("steps") or []
    if not isinstance(steps, list):
        raise InvalidConfig(f"{path}.steps", "must be a list of strategies")
    if not steps:
        raise InvalidConfig(f"{path}.steps", "must hold at least one step")
    if len(steps) > MAX_STEPS:  # before any is parsed
        raise InvalidConfig(f"{path}.steps", f"holds {len(steps)} steps, the most is {MAX_STEPS}")
    parsed: list[Step] = []
    for index, item in enumerate(steps):
        at = f"{path}.steps[{index}]"
        if isinstance(item, Mapping) and Pipeline.name in map(snake_case, item):
            raise InvalidConfig(f"{at}.{Pipeline.name}", "pipelines do not nest")
        try:
            step = strategy_from_dict(item, at)
        except InvalidConfig as exc:
            # A strategy checks itself under "strategy."; here it is a step.
            if not exc.field.startswith(at):
                raise InvalidConfig(
                    at + exc.field.removeprefix("strategy"), exc.description
                ) from None
            raise
        assert not isinstance(step, Pipeline)  # refused just above
        parsed.append(step)
    return Pipeline(tuple(parsed))


def _step_from_dict(data: Mapping[str, Any], kind: str, field: str) -> Strategy:
    cls = _STRATEGIES.get(kind)
    if cls is None:
        raise InvalidConfig(field, f"unknown strategy {kind!r}")
    config = data[kind] or {}
    if not isinstance(config, Mapping):
        raise InvalidConfig(f"{field}.{kind}", "must be an object")
    config = snake_keys(config, f"{field}.{kind}")
    allowed = {f.name: f for f in fields(cls) if f.name not in _STRATEGY_LEVEL}
    for key, value in config.items():
        if key not in allowed:
            raise InvalidConfig(f"{field}.{kind}.{key}", "unknown field")
        declared = str(allowed[key].type)
        path = f"{field}.{kind}.{key}"
        if value is None and declared.endswith("| None"):
            continue
        if declared.startswith("int"):
            _int(value, path)
        elif declared.startswith("bool"):
            if not isinstance(value, bool):
                raise InvalidConfig(path, f"must be true or false, got {value!r}")
        elif declared.startswith("tuple"):
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise InvalidConfig(path, f"must be a list of strings, got {value!r}")
        elif declared.startswith("float"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidConfig(path, f"must be a number, got {value!r}")
        elif not isinstance(value, str):
            raise InvalidConfig(path, f"must be a string, got {value!r}")
    if cls is Summarize and config.get("overlap") is None and "max_events_to_keep" in config:
        config = {**config, "overlap": default_overlap(config["max_events_to_keep"])}
    boundary = parse_boundary(data.get("boundary", "TURN"), f"{field}.boundary")
    min_saved = data.get("min_saved_tokens")
    if min_saved is not None and (_int(min_saved, f"{field}.min_saved_tokens") < 0):
        raise InvalidConfig(f"{field}.min_saved_tokens", f"must be 0 or more, got {min_saved!r}")
    max_dropped = data.get("max_dropped_identifiers")
    if max_dropped is not None and _int(max_dropped, f"{field}.max_dropped_identifiers") < 0:
        raise InvalidConfig(
            f"{field}.max_dropped_identifiers", f"must be 0 or more, got {max_dropped!r}"
        )
    return cls(
        boundary=boundary,
        min_saved_tokens=min_saved,
        max_dropped_identifiers=max_dropped,
        **config,
    )


def policy_from_dict(data: Any, *, bounded: bool = True) -> CompactionPolicy:
    """Parse a policy from its plain-data form (a decoded JSON or YAML document).

    ``bounded`` refuses more than ``MAX_TRIGGERS`` triggers (before parsing
    them) and a document over ``MAX_POLICY_BYTES``. Only a policy already
    stored is read unbounded: it was accepted when it was written (perhaps
    before the bounds), and its session must go on working.
    """
    if not isinstance(data, Mapping):
        raise InvalidConfig("policy", "must be an object")
    data = snake_keys(data, "policy")
    unknown = set(data) - {"trigger", "strategy"}
    if unknown:
        raise InvalidConfig(f"policy.{sorted(unknown)[0]}", "unknown field")
    if "strategy" not in data:
        raise InvalidConfig("policy.strategy", "is required")
    trigger = None
    if data.get("trigger") is not None:
        if bounded:
            check_trigger_count(data["trigger"], _nested_in_dict)
        trigger = trigger_from_dict(data["trigger"])
    policy = CompactionPolicy(trigger=trigger, strategy=strategy_from_dict(data["strategy"]))
    if bounded:
        check_policy_bytes(len(policy.to_json(defaults=False)))
        _check_placeholders(policy.strategy)
        _check_summary_models(policy.strategy)
    return policy


_SUMMARY_MODEL = re.compile(r"[A-Za-z0-9._/:@-]{1,200}")
"""What a summarizer model may be named (new policies only): Gemini's names and resource
paths ("gemini-2.5-flash", "models/...", "tunedModels/...", "projects/.../endpoints/...",
"publishers/google/models/...@001"), never ".." (the Gemini SDK refuses it, which was an
INTERNAL), and short enough that an error naming it fits the status grpc lets through."""


def _check_summary_models(strategy: Strategy) -> None:
    """Refuse a summarize step's model that no summarizer can call (new policies only)."""
    steps = strategy.steps if isinstance(strategy, Pipeline) else (strategy,)
    for index, step in enumerate(steps):
        if not isinstance(step, Summarize) or not step.model:
            continue
        if not _SUMMARY_MODEL.fullmatch(step.model) or ".." in step.model:
            at = (
                f"strategy.pipeline.steps[{index}]"
                if isinstance(strategy, Pipeline)
                else "strategy"
            )
            raise InvalidConfig(
                f"{at}.summarize.model",
                "must be a model name: at most 200 characters of letters, digits and"
                " . _ / : @ -, without '..'",
            )


def _check_placeholders(strategy: Strategy) -> None:
    """Refuse a clearing placeholder template over ``MAX_PLACEHOLDER_BYTES`` (new policies only).

    Its expansion is cut there anyway; refusing says so to whoever set it.
    """
    steps = strategy.steps if isinstance(strategy, Pipeline) else (strategy,)
    for index, step in enumerate(steps):
        if not isinstance(step, ClearToolResults):
            continue
        size = len(step.placeholder.encode())
        if size > MAX_PLACEHOLDER_BYTES:
            at = (
                f"strategy.pipeline.steps[{index}]"
                if isinstance(strategy, Pipeline)
                else "strategy"
            )
            raise InvalidConfig(
                f"{at}.clear_tool_results.placeholder",
                f"is {size} bytes, the limit is {MAX_PLACEHOLDER_BYTES}",
            )


def check_policy_bytes(size: int, field: str = "policy") -> None:
    """Refuse a policy of ``size`` bytes serialized if that is over ``MAX_POLICY_BYTES``."""
    if size > MAX_POLICY_BYTES:
        raise InvalidConfig(field, f"is {size} bytes, the limit is {MAX_POLICY_BYTES}")
