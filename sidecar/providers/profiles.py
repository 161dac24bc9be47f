"""Model profiles: what the service knows of each model a session may name.

A profile gives the provider (which request format and billing rules apply),
the input window and the output reserve, which a ``context_fraction``
trigger needs. The built-in table holds the current Gemini, OpenAI and
Anthropic models, from their providers' model pages; ``--model-profiles
FILE`` (JSON: ``{"models": {"name": {"provider", "input_window_tokens",
"max_output_tokens"}}}``) overrides entries and adds others.

Names are matched exactly, then by their longest known prefix followed by
``-``, so dated snapshots ("claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06",
"gemini-2.5-flash-preview-09-2025") take their family's profile; Gemini's
``models/`` resource prefix is ignored. A name matching nothing is unknown,
and a session may not name it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.errors import InvalidConfig

PROVIDERS = ("gemini", "openai", "anthropic")
MAX_PROFILES = 10_000
MAX_FILE_BYTES = 4 << 20
MAX_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A model's provider, input window and output reserve, in tokens.

    ``input_window_tokens`` is the most the model takes in one call, output
    included where the provider counts the two together (Anthropic, and
    OpenAI's context window); ``max_output_tokens`` is reserved out of it.
    """

    model: str
    provider: str
    input_window_tokens: int
    max_output_tokens: int

    @property
    def usable_tokens(self) -> int:
        """The window less the output reserve: what ``context_fraction`` is a fraction of."""
        return self.input_window_tokens - self.max_output_tokens


def _builtin() -> dict[str, ModelProfile]:
    rows: tuple[tuple[str, str, int, int], ...] = (
        # Gemini: 1,048,576 tokens in, 65,536 out (8,192 for the 2.0 models).
        ("gemini-3-pro-preview", "gemini", 1_048_576, 65_536),
        ("gemini-3-flash-preview", "gemini", 1_048_576, 65_536),
        ("gemini-2.5-pro", "gemini", 1_048_576, 65_536),
        ("gemini-2.5-flash", "gemini", 1_048_576, 65_536),
        ("gemini-2.5-flash-lite", "gemini", 1_048_576, 65_536),
        ("gemini-2.0-flash", "gemini", 1_048_576, 8_192),
        ("gemini-2.0-flash-lite", "gemini", 1_048_576, 8_192),
        # OpenAI: the context window (input and output together) and the most output.
        ("gpt-5.1", "openai", 400_000, 128_000),
        ("gpt-5", "openai", 400_000, 128_000),
        ("gpt-5-mini", "openai", 400_000, 128_000),
        ("gpt-5-nano", "openai", 400_000, 128_000),
        ("gpt-4.1", "openai", 1_047_576, 32_768),
        ("gpt-4.1-mini", "openai", 1_047_576, 32_768),
        ("gpt-4.1-nano", "openai", 1_047_576, 32_768),
        ("gpt-4o", "openai", 128_000, 16_384),
        ("gpt-4o-mini", "openai", 128_000, 16_384),
        ("o3", "openai", 200_000, 100_000),
        ("o4-mini", "openai", 200_000, 100_000),
        # Anthropic: a 200,000-token context window, input and output together.
        ("claude-opus-4-5", "anthropic", 200_000, 64_000),
        ("claude-opus-4-1", "anthropic", 200_000, 32_000),
        ("claude-opus-4", "anthropic", 200_000, 32_000),
        ("claude-sonnet-4-5", "anthropic", 200_000, 64_000),
        ("claude-sonnet-4", "anthropic", 200_000, 64_000),
        ("claude-haiku-4-5", "anthropic", 200_000, 64_000),
        ("claude-3-5-haiku", "anthropic", 200_000, 8_192),
    )
    return {
        name: ModelProfile(name, provider, window, output)
        for name, provider, window, output in rows
    }


BUILTIN: Mapping[str, ModelProfile] = _builtin()


class ModelProfiles:
    """The profiles a server knows: the built-in table, overridden and extended."""

    def __init__(self, profiles: Mapping[str, ModelProfile] | None = None) -> None:
        self._profiles = dict(BUILTIN if profiles is None else profiles)
        # Longest first, so "gpt-5-mini-2025-08-07" takes gpt-5-mini's, not gpt-5's.
        self._by_length = sorted(self._profiles, key=len, reverse=True)

    def __len__(self) -> int:
        return len(self._profiles)

    def find(self, model: str) -> ModelProfile | None:
        """The profile of ``model`` (see the module docstring for how names match)."""
        name = model.removeprefix("models/")
        found = self._profiles.get(name)
        if found is not None:
            return found
        for known in self._by_length:
            if name.startswith(known + "-"):
                return self._profiles[known]
        return None

    def require(self, model: str, field: str = "model") -> ModelProfile:
        """The profile of ``model``; InvalidConfig(field) when there is none."""
        found = self.find(model)
        if found is None:
            raise InvalidConfig(
                field,
                f"unknown model {model[:MAX_NAME_CHARS]!r}: no profile for it (add one with"
                " the server's --model-profiles file)",
            )
        return found

    @classmethod
    def from_file(cls, path: str | Path) -> ModelProfiles:
        """The built-in table with the file's entries over it; InvalidConfig naming the entry."""
        setting = "--model-profiles"
        try:
            with open(path, "rb") as file:
                raw = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise InvalidConfig(setting, f"cannot read {path}: {exc.strerror}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise InvalidConfig(setting, f"{path} is over {MAX_FILE_BYTES} bytes")
        try:
            document = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidConfig(setting, f"{path} is not JSON: {exc}") from None
        return cls({**BUILTIN, **parse_profiles(document, setting)})


def parse_profiles(document: Any, setting: str = "model_profiles") -> dict[str, ModelProfile]:
    """The profiles of a ``{"models": {name: {...}}}`` document, each entry checked."""
    if not isinstance(document, dict) or not isinstance(document.get("models"), dict):
        raise InvalidConfig(setting, 'must be a JSON object {"models": {"<name>": {...}}}')
    unknown = sorted(set(document) - {"models"})
    if unknown:
        raise InvalidConfig(f"{setting}: {unknown[0]}", 'is not a field; profiles go in "models"')
    models: dict[str, Any] = document["models"]
    if len(models) > MAX_PROFILES:
        raise InvalidConfig(setting, f"holds {len(models)} models, more than {MAX_PROFILES}")
    return {
        name: _profile(name, entry, f"{setting}: models.{name}") for name, entry in models.items()
    }


def _profile(name: str, entry: Any, field: str) -> ModelProfile:
    if not name or len(name) > MAX_NAME_CHARS or name != name.strip():
        raise InvalidConfig(field, f"a model name is 1-{MAX_NAME_CHARS} characters, unpadded")
    if not isinstance(entry, dict):
        raise InvalidConfig(field, "must be an object")
    unknown = sorted(set(entry) - {"provider", "input_window_tokens", "max_output_tokens"})
    if unknown:
        raise InvalidConfig(f"{field}.{unknown[0]}", "is not a profile field")
    provider = entry.get("provider")
    if provider not in PROVIDERS:
        raise InvalidConfig(f"{field}.provider", f"must be one of {', '.join(PROVIDERS)}")
    window = _tokens(entry.get("input_window_tokens"), f"{field}.input_window_tokens")
    output = _tokens(entry.get("max_output_tokens"), f"{field}.max_output_tokens")
    if output >= window:
        raise InvalidConfig(f"{field}.max_output_tokens", "must be less than input_window_tokens")
    return ModelProfile(name, provider, window, output)


def _tokens(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        raise InvalidConfig(field, f"must be a whole number of tokens from 1, got {value!r}")
    return value
