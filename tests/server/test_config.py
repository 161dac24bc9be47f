"""Settings come from defaults < --config file < COMPACTION_* environment < flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.engine.validation import Limits
from sidecar.errors import InvalidConfig
from sidecar.server.config import ServerConfig, add_arguments, load


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_layers_in_order_of_priority(tmp_path: Path) -> None:
    config_file = tmp_path / "sidecar.yaml"
    config_file.write_text(
        "listen: 0.0.0.0:6000\n"
        "max-event-bytes: 2048\n"
        "log_level: DEBUG\n"
        "default_policy:\n"
        "  trigger: {turn_count: 5}\n"
        "  strategy: {sliding_window: {max_events: 7}}\n"
    )
    environ = {"COMPACTION_LISTEN": "127.0.0.1:7000", "COMPACTION_MAX_EVENT_BYTES": "4096"}
    config = load(parse("--config", str(config_file), "--max-event-bytes", "8192"), environ)
    assert config.listen == "127.0.0.1:7000"  # env beats the file
    assert config.max_event_bytes == 8192  # the flag beats env
    assert config.log_level == "DEBUG"  # the file beats the default
    policy = config.policy()
    assert policy is not None
    assert policy.strategy == SlidingWindow(max_events=7)
    assert ServerConfig().listen == "127.0.0.1:50051"


def test_the_request_shape_limits_are_settings_the_engine_gets() -> None:
    environ = {"COMPACTION_MAX_PARTS_PER_EVENT": "7", "COMPACTION_MAX_ITEMS_PER_APPEND": "9"}
    limits = load(parse("--max-tool-calls-per-event", "5"), environ).limits()
    assert (limits.max_tool_calls_per_event, limits.max_parts_per_event) == (5, 7)
    assert limits.max_items_per_append == 9
    assert ServerConfig().limits() == Limits()  # the defaults are the engine's own


def test_bad_values_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig) as info:
        load(parse(), {"COMPACTION_MAX_EVENT_BYTES": "lots"})
    assert info.value.field == "max_event_bytes"
    config_file = tmp_path / "bad.yaml"
    config_file.write_text("lissen: 1\n")
    with pytest.raises(InvalidConfig) as info:
        load(parse("--config", str(config_file)), {})
    assert info.value.field == "config.lissen"
    with pytest.raises(InvalidConfig) as info:
        load(parse("--summarizer", "gpt"), {})
    assert info.value.field == "summarizer"
    with pytest.raises(InvalidConfig) as info:
        ServerConfig(default_policy="{not: [valid").policy()
    assert info.value.field == "default_policy"
    with pytest.raises(InvalidConfig) as info:
        load(parse("--read-cache-mib", "-1"), {})
    assert info.value.field == "read_cache_mib"
    with pytest.raises(InvalidConfig) as info:
        load(parse("--read-cache-idle-s", "-1"), {})
    assert info.value.field == "read_cache_idle_s"


def test_an_event_limit_past_the_message_limit_is_refused() -> None:
    """An event travels in one message: a larger event limit would silently never apply."""
    with pytest.raises(InvalidConfig) as info:
        load(parse("--max-event-bytes", str(32 << 20)), {})
    assert info.value.field == "max_event_bytes"
    assert "max_message_bytes (16777216)" in info.value.description
    assert "--max-event-bytes" in info.value.description  # where the value came from
    config = load(
        parse("--max-event-bytes", str(32 << 20), "--max-message-bytes", str(32 << 20)), {}
    )
    assert config.max_event_bytes == config.max_message_bytes == 32 << 20
    # left at its default, the event limit may exceed a lowered message limit
    assert load(parse("--max-message-bytes", "8192"), {}).max_message_bytes == 8192


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("max_event_bytes: 1000\nlisten: 127.0.0.1:1\nmax_event_bytes: 2000\n", "(line 3"),
        ('{"max_event_bytes": 1000, "max_event_bytes": 2000}', "twice"),
    ],
    ids=["yaml", "json"],
)
def test_a_setting_given_twice_in_the_config_file_is_refused(
    tmp_path: Path, text: str, where: str
) -> None:
    """The parsers keep the last of two, silently: which one the operator meant is unknown."""
    config_file = tmp_path / "twice.yaml"
    config_file.write_text(text)
    with pytest.raises(InvalidConfig) as info:
        load(parse("--config", str(config_file)), {})
    assert info.value.field == "config"
    assert "key 'max_event_bytes' given twice" in info.value.description
    assert where in info.value.description
    with pytest.raises(InvalidConfig) as policy:
        ServerConfig(default_policy="trigger: {turn_count: 3}\ntrigger: {turn_count: 4}").policy()
    assert policy.value.field == "default_policy"
    assert "given twice" in policy.value.description
    # YAML's merge keys still merge.
    merged = tmp_path / "merged.yaml"
    merged.write_text(
        "default_policy:\n  <<: {trigger: {turn_count: 3}}\n"
        "  strategy: {sliding_window: {max_events: 4}}\n"
    )
    policy_merged = load(parse("--config", str(merged)), {}).policy()
    assert policy_merged is not None
    assert isinstance(policy_merged.strategy, SlidingWindow)
    assert policy_merged.trigger is not None


def test_a_setting_with_no_value_in_the_config_file_is_refused(tmp_path: Path) -> None:
    """``metrics_listen:`` (YAML's null) was read as the text "None"."""
    config_file = tmp_path / "empty.yaml"
    config_file.write_text("metrics_listen:\n")
    with pytest.raises(InvalidConfig) as info:
        load(parse("--config", str(config_file)), {})
    assert info.value.field == "metrics_listen"
    assert info.value.description == (
        f"from {config_file}: has no value (null); leave it out for its default"
    )


def test_read_cache_is_split_between_store_and_servicer() -> None:
    assert ServerConfig(read_cache_mib=64).read_cache_bytes() == (32 << 20, 32 << 20)
    assert ServerConfig(read_cache_mib=0).read_cache_bytes() == (0, 0)


def test_default_policy_none_means_no_default() -> None:
    assert ServerConfig(default_policy="none").policy() is None


async def test_a_summarizing_default_policy_needs_a_summarizer(tmp_path: Path) -> None:
    from tests.server.harness import running

    policy = '{"trigger": {"turn_count": 5}, "strategy": {"summarize": {}}}'
    with pytest.raises(InvalidConfig) as info:
        async with running(tmp_path, default_policy=policy):
            pass
    assert info.value.field == "default_policy"


@pytest.mark.parametrize("text", ["max_event_bytes: 1.5\n", "read_cache_mib: 0.5\n"])
def test_a_fraction_in_the_config_file_is_refused_for_a_whole_number_setting(
    tmp_path: Path, text: str
) -> None:
    """YAML reads ``1.5`` as a float: it used to become ``int(1.5)``, a 1-byte event limit
    (or ``read_cache_mib: 0.5`` the caches silently off), where the environment refuses it."""
    config_file = tmp_path / "sidecar.yaml"
    config_file.write_text(text)
    with pytest.raises(InvalidConfig, match="is not an integer") as info:
        load(parse("--config", str(config_file)), {})
    assert info.value.field == text.split(":")[0]
    config_file.write_text("max_event_bytes: 2048.0\nstore_pool_size: 4\n")
    config = load(parse("--config", str(config_file)), {})
    assert (config.max_event_bytes, config.store_pool_size) == (2048, 4)
