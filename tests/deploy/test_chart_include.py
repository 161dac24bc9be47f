"""The named templates, included by a user's own chart that depends on this one.

tests/deploy/parent-chart is such a chart; it is copied with this chart under
its charts/ (what `helm dependency build` would put there) and rendered.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy.chart import (
    CHART,
    KUBE_VERSIONS,
    Manifest,
    env_of,
    helm,
    one,
    render,
    restricted_violations,
    sidecar_container,
    template_args,
    validate,
)

PARENT = Path(__file__).resolve().parent / "parent-chart"


@pytest.fixture
def parent_chart(tmp_path: Path) -> Path:
    chart = tmp_path / "my-agent"
    shutil.copytree(PARENT, chart)
    shutil.copytree(CHART, chart / "charts" / "compaction-sidecar")
    return chart


def agent_pod(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "Deployment")["spec"]["template"]["spec"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_parent_chart_gets_a_native_sidecar(parent_chart: Path, kube_version: str) -> None:
    manifests = render(chart=parent_chart, kube_version=kube_version)
    validate(manifests, kube_version)
    pod = agent_pod(manifests)
    (sidecar,) = pod["initContainers"]
    assert sidecar["name"] == "compaction-sidecar"
    assert sidecar["restartPolicy"] == "Always"
    assert "--summarizer=extractive" in sidecar["args"]  # the parent's values reach it
    agent = sidecar_container(pod, "agent")
    assert env_of(agent)["COMPACTION_ADDR"]["value"] == "127.0.0.1:50051"
    assert {v["name"] for v in pod["volumes"]} == {"compaction-tmp", "compaction-data"}
    assert restricted_violations(pod) == []


def test_parent_chart_falls_back_to_a_plain_container(parent_chart: Path) -> None:
    manifests = render(
        chart=parent_chart, kube_version="1.28.0", sets=["compaction-sidecar.sidecar.native=false"]
    )
    validate(manifests, "1.28.0")
    pod = agent_pod(manifests)
    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["agent", "compaction-sidecar"]


def test_parent_chart_values_are_checked_by_the_schema(parent_chart: Path) -> None:
    result = helm(
        *template_args(sets=["compaction-sidecar.sidecar.storage.type=hostPath"]),
        chart=parent_chart,
        check=False,
    )
    assert result.returncode != 0
    assert "/sidecar/storage/type" in result.stderr


PROFILE_SETS = [
    "compaction-sidecar.server.modelProfiles.my-fine-tune.provider=openai",
    "compaction-sidecar.server.modelProfiles.my-fine-tune.input_window_tokens=128000",
    "compaction-sidecar.server.modelProfiles.my-fine-tune.max_output_tokens=16384",
]


def test_parent_chart_mounts_the_model_profiles_the_subchart_renders(parent_chart: Path) -> None:
    manifests = render(chart=parent_chart, sets=PROFILE_SETS)
    validate(manifests, KUBE_VERSIONS[0])
    config_map = one(manifests, "ConfigMap")  # rendered by the subchart, under the release
    assert config_map["metadata"]["name"].startswith("rel-compaction-sidecar-model-profiles-")
    pod = agent_pod(manifests)
    (sidecar,) = pod["initContainers"]
    assert "--model-profiles=/etc/compaction/model-profiles/model-profiles.json" in sidecar["args"]
    (mount,) = [m for m in sidecar["volumeMounts"] if m["name"] == "compaction-model-profiles"]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == "compaction-model-profiles"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert restricted_violations(pod) == []


def test_parent_chart_without_the_release_in_its_context_is_told_to_pass_it(
    parent_chart: Path,
) -> None:
    template = parent_chart / "templates" / "deployment.yaml"
    text = template.read_text()
    assert ' "Release" .Release' in text
    template.write_text(text.replace(' "Release" .Release', ""))
    render(chart=parent_chart)  # the release is needed only for the profiles' ConfigMap
    result = helm(*template_args(sets=PROFILE_SETS), chart=parent_chart, check=False)
    assert result.returncode != 0
    assert "server.modelProfiles" in result.stderr
    assert '"Capabilities" .Capabilities "Release" .Release' in result.stderr
