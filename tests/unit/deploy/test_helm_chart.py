"""The Helm chart helm/nevis, checked offline (no helm binary, no cluster here).

Rendering and linting use Helm's own Go SDK through helm-python-sdk. Built-in kinds are
validated with kubernetes-validate (the Kubernetes OpenAPI schemas, strict: unknown keys are
errors); KubeRay kinds with jsonschema against the CRD schemas in ../shared/schemas/kuberay
plus the unknown-key check of tests/unit/coordinator/test_kuberay.py (the API server would
prune unknown keys silently). Charts are rendered with the default values and with the
production-like values of helm/nevis/ci/production-values.yaml.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "nevis"
PROD_VALUES = CHART / "ci" / "production-values.yaml"
KUBERAY_SCHEMAS = ROOT.parent / "shared" / "schemas" / "kuberay"
LEARNER_POLICIES = ROOT / "k8s" / "kuberay-networkpolicies.yaml"
KUBE_VERSION = "1.34.0"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml",
             "RayCronJob": "ray.io_raycronjobs.yaml"}
SECRET_NAMES = re.compile(r"DATABASE_URL|STORE_URL|PASSWORD|SECRET|TOKEN|ACCESS_KEY", re.I)
REFERENCES = ("_SECRET_NAME", "_SECRETS_PATH")  # a Secret's name, where its files are: no value

_spec = importlib.util.spec_from_file_location("render_k8s", ROOT / "deploy" / "render_k8s.py")
render_k8s = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_k8s)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys (the API server's strict decoding does)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        dupes = {k for k in keys if keys.count(k) > 1}
        if dupes:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {dupes}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _render_raw(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    rendered = helm.Chart.load(CHART).render(values or {}, name="nevis", namespace="nevis",
                                             is_install=True)
    return [doc for path, text in sorted(rendered.items()) if path.endswith(".yaml")
            for doc in yaml.load_all(text, Loader=_UniqueKeyLoader) if doc]


PROD = yaml.safe_load(PROD_VALUES.read_text())
CASES = {"default": None, "production": PROD}


@pytest.fixture(scope="module", params=sorted(CASES))
def objects(request) -> list[dict[str, Any]]:
    return _render_raw(CASES[request.param])


@pytest.fixture(scope="module")
def default_objects() -> list[dict[str, Any]]:
    return _render_raw(None)


@pytest.fixture(scope="module")
def prod_objects() -> list[dict[str, Any]]:
    return _render_raw(PROD)


@pytest.fixture(scope="module")
def crd_validators() -> dict[str, tuple[Any, dict[str, Any]]]:
    out = {}
    for kind, name in CRD_FILES.items():
        crd = yaml.load((KUBERAY_SCHEMAS / name).read_text(),
                        Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema = version["schema"]["openAPIV3Schema"]
        out[kind] = (jsonschema.validators.validator_for(schema)(schema), schema)
    return out


def unknown_keys(instance: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of ``instance`` that ``schema`` does not declare (what the API server would drop)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(instance, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in instance.items():
            if props is not None and key in props:
                found += unknown_keys(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += unknown_keys(value, extra, f"{path}.{key}")
            elif props is not None:
                found.append(f"{path}.{key}")
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(instance):
            found += unknown_keys(item, schema["items"], f"{path}[{i}]")
    return found


def _pod_specs(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod template an object holds."""
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return [(obj["kind"], spec["template"]["spec"])]
    if obj["kind"] == "CronJob":
        return [("CronJob", spec["jobTemplate"]["spec"]["template"]["spec"])]
    if obj["kind"] == "RayCluster":
        return [("head", spec["headGroupSpec"]["template"]["spec"])] + [
            (g["groupName"], g["template"]["spec"]) for g in spec["workerGroupSpecs"]]
    return []


def _containers(objects):
    for obj in objects:
        for where, pod in _pod_specs(obj):
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield f"{obj['metadata']['name']}/{where}/{container['name']}", pod, container


def _one(objects, kind, name=None):
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def _settings_map(objects):
    """The ConfigMap of NEVIS_* settings (the other one holds the RayJob template)."""
    (obj,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config")]
    return obj


# --- rendering, linting, schemas ----------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_chart_lints_clean(case):
    report = helm.lint(CHART, CASES[case], strict=True, namespace="nevis",
                       kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_default_render_holds_every_component(default_objects):
    kinds = {o["kind"] for o in default_objects}
    assert {"Deployment", "Service", "ConfigMap", "ServiceAccount", "Role", "RoleBinding",
            "NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler", "CronJob",
            "RayCluster"} <= kinds
    assert "Secret" not in kinds and "Ingress" not in kinds  # Ingress is opt-in
    deployments = {o["metadata"]["name"] for o in default_objects if o["kind"] == "Deployment"}
    assert deployments == {"nevis-coordinator", "nevis-probe-workers"}


def test_built_in_kinds_validate_against_the_kubernetes_schemas(objects):
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith("ray.io/"):
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 12


def test_kuberay_kinds_validate_against_the_crd_schemas(objects, crd_validators):
    ray = [o for o in objects if o["apiVersion"].startswith("ray.io/")]
    assert ray
    for obj in ray:
        validator, schema = crd_validators[obj["kind"]]
        validator.validate(obj)
        assert unknown_keys(obj, schema) == []


def test_the_validators_would_catch_bad_manifests(default_objects, crd_validators):
    deployment = _one(default_objects, "Deployment", "nevis-coordinator")
    typo = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBE_VERSION, strict=True)
    cluster = _one(default_objects, "RayCluster")
    validator, schema = crd_validators["RayCluster"]
    bad = {**cluster, "spec": {**cluster["spec"], "enableInTreeAutoscaling": "yes"}}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    typo = {**cluster, "spec": {**cluster["spec"], "workerGroupSpec": []}}
    assert unknown_keys(typo, schema) == [".spec.workerGroupSpec"]


@pytest.mark.parametrize(("values", "needle"), [
    ({"images": {"coordinator": {"tag": "latest"}}}, "tag"),
    ({"existingSecret": ""}, "existingSecret"),
    ({"config": {"extra": {"NEVIS_DATABASE_URL": "postgresql://u:p@db/nevis"}}}, "NEVIS_DATABASE_URL"),
    ({"config": {"backend": "slurm"}}, "backend"),
    ({"coordinator": {"replica": 3}}, "replica"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot"),
    ({"learnerSandbox": {"procMount": "Masked"}}, "procMount"),
    ({"learnerSandbox": {"seccompProfile": {"type": "Localhost", "localhostProfile": "../../etc/x.json"}}},
     "localhostProfile"),
    ({"learnerSandbox": {"seccompProfile": {"type": "Localhost", "localhostProfile": ""}}}, "localhostProfile"),
])
def test_the_values_schema_refuses_unsafe_or_misspelt_values(values, needle):
    with pytest.raises(helm.HelmError) as caught:
        _render_raw(values)
    assert needle in str(caught.value)


def test_rendering_is_deterministic():
    assert render_k8s.files(render_k8s.render()) == render_k8s.files(render_k8s.render())


def test_the_generated_manifests_are_not_stale():
    result = subprocess.run([sys.executable, str(ROOT / "deploy" / "render_k8s.py"), "--check"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_the_check_mode_notices_a_stale_file(tmp_path):
    render_k8s.main(["--output", str(tmp_path)])
    assert render_k8s.main(["--check", "--output", str(tmp_path)]) == 0
    (tmp_path / "deployment.yaml").write_text("# edited by hand\n")
    (tmp_path / "extra.yaml").write_text("{}\n")
    problems = render_k8s.stale(tmp_path, render_k8s.files(render_k8s.render()))
    assert any("deployment.yaml is out of date" in p for p in problems)
    assert any("extra.yaml is not rendered" in p for p in problems)
    assert render_k8s.main(["--check", "--output", str(tmp_path)]) == 1


# --- properties ---------------------------------------------------------------------------------


def test_no_secret_value_is_written_anywhere(objects):
    assert not [o for o in objects if o["kind"] == "Secret"]
    config = _settings_map(objects)["data"]
    assert not [k for k in config if SECRET_NAMES.search(k) and not k.endswith(REFERENCES)]
    assert not [v for v in config.values() if re.search(r"://[^/@\s]*:[^/@\s]*@", v)]
    for where, _, container in _containers(objects):
        for env in container.get("env", []):
            assert not SECRET_NAMES.search(env["name"]) or "valueFrom" in env, (where, env)
            assert "://" not in str(env.get("value", "")), (where, env)
    text = yaml.safe_dump_all(objects)
    assert "postgresql" not in text and "AKIA" not in text


def test_the_secret_is_referenced_by_name_and_mounted_in_harness_heads_only(prod_objects):
    for where, pod, container in _containers(prod_objects):
        refs = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
        assert refs in ([], ["nevis-prod-env"]), where
        secrets = [v for v in pod.get("volumes", []) if "secret" in v]
        if secrets:
            assert where.endswith("/head/ray-head"), where
            assert secrets[0]["secret"]["secretName"] == "nevis-prod-env"
            assert container["volumeMounts"][0]["mountPath"] == "/var/run/secrets/nevis"
    cluster = _one(prod_objects, "RayCluster")
    assert cluster["spec"]["headGroupSpec"]["template"]["metadata"]["labels"]["nevis.io/role"] == "harness"
    for group in cluster["spec"]["workerGroupSpecs"]:
        pod = group["template"]
        assert pod["metadata"]["labels"]["nevis.io/role"] == "learner"
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert {"name": "NEVIS_SANDBOX", "value": "bwrap"} in pod["spec"]["containers"][0]["env"]


def test_every_container_is_non_root_without_privilege_escalation(objects):
    seen = 0
    for where, pod, container in _containers(objects):
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, where
        assert security["capabilities"]["drop"] == ["ALL"], where
        if where.endswith("-seccomp-installer/DaemonSet/install"):
            continue  # root to write the kubelet's seccomp folder: see the installer's own test
        assert security.get("runAsNonRoot", pod["securityContext"]["runAsNonRoot"]) is True, where
        assert pod["securityContext"]["runAsUser"] != 0, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert container.get("resources", {}).get("limits"), where
        seen += 1
    assert seen >= 7
    autoscaler = _one(objects, "RayCluster")["spec"]["autoscalerOptions"]["securityContext"]
    assert autoscaler["allowPrivilegeEscalation"] is False and autoscaler["runAsNonRoot"] is True


def test_the_service_s_own_processes_run_on_a_read_only_root(objects):
    for where, _, container in _containers(objects):
        if "/head/" in where or "/cpu/" in where or "/gpu/" in where:
            continue  # Ray pods: see rayCluster.readOnlyRootFilesystem
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, where


def test_every_image_is_pinned(objects):
    images = [c["image"] for _, _, c in _containers(objects)]
    config = _settings_map(objects)["data"]
    images += [config["NEVIS_KUBERAY_WORKER_IMAGE"], config["NEVIS_KUBERAY_HARNESS_IMAGE"]]
    for image in images:
        if "@sha256:" in image:
            assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", image), image
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag and tag not in ("latest", "nightly", "main", "master"), image


def test_the_coordinator_migrates_first_and_probes_its_health(objects):
    deployment = _one(objects, "Deployment", "nevis-coordinator")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["command"] == ["nevis", "db", "upgrade"]
    app = pod["containers"][0]
    assert app["command"][:2] == ["nevis", "serve"] and "--no-migrate" in app["command"]
    assert app["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert app["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert pod["serviceAccountName"] == _one(objects, "ServiceAccount")["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    for kind in ("PodDisruptionBudget", "Service"):
        obj = _one(objects, kind)
        assert (obj["spec"].get("selector", {}).get("matchLabels") or obj["spec"]["selector"]) == selector
    hpa = _one(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it


def test_every_command_is_a_real_nevis_command(objects):
    """The commands the chart runs parse with the `nevis` CLI (no placeholder)."""
    import click  # noqa: PLC0415
    import typer.main  # noqa: PLC0415

    from services.cli.main import app  # noqa: PLC0415

    root = typer.main.get_command(app)
    commands = [c["command"] for _, _, c in _containers(objects) if "command" in c]
    assert len(commands) >= 4
    for argv in commands:
        assert argv[0] == "nevis", argv
        command, rest = root, list(argv[1:])
        while isinstance(command, click.Group) and rest and rest[0] in command.commands:
            command = command.commands[rest.pop(0)]
        assert not isinstance(command, click.Group), argv
        command.make_context(argv[0], rest)  # raises on an unknown option or bad value
    crons = {o["metadata"]["name"].removeprefix(RELEASE_PREFIX(objects) + "-"):
             o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][1:]
             for o in objects if o["kind"] == "CronJob"}
    assert crons == {"probe-catchup": ["probe-workers", "--workers", "1", "--once", "--watch"],
                     "refresh": ["refresh", "run"]}


def test_the_config_map_holds_real_settings_only(objects):
    from services.coordinator.common.config import CoordinatorSettings  # noqa: PLC0415

    fields = set(CoordinatorSettings.model_fields)
    config = _settings_map(objects)["data"]
    assert [k for k in config if k.removeprefix("NEVIS_").lower() not in fields] == []
    settings = CoordinatorSettings(**{k.removeprefix("NEVIS_").lower(): v for k, v in config.items()
                                      if k != "NEVIS_ENVIRONMENT"},
                                   database_url="postgresql+psycopg://db/nevis")
    assert settings.kuberay_secret_name and settings.backend in ("kuberay", "ray")


def test_the_rbac_allows_rayjobs_and_network_policies_only(objects):
    role = _one(objects, "Role")
    assert role["rules"] == [
        {"apiGroups": ["ray.io"], "resources": ["rayjobs"],
         "verbs": ["create", "get", "list", "watch", "delete", "patch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
         "verbs": ["create", "get", "patch"]},
    ]
    binding = _one(objects, "RoleBinding")
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    account = _one(objects, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_learner_fences_are_exactly_the_backend_s(objects):
    expected = [d for d in yaml.safe_load_all(LEARNER_POLICIES.read_text()) if d]
    namespace = _settings_map(objects)["data"]["NEVIS_KUBERAY_NAMESPACE"]
    for policy in expected:
        policy["metadata"]["namespace"] = namespace
        assert _one(objects, "NetworkPolicy", policy["metadata"]["name"]) == policy


def test_learner_pods_reach_only_ray_pods_and_dns(objects):
    fence = _one(objects, "NetworkPolicy", "nevis-learner-fence")["spec"]
    assert fence["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "nevis-worker",
                                                   "nevis.io/role": "learner"}
    assert set(fence["policyTypes"]) == {"Ingress", "Egress"}
    ray_pods = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "nevis-worker"}}}
    (to_ray, to_dns) = fence["egress"]
    assert to_ray == {"to": [ray_pods]}
    assert to_dns["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                             "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
    assert {p["port"] for p in to_dns["ports"]} == {53}
    # No other policy opens egress for learner pods (policies are additive).
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        if policy["metadata"]["name"] != "nevis-learner-fence":
            assert "Egress" not in policy["spec"]["policyTypes"], policy["metadata"]["name"]
    # The standing cluster's workers are learner pods the fence selects.
    for group in _one(objects, "RayCluster")["spec"]["workerGroupSpecs"]:
        labels = group["template"]["metadata"]["labels"]
        assert fence["podSelector"]["matchLabels"].items() <= labels.items()


def test_the_coordinator_takes_only_api_traffic(default_objects, prod_objects):
    policy = _one(default_objects, "NetworkPolicy", "nevis-coordinator")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    prod = _one(prod_objects, "NetworkPolicy", "nevis-coordinator")["spec"]
    assert len(prod["ingress"][0]["from"]) == 2
    probes = _one(default_objects, "NetworkPolicy", "nevis-probe-workers")["spec"]
    assert probes["policyTypes"] == ["Ingress"] and "ingress" not in probes


def test_the_gpu_group_requests_gpus_on_gpu_nodes(default_objects, prod_objects):
    for objects, gpus, replicas in ((default_objects, 1, 0), (prod_objects, 2, 0)):
        groups = {g["groupName"]: g for g in _one(objects, "RayCluster")["spec"]["workerGroupSpecs"]}
        assert set(groups) == {"cpu", "gpu"}
        gpu = groups["gpu"]
        assert gpu["replicas"] == replicas and gpu["minReplicas"] == 0
        pod = gpu["template"]["spec"]
        resources = pod["containers"][0]["resources"]
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == gpus
        assert pod["nodeSelector"] and pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        cpu = groups["cpu"]["template"]["spec"]["containers"][0]["resources"]
        assert "nvidia.com/gpu" not in cpu["limits"]


def test_the_ray_backend_points_at_the_standing_cluster(default_objects, prod_objects):
    assert "NEVIS_RAY_ADDRESS" not in _settings_map(default_objects)["data"]
    config = _settings_map(prod_objects)["data"]
    cluster = _one(prod_objects, "RayCluster")["metadata"]
    assert config["NEVIS_RAY_ADDRESS"] == f"http://{cluster['name']}-head-svc.{cluster['namespace']}.svc:8265"
    dashboard = _one(prod_objects, "NetworkPolicy", f"{cluster['name']}-dashboard")
    assert dashboard["spec"]["ingress"][0]["ports"] == [{"port": 8265, "protocol": "TCP"}]


def test_the_ingress_is_tls_and_targets_the_service(prod_objects):
    ingress = _one(prod_objects, "Ingress")["spec"]
    assert ingress["tls"] == [{"hosts": ["nevis.lab.example"], "secretName": "nevis-tls"}]
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == _one(prod_objects, "Service")["metadata"]["name"]


def test_every_value_is_commented():
    lines = (CHART / "values.yaml").read_text().splitlines()
    list_indent = None  # keys inside a list item are data of that value, not values
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if line.lstrip().startswith("- "):
            list_indent = indent if list_indent is None else min(list_indent, indent)
            continue
        if list_indent is not None and line.strip() and indent > list_indent:
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            list_indent = None
        if re.match(r"^\s*[A-Za-z][\w.-]*:", line):
            above = lines[i - 1].strip() if i else ""
            assert above.startswith("#"), f"values.yaml:{i + 1}: {line.strip()} has no comment"


def _template_map(objects):
    (obj,) = [o for o in objects if o["kind"] == "ConfigMap"
              and o["metadata"]["name"].endswith("-rayjob-template")]
    return obj


@pytest.mark.parametrize("gpus", [0, 2])
def test_the_backend_renders_rayjobs_from_the_chart_s_template(prod_objects, crd_validators, tmp_path, gpus):
    """The coordinator mounts the chart's RayJob template where its settings point; the
    kuberay backend's RayJobs built from it validate, and GPU learners are scheduled like
    the RayCluster's GPU workers (production values)."""
    from services.coordinator.backends.base import LaunchSpec  # noqa: PLC0415
    from services.coordinator.backends.kuberay_template import load_template, render_rayjob  # noqa: PLC0415
    from services.coordinator.common.config import CoordinatorSettings  # noqa: PLC0415
    from services.coordinator.common.validation import ResourceRequest  # noqa: PLC0415

    config, template = _settings_map(prod_objects)["data"], _template_map(prod_objects)
    deployment = _one(prod_objects, "Deployment", f"{RELEASE_PREFIX(prod_objects)}-coordinator")
    pod = deployment["spec"]["template"]["spec"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "rayjob-template"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "rayjob-template"]
    assert mount["mountPath"] == config["NEVIS_KUBERAY_RAYJOB_TEMPLATE"]
    assert volume["configMap"]["name"] == template["metadata"]["name"]
    for name, text in template["data"].items():
        (tmp_path / name).write_text(text)
    settings = CoordinatorSettings(data_dir=tmp_path, database_url="sqlite://", backend="kuberay",
                                   kuberay_rayjob_template=tmp_path)
    spec = LaunchSpec(lease_id=5, submission_id=9, task_order=2, attempt=1, learner_name="l",
                      entrypoint="m:f", image=None, resources=ResourceRequest(cpus=2, gpus=gpus, memory_mb=4096))
    job = render_rayjob(spec, settings, load_template(tmp_path))
    validator, schema = crd_validators["RayJob"]
    validator.validate(job)
    assert unknown_keys(job, schema) == []
    learner = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    (group,) = [g for g in _one(prod_objects, "RayCluster")["spec"]["workerGroupSpecs"]
                if g["groupName"] == ("gpu" if gpus else "cpu")]
    assert learner.get("nodeSelector") == group["template"]["spec"].get("nodeSelector")
    assert learner.get("tolerations") == group["template"]["spec"].get("tolerations")
    assert learner["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0) == gpus
    assert job["spec"]["ttlSecondsAfterFinished"] == PROD.get("kuberay", {}).get("rayJob", {}).get(
        "ttlSecondsAfterFinished", 600)


def RELEASE_PREFIX(objects) -> str:  # noqa: N802 - reads like the constant it stands for
    """The release's name prefix, from the settings ConfigMap's name."""
    return _settings_map(objects)["metadata"]["name"].removesuffix("-config")


def test_the_built_in_rayjob_template_is_the_chart_s_default_rendering():
    expected = render_k8s.template_files(render_k8s.render())
    assert render_k8s.stale(render_k8s.TEMPLATE_OUTPUT, expected) == []



# --- the learner sandbox on the nodes -------------------------------------------------------------

PROFILE = CHART / "files" / "seccomp" / "learner-v1.json"


def _learner_pods(objects):
    """Every pod that starts learner hosts: Ray learner pods (standing cluster and RayJob
    template) and the probe workers (they load checkpoints with learner code)."""
    for obj in objects:
        for where, pod in _pod_specs(obj):
            name = obj["metadata"]["name"]
            if where in ("cpu", "gpu") or name.endswith(("-probe-workers", "-probe-catchup")):
                yield f"{name}/{where}", pod
    job = yaml.safe_load(_template_map(objects)["data"]["rayjob.yaml"])
    for group in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        yield "rayjob-template/" + group["groupName"], group["template"]["spec"]


def test_pods_that_start_learner_hosts_can_start_bubblewrap(objects):
    seen = set()
    for where, pod in _learner_pods(objects):
        assert pod["hostUsers"] is False, where  # needed by an unmasked /proc
        security = pod["containers"][0]["securityContext"]
        assert security["procMount"] == "Unmasked", where  # bwrap mounts a fresh /proc
        assert security["seccompProfile"] == {"type": "Localhost", "localhostProfile": "nevis/learner-v1.json"}, where
        assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"], where
        seen.add(where.split("/")[0].removeprefix(RELEASE_PREFIX(objects) + "-"))
    assert {"ray", "probe-workers", "probe-catchup", "rayjob-template"} <= seen, seen


def test_pods_that_hold_credentials_keep_the_runtime_s_default_profile(objects):
    learner = {where for where, _ in _learner_pods(objects)}
    for where, pod, container in _containers(objects):
        if "/".join(where.split("/")[:2]) in learner or where.endswith("-seccomp-installer/DaemonSet/install"):
            continue
        assert "seccompProfile" not in container["securityContext"], where
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert container["securityContext"].get("procMount", "Default") == "Default", where


def test_the_installer_writes_the_profile_learner_pods_name_and_nothing_else(objects):
    (installer,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = installer["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"] and "add" not in security["capabilities"]
    assert pod["automountServiceAccountToken"] is False and "hostNetwork" not in pod and "hostPID" not in pod
    host = [v for v in pod["volumes"] if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in host] == ["/var/lib/kubelet/seccomp"]
    argv = container["command"]
    assert argv[argv.index("--to") + 1] == "/host/seccomp/nevis/learner-v1.json"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[host[0]["name"]] == "/host/seccomp"
    (config,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-seccomp")]
    assert config["data"]["learner.json"].strip() == PROFILE.read_text().strip()
    assert installer["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_the_learner_profile_lets_bubblewrap_in_and_keeps_kernel_surface_out():
    from services.cli.sandbox_cmd import check_seccomp_profile  # noqa: PLC0415

    profile = check_seccomp_profile(PROFILE.read_text(), source=str(PROFILE))
    denied = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for n in rule["names"]}
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert not denied & {"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "chroot"}  # bwrap's
    assert {"ptrace", "bpf", "perf_event_open", "kexec_load", "init_module", "keyctl", "setns",
            "open_by_handle_at", "userfaultfd", "io_uring_setup", "process_vm_readv"} <= denied


def test_the_seccomp_installer_can_be_left_to_the_operator():
    objects = _render_raw({"seccompInstaller": {"enabled": False},
                           "learnerSandbox": {"hostUsers": False, "procMount": "Unmasked",
                                              "seccompProfile": {"type": "Localhost",
                                                                 "localhostProfile": "operator/bwrap.json"}}})
    assert not [o for o in objects if o["kind"] == "DaemonSet"]
    for where, pod in _learner_pods(objects):
        assert pod["containers"][0]["securityContext"]["seccompProfile"]["localhostProfile"] == "operator/bwrap.json"
