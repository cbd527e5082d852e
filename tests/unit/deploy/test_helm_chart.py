"""The Helm chart helm/nevis, checked offline (no helm binary, no cluster here): rendering,
linting and schemas.

Rendering and linting use Helm's own Go SDK through helm-python-sdk. Built-in kinds are
validated with kubernetes-validate (the Kubernetes OpenAPI schemas, strict: unknown keys are
errors); KubeRay kinds with jsonschema against the CRD schemas in ../shared/schemas/kuberay
plus the unknown-key check (the API server would prune unknown keys silently). Charts are
rendered with the default values and with the production-like values of
helm/nevis/ci/production-values.yaml (fixtures in conftest.py). Security properties:
test_helm_security.py; the learner sandbox on the nodes: test_helm_sandbox.py.
"""

from __future__ import annotations

import re
import subprocess
import sys

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest

from tests.support.helm_chart import (
    CASES,
    CHART,
    KUBE_VERSION,
    PROD,
    ROOT,
    one,
    release_prefix,
    render_k8s,
    render_raw,
    settings_map,
    template_map,
    unknown_keys,
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_chart_lints_clean(case):
    report = helm.lint(CHART, CASES[case], strict=True, namespace="nevis", kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_default_render_holds_every_component(default_objects):
    kinds = {o["kind"] for o in default_objects}
    assert {
        "Deployment",
        "Service",
        "ConfigMap",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
        "CronJob",
        "RayCluster",
    } <= kinds
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
    deployment = one(default_objects, "Deployment", "nevis-coordinator")
    typo = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBE_VERSION, strict=True)
    cluster = one(default_objects, "RayCluster")
    validator, schema = crd_validators["RayCluster"]
    bad = {**cluster, "spec": {**cluster["spec"], "enableInTreeAutoscaling": "yes"}}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)
    typo = {**cluster, "spec": {**cluster["spec"], "workerGroupSpec": []}}
    assert unknown_keys(typo, schema) == [".spec.workerGroupSpec"]


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"images": {"coordinator": {"tag": "latest"}}}, "tag"),
        ({"existingSecret": ""}, "existingSecret"),
        ({"config": {"extra": {"NEVIS_DATABASE_URL": "postgresql://u:p@db/nevis"}}}, "NEVIS_DATABASE_URL"),
        ({"config": {"backend": "slurm"}}, "backend"),
        ({"coordinator": {"replica": 3}}, "replica"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot"),
        ({"learnerSandbox": {"procMount": "Masked"}}, "procMount"),
        (
            {"learnerSandbox": {"seccompProfile": {"type": "Localhost", "localhostProfile": "../../etc/x.json"}}},
            "localhostProfile",
        ),
        ({"learnerSandbox": {"seccompProfile": {"type": "Localhost", "localhostProfile": ""}}}, "localhostProfile"),
        ({"benchmarkData": {"mirror": "s3://key:secret@bucket/sources"}}, "mirror"),
        ({"benchmarkData": {"mirror": "ftp://mirror.example/sources"}}, "mirror"),
    ],
)
def test_the_values_schema_refuses_unsafe_or_misspelt_values(values, needle):
    with pytest.raises(helm.HelmError) as caught:
        render_raw(values)
    assert needle in str(caught.value)


def test_rendering_is_deterministic():
    assert render_k8s.files(render_k8s.render()) == render_k8s.files(render_k8s.render())


def test_the_generated_manifests_are_not_stale():
    result = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "render_k8s.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
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


@pytest.mark.parametrize("gpus", [0, 2])
def test_the_backend_renders_rayjobs_from_the_chart_s_template(prod_objects, crd_validators, tmp_path, gpus):
    """The coordinator mounts the chart's RayJob template where its settings point; the
    kuberay backend's RayJobs built from it validate, and GPU learners are scheduled like
    the RayCluster's GPU workers (production values)."""
    from services.coordinator.backends.base import LaunchSpec
    from services.coordinator.backends.kuberay_template import load_template, render_rayjob
    from services.coordinator.common.config import CoordinatorSettings
    from services.coordinator.common.validation import ResourceRequest

    config, template = settings_map(prod_objects)["data"], template_map(prod_objects)
    deployment = one(prod_objects, "Deployment", f"{release_prefix(prod_objects)}-coordinator")
    pod = deployment["spec"]["template"]["spec"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "rayjob-template"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "rayjob-template"]
    assert mount["mountPath"] == config["NEVIS_KUBERAY_RAYJOB_TEMPLATE"]
    assert volume["configMap"]["name"] == template["metadata"]["name"]
    for name, text in template["data"].items():
        (tmp_path / name).write_text(text)
    settings = CoordinatorSettings(
        data_dir=tmp_path, database_url="sqlite://", backend="kuberay", kuberay_rayjob_template=tmp_path
    )
    spec = LaunchSpec(
        lease_id=5,
        submission_id=9,
        task_order=2,
        attempt=1,
        learner_name="l",
        entrypoint="m:f",
        image=None,
        resources=ResourceRequest(cpus=2, gpus=gpus, memory_mb=4096),
    )
    job = render_rayjob(spec, settings, load_template(tmp_path))
    validator, schema = crd_validators["RayJob"]
    validator.validate(job)
    assert unknown_keys(job, schema) == []
    learner = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    (group,) = [
        g
        for g in one(prod_objects, "RayCluster")["spec"]["workerGroupSpecs"]
        if g["groupName"] == ("gpu" if gpus else "cpu")
    ]
    assert learner.get("nodeSelector") == group["template"]["spec"].get("nodeSelector")
    assert learner.get("tolerations") == group["template"]["spec"].get("tolerations")
    assert learner["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0) == gpus
    assert job["spec"]["ttlSecondsAfterFinished"] == PROD.get("kuberay", {}).get("rayJob", {}).get(
        "ttlSecondsAfterFinished", 600
    )


def test_the_built_in_rayjob_template_is_the_chart_s_default_rendering():
    expected = render_k8s.template_files(render_k8s.render())
    assert render_k8s.stale(render_k8s.TEMPLATE_OUTPUT, expected) == []


def test_the_benchmark_data_job_fetches_converts_then_prepares(default_objects, prod_objects):
    """Off by default; when on, one Job whose steps run in order on one scratch volume, the
    mirror tried first and Kaggle's credentials given to the steps that download only."""
    assert not [o for o in default_objects if o["kind"] == "Job"]
    pod = one(prod_objects, "Job", f"{release_prefix(prod_objects)}-benchmark-data")["spec"]["template"]["spec"]
    steps = pod["initContainers"] + pod["containers"]
    assert [c["command"] for c in steps] == [
        ["nevis", "data", "fetch", "--stream", "nevis22-full", "--jobs", "4"],
        ["nevis", "data", "convert", "--stream", "nevis22-full"],
        ["nevis", "data", "prepare", "--stream", "nevis22-full"],
    ]
    for container in steps:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["NEVIS_DATA_MIRROR"] == PROD["benchmarkData"]["mirror"]
        assert env["NEVIS_OFFLINE_DATA_DIR"].startswith(env["NEVIS_DATA_DIR"] + "/")
        assert [m["mountPath"] for m in container["volumeMounts"] if m["name"] == "scratch"] == ["/scratch"]
        kaggle = {"secretRef": {"name": "nevis-kaggle"}} in container["envFrom"]
        assert kaggle == (container["name"] in ("fetch", "convert")), container["name"]
    (scratch,) = [v for v in pod["volumes"] if v["name"] == "scratch"]
    assert scratch["persistentVolumeClaim"] == {"claimName": "nevis-benchmark-sources"}
    plain = render_raw({"benchmarkData": {"enabled": True}})
    (job,) = [o for o in plain if o["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    assert spec["volumes"][0]["emptyDir"] == {"sizeLimit": "500Gi"}
    assert "NEVIS_DATA_MIRROR" not in {e["name"] for e in spec["containers"][0]["env"]}
