"""server.modelProfiles: a ConfigMap the sidecar reads through ``--model-profiles``.

Layered over every scenario (values/model-profiles.yaml), the chart must render
valid objects that mount the file read-only into the sidecar container and pass
its path; the file must be what the server's own parser takes (whole numbers,
not the floats YAML values arrive as). The schema refuses what the server
refuses, and each refused map is given to the real server too, which must
refuse it as well. A changed map changes the pod template, so the pods roll.
Last, the real server is run with the rendered arguments and the rendered
file, mounted where the kubelet would put it, and serves the profiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.providers.profiles import ModelProfile, parse_profiles
from tests.deploy.chart import (
    KUBE_VERSIONS,
    SCENARIOS,
    VALUES,
    Manifest,
    all_containers,
    find,
    helm,
    one,
    pod_specs,
    render,
    restricted_violations,
    sidecar_container,
    template_args,
    validate,
)
from tests.deploy.serving import stop, wait_serving
from tests.server.harness import free_port

PROFILES: dict[str, Any] = yaml.safe_load((VALUES / "model-profiles.yaml").read_text())["server"][
    "modelProfiles"
]
MOUNT = "/etc/compaction/model-profiles"
FILE = f"{MOUNT}/model-profiles.json"
VOLUME = "compaction-model-profiles"
SERVER = Path(sys.executable).parent / "compaction-sidecar"


def sidecar_pods(manifests: list[Manifest]) -> list[Manifest]:
    """The pod specs holding the sidecar container (not service mode's example agent)."""
    return [
        pod
        for pod in pod_specs(manifests)
        if any(c["name"] == "compaction-sidecar" for c in all_containers(pod))
    ]


def profiles_file(manifests: list[Manifest]) -> tuple[str, Any]:
    """The ConfigMap's name and its model-profiles.json, parsed."""
    config_map = one(manifests, "ConfigMap")
    assert set(config_map["data"]) == {"model-profiles.json"}
    return config_map["metadata"]["name"], json.loads(config_map["data"]["model-profiles.json"])


def expected_profiles() -> dict[str, ModelProfile]:
    return {
        name: ModelProfile(name, p["provider"], p["input_window_tokens"], p["max_output_tokens"])
        for name, p in PROFILES.items()
    }


# -- rendered and mounted ---------------------------------------------------------------


def test_lint_passes_strictly_with_profiles() -> None:
    result = helm(
        "lint",
        ".",
        "--strict",
        "--kube-version",
        KUBE_VERSIONS[0],
        "--values",
        str(VALUES / "model-profiles.yaml"),
    )
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", SCENARIOS)
def test_profiles_render_valid_objects_over_every_scenario(values: str, kube_version: str) -> None:
    manifests = render([values, "model-profiles.yaml"], kube_version=kube_version)
    validate(manifests, kube_version)
    for pod in sidecar_pods(manifests):
        assert restricted_violations(pod) == []


@pytest.mark.parametrize("values", SCENARIOS)
def test_profiles_are_mounted_read_only_and_passed_to_the_server(values: str) -> None:
    manifests = render([values, "model-profiles.yaml"])
    name, document = profiles_file(manifests)
    # The server's own parser: it refuses floats, so the numbers came out whole.
    assert parse_profiles(document) == expected_profiles()
    assert one(manifests, "ConfigMap")["immutable"] is True
    pods = sidecar_pods(manifests)
    assert pods
    for pod in pods:
        sidecar = sidecar_container(pod)
        assert [a for a in sidecar["args"] if a.startswith("--model-profiles")] == [
            f"--model-profiles={FILE}"
        ]
        (mount,) = [m for m in sidecar["volumeMounts"] if m["name"] == VOLUME]
        assert mount == {"name": VOLUME, "mountPath": MOUNT, "readOnly": True}
        (volume,) = [v for v in pod["volumes"] if v["name"] == VOLUME]
        assert volume["configMap"] == {
            "name": name,
            "defaultMode": 0o444,
            "items": [{"key": "model-profiles.json", "path": "model-profiles.json"}],
        }
        # Only the sidecar reads it.
        for container in all_containers(pod):
            if container["name"] != "compaction-sidecar":
                assert VOLUME not in {m["name"] for m in container.get("volumeMounts", [])}


def test_extra_args_still_come_last() -> None:
    """extraArgs may override any flag the chart sets, --model-profiles included."""
    manifests = render(["sidecar-native.yaml", "model-profiles.yaml"])
    args = sidecar_container(sidecar_pods(manifests)[0])["args"]
    assert args.index(f"--model-profiles={FILE}") < args.index("--summary-timeout-s=30")


@pytest.mark.parametrize("values", SCENARIOS)
def test_without_profiles_nothing_is_rendered_or_mounted(values: str) -> None:
    manifests = render([values])
    assert not find(manifests, "ConfigMap")
    for pod in sidecar_pods(manifests):
        sidecar = sidecar_container(pod)
        assert not [a for a in sidecar["args"] if a.startswith("--model-profiles")]
        assert VOLUME not in {m["name"] for m in sidecar["volumeMounts"]}
        assert VOLUME not in {v["name"] for v in pod["volumes"]}


def test_default_values_with_profiles_render_only_the_config_map() -> None:
    """Sidecar mode on its own: the ConfigMap for the pods that include the templates."""
    manifests = render(["model-profiles.yaml"])
    assert [m["kind"] for m in manifests] == ["ConfigMap"]


def test_the_config_map_name_stays_within_the_limit_for_long_release_names() -> None:
    manifests = render(
        ["model-profiles.yaml"], sets=["fullnameOverride=" + "a-very-long-release-name" * 3]
    )
    name, _ = profiles_file(manifests)
    assert len(name) <= 63
    assert name.startswith("a-very-long-release-name")


# -- a changed map rolls the pods -------------------------------------------------------


def workload(manifests: list[Manifest]) -> Manifest:
    (found,) = [
        m
        for m in manifests
        if m["kind"] in ("Deployment", "StatefulSet")
        and any(
            c["name"] == "compaction-sidecar" for c in all_containers(m["spec"]["template"]["spec"])
        )
    ]
    return found


@pytest.mark.parametrize("values", ["sidecar-native.yaml", "service-postgres.yaml"])
def test_a_changed_map_rolls_the_pods_and_an_unchanged_one_does_not(values: str) -> None:
    before = render([values, "model-profiles.yaml"])
    again = render([values, "model-profiles.yaml"])
    changed = render(
        [values, "model-profiles.yaml"],
        sets=["server.modelProfiles.my-fine-tune.max_output_tokens=8192"],
    )
    template = workload(before)["spec"]["template"]
    assert workload(again)["spec"]["template"] == template
    old_name, _ = profiles_file(before)
    new_name, document = profiles_file(changed)
    assert new_name != old_name
    assert document["models"]["my-fine-tune"]["max_output_tokens"] == 8192
    new_template = workload(changed)["spec"]["template"]
    assert new_template != template
    # ... and the ConfigMap's name is all that changed in the pod template.
    assert json.loads(json.dumps(new_template).replace(new_name, old_name)) == template


# -- refused as the server refuses --------------------------------------------------------

GOOD = {"provider": "openai", "input_window_tokens": 128000, "max_output_tokens": 16384}


@pytest.mark.parametrize(
    ("models", "chart_says", "server_says"),
    [
        (
            {"m": {**GOOD, "provider": "mistral"}},
            "at '/server/modelProfiles/m/provider': value must be one of",
            "models.m.provider",
        ),
        (
            {"m": {**GOOD, "input_window_tokens": 0}},
            "at '/server/modelProfiles/m/input_window_tokens': minimum",
            "models.m.input_window_tokens",
        ),
        (
            {"m": {**GOOD, "max_output_tokens": 1.5}},
            "at '/server/modelProfiles/m/max_output_tokens': got number, want integer",
            "models.m.max_output_tokens",
        ),
        (
            {"m": {**GOOD, "input_window_tokens": "128000"}},
            "at '/server/modelProfiles/m/input_window_tokens': got string, want integer",
            "models.m.input_window_tokens",
        ),
        (
            {"m": {**GOOD, "max_output_tokens": True}},
            "at '/server/modelProfiles/m/max_output_tokens': got boolean, want integer",
            "models.m.max_output_tokens",
        ),
        (
            {"m": {**GOOD, "input_window_tokens": 2**31}},
            "at '/server/modelProfiles/m/input_window_tokens': maximum",
            "models.m.input_window_tokens",
        ),
        (
            {"m": {**GOOD, "context_window": 1000}},
            "additional properties 'context_window' not allowed",
            "models.m.context_window",
        ),
        (
            {"m": {"provider": "openai", "input_window_tokens": 128000}},
            "missing property 'max_output_tokens'",
            "models.m.max_output_tokens",
        ),
        ({"m": "openai"}, "at '/server/modelProfiles/m': got string, want object", "models.m"),
        ({" m": GOOD}, "invalid propertyName ' m'", "a model name is 1-200 characters"),
        ({"m\u00a0": GOOD}, "invalid propertyName", "a model name is 1-200 characters"),
        ({"m" * 201: GOOD}, "invalid propertyName", "a model name is 1-200 characters"),
        (
            {"m": {**GOOD, "max_output_tokens": 128000}},
            "server.modelProfiles.m: max_output_tokens (128000) must be less than"
            " input_window_tokens (128000)",
            "models.m.max_output_tokens: must be less than input_window_tokens",
        ),
    ],
    ids=[
        "provider",
        "zero",
        "fraction",
        "string",
        "boolean",
        "over-int32",
        "unknown-key",
        "missing-key",
        "not-an-object",
        "padded-name",
        "unicode-padded-name",
        "long-name",
        "output-not-below-window",
    ],
)
def test_the_chart_refuses_what_the_server_refuses(
    models: dict[str, Any], chart_says: str, server_says: str, tmp_path: Path
) -> None:
    result = helm(
        *template_args(), "--set-json", f"server.modelProfiles={json.dumps(models)}", check=False
    )
    assert result.returncode != 0, f"helm accepted {models}:\n{result.stdout}"
    assert chart_says in result.stderr

    path = tmp_path / "model-profiles.json"
    path.write_text(json.dumps({"models": models}))
    store = f"sqlite:///{tmp_path / 'compaction.db'}"
    served = run_server(
        [f"--listen=127.0.0.1:{free_port()}", f"--store={store}", f"--model-profiles={path}"],
        tmp_path,
    )
    try:
        _, errors = served.communicate(timeout=30)
    finally:
        served.kill()
    assert served.returncode != 0, f"the server took {models}"
    (line,) = errors.strip().splitlines()
    assert line.startswith("compaction-sidecar: model_profiles: "), line
    assert server_says in line, line


def test_the_schema_takes_the_largest_window_the_server_takes() -> None:
    top = {"m": {**GOOD, "input_window_tokens": 2**31 - 1, "max_output_tokens": 1}}
    helm(*template_args(), "--set-json", f"server.modelProfiles={json.dumps(top)}")


# -- the real server loads the rendered file ----------------------------------------------


def run_server(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``compaction-sidecar serve ARGS`` from this checkout's venv, no COMPACTION_* inherited."""
    assert SERVER.is_file(), f"{SERVER} missing: run `make setup`"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("COMPACTION_")}
    return subprocess.Popen(
        [str(SERVER), "serve", *args],
        env={**inherited, **(env or {})},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def mounted(pod: Manifest, config_maps: dict[str, Manifest], root: Path) -> dict[str, Path]:
    """The sidecar's volume mounts on this machine: each one a directory under ``root``,
    a ConfigMap's items written into it as the kubelet would."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    paths: dict[str, Path] = {}
    for mount in sidecar_container(pod)["volumeMounts"]:
        local = root / mount["name"]
        local.mkdir()
        source = volumes[mount["name"]].get("configMap")
        if source is not None:
            data = config_maps[source["name"]]["data"]
            for item in source["items"]:
                (local / item["path"]).write_text(data[item["key"]])
        paths[mount["mountPath"]] = local
    return paths


def on_this_machine(args: list[str], paths: dict[str, Path], api: int, health: int) -> list[str]:
    """The rendered arguments with the pod's addresses and paths moved onto this machine."""
    moved = []
    for arg in args:
        flag, _, value = arg.partition("=")
        if flag == "--listen":
            value = f"127.0.0.1:{api}"
        elif flag == "--health-listen":
            value = f"127.0.0.1:{health}"
        for mount_path, local in paths.items():
            value = value.replace(mount_path, str(local))
        moved.append(f"{flag}={value}")
    return moved


def test_the_real_server_loads_the_rendered_file_and_serves_its_profiles(tmp_path: Path) -> None:
    manifests = render(["model-profiles.yaml"], sets=["exampleAgent.enabled=true"])
    (pod,) = sidecar_pods(manifests)
    sidecar = sidecar_container(pod)
    config_maps = {m["metadata"]["name"]: m for m in find(manifests, "ConfigMap")}
    paths = mounted(pod, config_maps, tmp_path)
    assert set(paths) == {"/tmp", "/var/lib/compaction", MOUNT}
    api, health = free_port(), free_port()
    args = on_this_machine([str(a) for a in sidecar["args"]], paths, api, health)
    assert f"--model-profiles={paths[MOUNT] / 'model-profiles.json'}" in args

    env = {e["name"]: e["value"] for e in sidecar["env"] if "value" in e}
    env["TMPDIR"] = str(paths["/tmp"])
    process = run_server(args, tmp_path, env)
    try:
        wait_serving(f"127.0.0.1:{health}", process)
        with grpc.insecure_channel(f"127.0.0.1:{api}") as channel:
            stub = pb_grpc.CompactionServiceStub(channel)

            def profile(model: str) -> tuple[str, int, int]:
                p = stub.CreateSession(
                    pb.CreateSessionRequest(session_id=f"s-{model}", model=model), timeout=10
                ).model_profile
                return p.provider, p.input_window_tokens, p.max_output_tokens

            assert profile("my-fine-tune") == ("openai", 256000, 32000)  # added
            # Overridden, a dated snapshot taking its family's profile.
            assert profile("gemini-2.5-flash-preview-09-2025") == ("gemini", 2097152, 8192)
            assert profile("gpt-4o") == ("openai", 128000, 16384)  # the built-in table stays
            with pytest.raises(grpc.RpcError) as refused:
                profile("no-such-model")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        output = stop(process)
    assert process.returncode == 0, output
