"""The Helm chart: lint, render for each mode, validate offline, check what matters.

Every scenario is rendered for Kubernetes 1.29 (the first with native sidecars
on by default) and 1.33, and each manifest is validated strictly against that
version's API schema. Then the assertions: probes hit the health port, the API
is on loopback in sidecar mode, the security context is "restricted", secrets
only arrive through secretKeyRef, and bad values are refused by the schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    KUBE_VERSIONS,
    SCENARIOS,
    Manifest,
    all_containers,
    copy_chart,
    env_of,
    find,
    helm,
    one,
    pod_specs,
    render,
    render_error,
    restricted_violations,
    sidecar_container,
    validate,
)

HEALTH_PORT = 50052
API_PORT = 50051


def args_of(container: Manifest) -> list[str]:
    return [str(arg) for arg in container["args"]]


# -- lint, render, validate ---------------------------------------------------------


@pytest.mark.parametrize("values", ["", *SCENARIOS])
def test_lint_passes_strictly(values: str) -> None:
    args = ["lint", ".", "--strict", "--kube-version", KUBE_VERSIONS[0]]
    if values:
        args += ["--values", str(Path(__file__).parent / "values" / values)]
    result = helm(*args)
    assert "0 chart(s) failed" in result.stdout


def test_helm_template_renders_on_helms_default_kubernetes_version() -> None:
    """``helm template .`` as a user first types it, with no --kube-version.

    A Helm built without its release flags defaults to Kubernetes v1.20.0, which
    the chart's kubeVersion refuses; scripts/install_helm.sh builds it as a release.
    """
    for args in (["template", "demo", "."], ["lint", ".", "--strict"]):
        result = helm(*args, check=False)
        assert result.returncode == 0, result.stderr
        assert "kubeVersion" not in result.stderr + result.stdout


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", SCENARIOS)
def test_scenario_renders_valid_kubernetes_objects(values: str, kube_version: str) -> None:
    manifests = render([values], kube_version=kube_version)
    validate(manifests, kube_version)


def test_default_values_render_no_workload() -> None:
    """Sidecar mode is included into the user's pods: on its own the chart deploys nothing."""
    assert render() == []


def test_plain_sidecar_renders_for_a_cluster_without_native_sidecars() -> None:
    manifests = render(["sidecar-plain.yaml"], kube_version="1.28.0")
    validate(manifests, "1.28.0")


def test_native_sidecar_is_refused_on_a_cluster_older_than_1_29() -> None:
    error = render_error(sets=["exampleAgent.enabled=true"], kube_version="1.28.0")
    assert "sidecar.native needs Kubernetes >= 1.29" in error
    assert "sidecar.native=false" in error


def test_image_tag_follows_the_chart_app_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["tag"] == chart["appVersion"]


# -- sidecar mode ---------------------------------------------------------------------


def test_native_sidecar_is_an_init_container_that_restarts_always() -> None:
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    assert [c["name"] for c in pod["initContainers"]] == ["compaction-sidecar"]
    assert pod["initContainers"][0]["restartPolicy"] == "Always"
    assert [c["name"] for c in pod["containers"]] == ["agent"]


def test_plain_sidecar_is_an_ordinary_container() -> None:
    pod = next(pod_specs(render(["sidecar-plain.yaml"], kube_version="1.28.0")))
    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["agent", "compaction-sidecar"]
    assert "restartPolicy" not in pod["containers"][1]


@pytest.mark.parametrize("values", ["sidecar-native.yaml", "sidecar-plain.yaml"])
def test_sidecar_api_binds_to_loopback_and_the_agent_dials_it(values: str) -> None:
    pod = next(pod_specs(render([values])))
    sidecar = sidecar_container(pod)
    args = args_of(sidecar)
    assert f"--listen=127.0.0.1:{API_PORT}" in args
    assert f"--health-listen=0.0.0.0:{HEALTH_PORT}" in args
    # Only the health port is declared: the API is not reachable from outside the pod.
    assert [p["containerPort"] for p in sidecar["ports"] if p["name"] != "compaction-mx"] == [
        HEALTH_PORT
    ]
    agent = sidecar_container(pod, "agent")
    assert env_of(agent)["COMPACTION_ADDR"]["value"] == f"127.0.0.1:{API_PORT}"
    # The startup gate: a plain-container sidecar starts with the agent, which waits on it.
    assert env_of(agent)["COMPACTION_HEALTH_ADDR"]["value"] == f"127.0.0.1:{HEALTH_PORT}"


def test_sidecar_sqlite_lives_on_the_data_volume() -> None:
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    sidecar = sidecar_container(pod)
    mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    assert mounts["compaction-data"] == "/var/lib/compaction"
    assert mounts["compaction-tmp"] == "/tmp"
    assert "--store=sqlite:////var/lib/compaction/compaction.db" in args_of(sidecar)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["compaction-data"]["emptyDir"] == {"sizeLimit": "1Gi"}


def test_sidecar_on_an_existing_claim() -> None:
    pod = next(pod_specs(render(["sidecar-plain.yaml"])))
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["compaction-data"]["persistentVolumeClaim"] == {"claimName": "agent-data"}


def test_statefulset_keeps_sqlite_on_its_claim_with_one_replica() -> None:
    manifests = render(["sidecar-statefulset.yaml"])
    statefulset = one(manifests, "StatefulSet")
    assert statefulset["spec"]["replicas"] == 1
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "compaction-data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "standard"
    pod = statefulset["spec"]["template"]["spec"]
    assert "compaction-data" not in {v["name"] for v in pod["volumes"]}
    assert not find(manifests, "Deployment")


def test_sidecar_mode_renders_no_service_or_policy() -> None:
    kinds = {m["kind"] for m in render(["sidecar-native.yaml"])}
    assert kinds == {"Deployment", "ServiceAccount"}


def test_sidecar_flags_follow_values() -> None:
    sidecar = sidecar_container(next(pod_specs(render(["sidecar-native.yaml"]))))
    args = args_of(sidecar)
    assert "--summarizer=gemini" in args
    assert "--gemini-model=gemini-2.5-flash" in args
    assert "--auth-token-file=/etc/compaction/auth/tokens" in args
    assert "--summary-timeout-s=30" in args
    (policy,) = [a for a in args if a.startswith("--default-policy=")]
    assert yaml.safe_load(policy.removeprefix("--default-policy=")) == {
        "trigger": {"turn_count": 20},
        "strategy": {"summarize": {"max_events_to_keep": 10}},
    }


@pytest.mark.parametrize(
    ("sets", "flag"),
    [
        ([], None),
        (["server.readCacheMiB=64"], "--read-cache-mib=64"),
        (["server.readCacheMiB=0"], "--read-cache-mib=0"),
    ],
)
def test_read_cache_size_reaches_the_server_only_when_set(
    sets: list[str], flag: str | None
) -> None:
    """Unset, the server's own default (sized for a sidecar) holds; 0 (off) is a setting too."""
    args = args_of(sidecar_container(server_pod(render(["service-postgres.yaml"], sets=sets))))
    assert [a for a in args if a.startswith("--read-cache-mib")] == ([flag] if flag else [])


# -- both modes: probes, security, secrets ----------------------------------------------


@pytest.mark.parametrize("values", SCENARIOS)
def test_probes_call_grpc_health_on_the_health_port(values: str) -> None:
    for pod in pod_specs(render([values])):
        if not any(c["name"] == "compaction-sidecar" for c in all_containers(pod)):
            continue  # the example agent in service mode
        sidecar = sidecar_container(pod)
        for probe in ("startupProbe", "readinessProbe"):
            assert sidecar[probe]["grpc"] == {"port": HEALTH_PORT}, probe
        # Liveness asks about the process only, so a store outage restarts no pod.
        assert sidecar["livenessProbe"]["grpc"] == {"port": HEALTH_PORT, "service": "liveness"}
        assert f"--health-listen=0.0.0.0:{HEALTH_PORT}" in args_of(sidecar)


@pytest.mark.parametrize("values", SCENARIOS)
def test_every_pod_passes_pod_security_restricted(values: str) -> None:
    pods = list(pod_specs(render([values])))
    assert pods
    for pod in pods:
        assert restricted_violations(pod) == []
        for container in all_containers(pod):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["runAsUser"] == 65532


def test_restricted_check_catches_a_weakened_context() -> None:
    """The checker itself: a privileged, root, escalating pod is reported."""
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    sidecar = sidecar_container(pod)
    sidecar["securityContext"] = {"privileged": True, "runAsUser": 0}
    pod["securityContext"] = {}
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    problems = restricted_violations(pod)
    assert "compaction-sidecar is privileged" in problems
    assert "compaction-sidecar runs as uid 0" in problems
    assert any("hostPath" in p for p in problems)
    assert any("seccomp" in p for p in problems)


@pytest.mark.parametrize("values", SCENARIOS)
def test_secrets_arrive_only_through_secret_refs(values: str) -> None:
    manifests = render([values])
    assert not find(manifests, "Secret"), "the chart must never create a Secret from values"
    secret_env = {
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "COMPACTION_STORE",
        "COMPACTION_PAGE_TOKEN_KEY",
    }
    for pod in pod_specs(manifests):
        for container in all_containers(pod):
            for name, item in env_of(container).items():
                if name in secret_env:
                    assert "value" not in item, f"{container['name']}: {name} has a plain value"
                    assert set(item["valueFrom"]) == {"secretKeyRef"}


def test_gemini_key_comes_from_the_named_secret() -> None:
    sidecar = sidecar_container(next(pod_specs(render(["sidecar-native.yaml"]))))
    assert env_of(sidecar)["GEMINI_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "gemini",
        "key": "api-key",
    }


def test_google_api_key_variable_can_be_chosen() -> None:
    sidecar = sidecar_container(
        next(
            pod_specs(
                render(
                    ["sidecar-native.yaml"],
                    sets=["summarizer.gemini.apiKey.envName=GOOGLE_API_KEY"],
                )
            )
        )
    )
    env = env_of(sidecar)
    assert "GEMINI_API_KEY" not in env
    assert env["GOOGLE_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "gemini"


# -- service mode -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service() -> list[Manifest]:
    return render(["service-postgres.yaml"])


def server_pod(manifests: list[Manifest]) -> Manifest:
    (deployment,) = [
        m
        for m in find(manifests, "Deployment")
        if m["metadata"]["name"] == "rel-compaction-sidecar"
    ]
    return deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_service_listens_on_every_address_and_the_service_targets_it(
    service: list[Manifest],
) -> None:
    sidecar = sidecar_container(server_pod(service))
    assert f"--listen=0.0.0.0:{API_PORT}" in args_of(sidecar)
    ports = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert ports["grpc"] == API_PORT
    svc = one(service, "Service")
    assert svc["spec"]["ports"] == [
        {
            "name": "grpc",
            "port": 50051,
            "targetPort": "grpc",
            "protocol": "TCP",
            "appProtocol": "grpc",
        }
    ]
    assert svc["spec"]["selector"] == {
        "app.kubernetes.io/name": "compaction-sidecar",
        "app.kubernetes.io/instance": "rel",
    }


def test_service_store_dsn_comes_from_the_postgres_secret(service: list[Manifest]) -> None:
    sidecar = sidecar_container(server_pod(service))
    env = env_of(sidecar)
    assert env["COMPACTION_STORE"]["valueFrom"]["secretKeyRef"] == {
        "name": "compaction-postgres",
        "key": "dsn",
    }
    assert env["COMPACTION_STORE_POOL_SIZE"]["value"] == "20"
    # No --store flag: it would override the environment variable.
    assert not [a for a in args_of(sidecar) if a.startswith("--store")]
    assert "compaction-data" not in {m["name"] for m in sidecar["volumeMounts"]}


def test_service_page_token_key_comes_from_its_secret(service: list[Manifest]) -> None:
    """Replicas sign page tokens with one key, so a client pages across them."""
    sidecar = sidecar_container(server_pod(service))
    assert env_of(sidecar)["COMPACTION_PAGE_TOKEN_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "compaction-page-tokens",
        "key": "page-token-key",
    }
    assert not [a for a in args_of(sidecar) if a.startswith("--page-token-key")]


def test_without_a_page_token_secret_the_server_keeps_its_own_key() -> None:
    sidecar = sidecar_container(next(pod_specs(render(["sidecar-native.yaml"]))))
    assert "COMPACTION_PAGE_TOKEN_KEY" not in env_of(sidecar)


def test_a_page_token_key_is_never_a_plain_value() -> None:
    error = render_error(sets=["pageTokenKey.value=a-secret-of-sixteen-chars"])
    assert "additional properties 'value' not allowed" in error


def test_service_tls_and_tokens_are_mounted_from_secrets(service: list[Manifest]) -> None:
    pod = server_pod(service)
    sidecar = sidecar_container(pod)
    args = args_of(sidecar)
    assert "--tls-cert=/etc/compaction/tls/tls.crt" in args
    assert "--tls-key=/etc/compaction/tls/tls.key" in args
    assert "--tls-client-ca=/etc/compaction/client-ca/ca.crt" in args
    assert "--auth-token-file=/etc/compaction/auth/tokens" in args
    mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for name, secret, directory in (
        ("compaction-tls", "compaction-tls", "/etc/compaction/tls"),
        ("compaction-client-ca", "compaction-client-ca", "/etc/compaction/client-ca"),
        ("compaction-auth", "compaction-tokens", "/etc/compaction/auth"),
    ):
        assert mounts[name]["mountPath"] == directory
        assert mounts[name]["readOnly"] is True
        assert volumes[name]["secret"]["secretName"] == secret
    assert volumes["compaction-tls"]["secret"]["items"] == [
        {"key": "tls.crt", "path": "tls.crt"},
        {"key": "tls.key", "path": "tls.key"},
    ]


def test_service_vertex_uses_workload_identity(service: list[Manifest]) -> None:
    env = env_of(sidecar_container(server_pod(service)))
    assert env["GOOGLE_GENAI_USE_VERTEXAI"]["value"] == "true"
    assert env["GOOGLE_CLOUD_PROJECT"]["value"] == "my-project"
    assert env["GOOGLE_CLOUD_LOCATION"]["value"] == "europe-west4"
    assert "GEMINI_API_KEY" not in env
    account = one(service, "ServiceAccount")
    assert account["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "compaction@my-project.iam.gserviceaccount.com"
    }
    assert server_pod(service)["serviceAccountName"] == account["metadata"]["name"]


def test_service_autoscales_the_deployment(service: list[Manifest]) -> None:
    hpa = one(service, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "rel-compaction-sidecar",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 10)
    assert {m["resource"]["name"] for m in hpa["spec"]["metrics"]} == {"cpu", "memory"}
    deployment = next(
        m for m in find(service, "Deployment") if m["metadata"]["name"] == "rel-compaction-sidecar"
    )
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"


def test_service_without_hpa_sets_replicas() -> None:
    manifests = render(["service-postgres.yaml"], sets=["autoscaling.enabled=false"])
    assert not find(manifests, "HorizontalPodAutoscaler")
    assert server_pod_deployment(manifests)["spec"]["replicas"] == 3


def server_pod_deployment(manifests: list[Manifest]) -> Manifest:
    return next(
        m
        for m in find(manifests, "Deployment")
        if m["metadata"]["name"] == "rel-compaction-sidecar"
    )


def test_service_disruption_budget(service: list[Manifest]) -> None:
    pdb = one(service, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "compaction-sidecar",
        "app.kubernetes.io/instance": "rel",
    }


def test_network_policy_admits_only_labelled_agents_to_the_api(service: list[Manifest]) -> None:
    policy = one(service, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "compaction-sidecar",
        "app.kubernetes.io/instance": "rel",
    }
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [
        {
            "podSelector": {"matchLabels": {"compaction-sidecar/client": "true"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "agents"}},
        }
    ]
    assert rule["ports"] == [{"port": API_PORT, "protocol": "TCP"}]


def test_service_example_agent_is_labelled_for_the_policy(service: list[Manifest]) -> None:
    agent = next(
        m for m in find(service, "Deployment") if m["metadata"]["name"].endswith("example-agent")
    )
    pod = agent["spec"]["template"]
    assert pod["metadata"]["labels"]["compaction-sidecar/client"] == "true"
    container = sidecar_container(pod["spec"], "agent")
    env = env_of(container)
    assert env["COMPACTION_ADDR"]["value"] == "rel-compaction-sidecar:50051"
    assert env["COMPACTION_CA_FILE"]["value"] == "/etc/compaction/server-ca/ca.crt"
    assert [c["name"] for c in all_containers(pod["spec"])] == ["agent"]


def test_metrics_annotations_only_when_enabled(service: list[Manifest]) -> None:
    annotations = server_pod_deployment(service)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9090"
    pod = server_pod_deployment(service)["spec"]["template"]["spec"]
    assert "--metrics-listen=0.0.0.0:9090" in args_of(sidecar_container(pod))
    off = render(["service-postgres.yaml"], sets=["metrics.enabled=false"])
    assert "annotations" not in server_pod_deployment(off)["spec"]["template"]["metadata"]
    off_pod = server_pod_deployment(off)["spec"]["template"]["spec"]
    assert not any(a.startswith("--metrics-listen") for a in args_of(sidecar_container(off_pod)))


def test_logs_are_json_lines_by_default() -> None:
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    assert "--log-format=json" in args_of(sidecar_container(pod))


def test_scheduling_values_reach_the_pod() -> None:
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in pod["affinity"]
    assert env_of(sidecar_container(pod))["COMPACTION_LOG_LEVEL"]["value"] == "DEBUG"


# -- values the chart refuses -----------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("bad-unknown-key.yaml", "additional properties 'nativ' not allowed"),
        ("bad-type.yaml", "/replicaCount"),
        ("bad-enum.yaml", "/summarizer/kind"),
        ("bad-plain-secret.yaml", "additional properties 'value' not allowed"),
    ],
)
def test_schema_rejects_bad_values(values: str, message: str) -> None:
    error = render_error([values])
    assert "values don't meet the specifications of the schema" in error
    assert message in error


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["mode=service"], "mode=service needs PostgreSQL"),
        (["summarizer.kind=gemini", "exampleAgent.enabled=true"], "needs summarizer.gemini.apiKey"),
        (
            ["tls.clientCA.existingSecret=ca", "exampleAgent.enabled=true"],
            "needs tls.existingSecret",
        ),
        (
            ["sidecar.storage.type=existingClaim", "exampleAgent.enabled=true"],
            "needs sidecar.storage.existingClaim",
        ),
    ],
)
def test_incomplete_settings_are_refused_with_what_to_set(sets: list[str], message: str) -> None:
    assert message in render_error(sets=sets)


def test_parent_chart_values_with_global_pass_the_schema() -> None:
    """A parent chart hands every subchart its `global` values: the schema must allow them."""
    assert render(sets=["global.imageRegistry=example.com"]) == []


# -- NOTES.txt ----------------------------------------------------------------------------


def render_notes(tmp_path: Path, sets: list[str]) -> str:
    """NOTES.txt as `helm install` would print it (helm template leaves it out)."""
    chart = copy_chart(tmp_path)
    notes = (chart / "templates" / "NOTES.txt").read_text()
    (chart / "templates" / "NOTES.txt").unlink()
    (chart / "templates" / "_notes.tpl").write_text(
        '{{- define "test.notes" }}' + notes + "{{- end }}"
    )
    (chart / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data: {notes: {{ include "test.notes" . | toJson }}}\n'
    )
    manifests = render(sets=sets, chart=chart)
    return str(one(manifests, "ConfigMap")["data"]["notes"])


def test_notes_tell_how_to_reach_and_check_the_service(tmp_path: Path) -> None:
    notes = render_notes(
        tmp_path, ["mode=service", "store.postgres.existingSecret=pg", "auth.existingSecret=tok"]
    )
    assert "rel-compaction-sidecar.agents.svc:50051" in notes
    assert "kubectl -n agents rollout status deployment/rel-compaction-sidecar" in notes
    assert "grpc.health.v1.Health/Check" in notes
    assert "compaction-sidecar/client" in notes
    assert "authorization: Bearer" in notes


def test_notes_show_the_sidecar_wiring(tmp_path: Path) -> None:
    notes = render_notes(tmp_path, ["exampleAgent.enabled=true"])
    assert 'include "compaction-sidecar.initContainers"' in notes
    assert "COMPACTION_ADDR=127.0.0.1:50051" in notes
    assert "logs deployment/rel-compaction-sidecar-example-agent -c agent" in notes
