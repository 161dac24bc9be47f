"""Render the Helm chart with a real helm, validate it offline, check Pod Security.

helm is the one pinned by ``scripts/install_helm.sh`` (``make helm``), at
``.tools/bin/helm`` or ``$HELM``. A missing helm fails the tests, never skips
them: a chart nobody renders is a chart nobody checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "compaction-sidecar"
VALUES = Path(__file__).resolve().parent / "values"
HELM_VERSION = "v3.22.0"

# The oldest Kubernetes with native sidecars on by default, and a current one.
KUBE_VERSIONS = ("1.29.0", "1.33.0")

Manifest = dict[str, Any]

# The values files (under VALUES) each rendered and checked: one per way to deploy.
SCENARIOS = (
    "sidecar-native.yaml",
    "sidecar-plain.yaml",
    "sidecar-statefulset.yaml",
    "service-postgres.yaml",
)


def helm_binary() -> str:
    """The pinned helm, or a test failure that names the target installing it."""
    path = os.environ.get("HELM") or str(ROOT / ".tools" / "bin" / "helm")
    if not Path(path).is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"helm not found at {path}: run `make helm` (scripts/install_helm.sh installs "
            f"helm {HELM_VERSION} into .tools/bin), or set HELM",
            pytrace=False,
        )
    return path


def helm(*args: str, chart: Path = CHART, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm in ``chart``'s folder; no kube config: nothing here talks to a cluster."""
    result = subprocess.run(
        [helm_binary(), *args],
        cwd=chart,
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": os.devnull},
        timeout=120,
        check=False,
    )
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{result.stderr}", pytrace=False)
    return result


def template_args(
    values: Sequence[str] = (), kube_version: str = KUBE_VERSIONS[0], sets: Sequence[str] = ()
) -> list[str]:
    args = ["template", "rel", ".", "--namespace", "agents", "--kube-version", kube_version]
    for name in values:
        args += ["--values", str(VALUES / name)]
    for item in sets:
        args += ["--set", item]
    return args


def render(
    values: Sequence[str] = (),
    *,
    kube_version: str = KUBE_VERSIONS[0],
    sets: Sequence[str] = (),
    chart: Path = CHART,
) -> list[Manifest]:
    """The manifests ``helm template`` renders, parsed."""
    out = helm(*template_args(values, kube_version, sets), chart=chart).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def render_error(
    values: Sequence[str] = (), *, sets: Sequence[str] = (), kube_version: str = KUBE_VERSIONS[0]
) -> str:
    """helm's error for values that must be refused (the test fails if they are accepted)."""
    result = helm(*template_args(values, kube_version, sets), check=False)
    assert result.returncode != 0, f"helm accepted values {values} {sets}:\n{result.stdout}"
    return result.stderr


def validate(manifests: Sequence[Manifest], kube_version: str) -> None:
    """Each manifest against the Kubernetes API schema of ``kube_version``, strictly.

    kubernetes-validate ships the schemas, so this runs offline. An unknown
    kind raises instead of passing quietly (its CLI only warns).
    """
    assert manifests, "nothing rendered"
    for manifest in manifests:
        try:
            kubernetes_validate.validate(manifest, kube_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(
                f"{manifest['kind']}/{manifest['metadata']['name']} is invalid for Kubernetes "
                f"{kube_version}: {path}: {exc.message}",
                pytrace=False,
            )


def find(manifests: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: Sequence[Manifest], kind: str) -> Manifest:
    found = find(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, got {[m['metadata']['name'] for m in found]}"
    return found[0]


def pod_specs(manifests: Sequence[Manifest]) -> Iterator[Manifest]:
    for manifest in manifests:
        if manifest["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield manifest["spec"]["template"]["spec"]


def all_containers(pod: Manifest) -> list[Manifest]:
    return [
        *pod.get("initContainers", []),
        *pod.get("containers", []),
        *pod.get("ephemeralContainers", []),
    ]


def sidecar_container(pod: Manifest, name: str = "compaction-sidecar") -> Manifest:
    found = [c for c in all_containers(pod) if c["name"] == name]
    assert len(found) == 1, f"no single {name} container in {[c['name'] for c in found]}"
    return found[0]


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {item["name"]: item for item in container.get("env", [])}


_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(pod: Manifest) -> list[str]:
    """What keeps ``pod`` from the Pod Security Standard "restricted" (latest), if anything.

    Follows the published controls: the baseline ones (host namespaces, privileged,
    capabilities, hostPath and host ports, AppArmor, SELinux, /proc mount,
    seccomp, sysctls) and the restricted ones (volume types, privilege
    escalation, running as non-root, non-zero uid, seccomp, dropping ALL).
    """
    problems: list[str] = []
    pod_sc: Manifest = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            problems.append(f"pod sets {field}")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']} is {sorted(kinds)}")
    if pod_sc.get("runAsUser") == 0:
        problems.append("pod runs as uid 0")
    if pod_sc.get("sysctls"):
        problems.append("pod sets sysctls")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for container in all_containers(pod):
        name = container["name"]
        sc: Manifest = container.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{name} is privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name} does not set allowPrivilegeEscalation: false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []):
            problems.append(f"{name} does not drop ALL capabilities")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name} adds capabilities {caps['add']}")
        run_as_non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if run_as_non_root is not True:
            problems.append(f"{name} may run as root (runAsNonRoot unset or false)")
        if sc.get("runAsUser") == 0:
            problems.append(f"{name} runs as uid 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name} has seccomp profile {seccomp}")
        if sc.get("procMount", "Default") != "Default":
            problems.append(f"{name} sets procMount")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            problems.append(f"{name} uses a host port")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("user") or selinux.get("role"):
            problems.append(f"{name} sets an SELinux user or role")
        apparmor = (sc.get("appArmorProfile") or {}).get("type", "RuntimeDefault")
        if apparmor not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name} has AppArmor profile {apparmor}")
    return problems


def copy_chart(destination: Path) -> Path:
    """A copy of the chart to change for one test (the tree stays untouched)."""
    target = destination / "compaction-sidecar"
    shutil.copytree(CHART, target)
    return target
