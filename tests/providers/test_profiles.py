"""Model profiles: the built-in table, name matching, and the --model-profiles file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.errors import InvalidConfig
from sidecar.providers.profiles import BUILTIN, PROVIDERS, ModelProfiles


def test_every_built_in_profile_reserves_less_output_than_its_window() -> None:
    assert {p.provider for p in BUILTIN.values()} == set(PROVIDERS)
    for name, profile in BUILTIN.items():
        assert profile.model == name
        assert 0 < profile.max_output_tokens < profile.input_window_tokens
        assert profile.usable_tokens == profile.input_window_tokens - profile.max_output_tokens


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
    ],
)
def test_a_snapshot_takes_its_familys_profile(name: str, family: str) -> None:
    found = ModelProfiles().find(name)
    assert found is not None
    assert found.model == family


@pytest.mark.parametrize("name", ["gpt-99", "gpt-5x", "claude", "", "GEMINI-2.5-FLASH"])
def test_a_name_matching_nothing_is_unknown(name: str) -> None:
    assert ModelProfiles().find(name) is None


def test_an_unknown_model_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidConfig) as info:
        ModelProfiles().require("llama-9", "session.model")
    assert info.value.field == "session.model"
    assert "llama-9" in str(info.value)
    assert "--model-profiles" in str(info.value)


def test_a_file_overrides_and_extends_the_built_in_table(tmp_path: Path) -> None:
    path = tmp_path / "profiles.json"
    entry = {"provider": "openai", "input_window_tokens": 32_000, "max_output_tokens": 4_000}
    path.write_text(json.dumps({"models": {"gpt-4o": entry, "my-vllm-model": entry}}))
    profiles = ModelProfiles.from_file(path)
    assert len(profiles) == len(BUILTIN) + 1
    for name in ("gpt-4o", "gpt-4o-2024-08-06", "my-vllm-model"):
        found = profiles.find(name)
        assert found is not None
        assert found.usable_tokens == 28_000
    assert profiles.find("claude-opus-4-5") == BUILTIN["claude-opus-4-5"]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([], "--model-profiles"),
        ({"models": []}, "--model-profiles"),
        ({"models": {"m": {"provider": "mistral"}}}, "--model-profiles: models.m.provider"),
        (
            {"models": {"m": {"provider": "openai", "input_window_tokens": 0}}},
            "--model-profiles: models.m.input_window_tokens",
        ),
        (
            {
                "models": {
                    "m": {"provider": "openai", "input_window_tokens": 9, "max_output_tokens": 9}
                }
            },
            "--model-profiles: models.m.max_output_tokens",
        ),
        (
            {"models": {"m": {"provider": "openai", "window": 9}}},
            "--model-profiles: models.m.window",
        ),
        # A misspelt or misplaced key at the top would leave its profiles unread.
        (
            {"models": {}, "model": {"m": {"provider": "openai"}}},
            "--model-profiles: model",
        ),
    ],
)
def test_a_bad_entry_is_refused_naming_it(tmp_path: Path, document: object, field: str) -> None:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidConfig) as info:
        ModelProfiles.from_file(path)
    assert info.value.field == field


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "profiles.json"
    path.write_text("models: {}")
    with pytest.raises(InvalidConfig, match="not JSON"):
        ModelProfiles.from_file(path)
