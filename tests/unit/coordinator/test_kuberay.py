"""KubeRay rendering: every RayJob validates against the RayJob CRD schema (no cluster here).

The schema is the ``openAPIV3Schema`` of ``ray.io/v1`` in ../shared/schemas/kuberay. Beyond
jsonschema (which lets unknown keys through, as structural schemas do), every key we write
must exist in the schema, the way the API server would prune unknown ones silently.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from services.coordinator.backends.base import JobState, LaunchSpec
from services.coordinator.backends.kuberay import KubeRayBackend
from services.coordinator.backends.kuberay_images import IMAGE_VOLUME
from services.coordinator.backends.kuberay_template import (
    DASHBOARD_PORT,
    HARNESS_SECRETS_DIR,
    load_template,
    render_network_policies,
    render_rayjob,
    to_yaml,
)
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import ResourceRequest
from services.core.errors import ConfigError
from tests.support.k8s_schema import unknown_keys

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_FILE = ROOT.parent / "shared" / "schemas" / "kuberay" / "ray.io_rayjobs.yaml"
EXAMPLE = ROOT / "k8s" / "rayjob-example.yaml"
POLICIES = ROOT / "k8s" / "kuberay-networkpolicies.yaml"
IMAGE_ROOT = "/var/lib/nevis/learner-image"
DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.load(SCHEMA_FILE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


@pytest.fixture(scope="module")
def validator(schema):
    """A validator built once (checking the large schema itself is the slow part)."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _settings(tmp_path: Path, **extra) -> CoordinatorSettings:
    return CoordinatorSettings(data_dir=tmp_path, database_url="sqlite://", backend="kuberay", **extra)


SPECS = [
    LaunchSpec(lease_id=1, submission_id=1, task_order=1, attempt=1, learner_name="a", entrypoint="m:f", image=None),
    LaunchSpec(
        lease_id=98765,
        submission_id=123456,
        task_order=106,
        attempt=3,
        learner_name="b",
        entrypoint="pkg.mod:make",
        image=f"registry.example.com:5000/team/b@sha256:{'0' * 64}",
        resources=ResourceRequest(cpus=0.5, gpus=8, memory_mb=65536),
    ),
]


@pytest.mark.parametrize("spec", SPECS, ids=["defaults", "gpu-digest"])
def test_rendered_rayjobs_validate_against_the_crd_schema(schema, validator, tmp_path, spec):
    settings = _settings(tmp_path, task_deadline_s=3600, start_timeout_s=300, worker_max_tasks=4)
    manifest = render_rayjob(spec, settings)
    validator.validate(manifest)
    assert unknown_keys(manifest, schema) == []
    job = manifest["spec"]
    # a worker may run 4 tasks in a row, each under its own lease and deadline
    assert (job["activeDeadlineSeconds"], job["preRunningDeadlineSeconds"], job["backoffLimit"]) == (4 * 3600, 300, 0)
    assert job["shutdownAfterJobFinishes"] is True
    name = manifest["metadata"]["name"]
    assert DNS_1123.fullmatch(name) and len(name) <= 63
    assert job["entrypoint"].endswith(f"worker run-task --submission {spec.submission_id} --lease {spec.lease_id}")
    pods = [job["rayClusterSpec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in job["rayClusterSpec"]["workerGroupSpecs"]
    ]
    # Both run the service's images; a learner image is only a read-only image volume of the workers.
    head_pod, worker_pod = pods
    head, worker = head_pod["spec"]["containers"][0], worker_pod["spec"]["containers"][0]
    assert head["image"] == settings.kuberay_harness_image
    assert worker["image"] == settings.kuberay_worker_image
    assert worker["resources"]["limits"].get("nvidia.com/gpu", 0) == spec.resources.gpus
    # The credentials reach the head pod only, as files of a Secret the runtime env points to.
    assert head_pod["spec"]["volumes"] == [
        {"name": "nevis-secrets", "secret": {"secretName": settings.kuberay_secret_name, "defaultMode": 0o440}}
    ]
    assert head["volumeMounts"][0]["mountPath"] == HARNESS_SECRETS_DIR
    assert "envFrom" not in worker
    if spec.image is None:
        assert "volumes" not in worker_pod["spec"] and "volumeMounts" not in worker
    else:
        assert worker_pod["spec"]["volumes"] == [
            {"name": IMAGE_VOLUME, "image": {"reference": spec.image, "pullPolicy": "IfNotPresent"}}
        ]
        assert worker["volumeMounts"] == [{"name": IMAGE_VOLUME, "mountPath": IMAGE_ROOT, "readOnly": True}]
    mounted = [{"name": "NEVIS_IMAGE_ROOT", "value": IMAGE_ROOT}] if spec.image else []
    assert worker["env"] == [{"name": "NEVIS_SANDBOX", "value": "bwrap"}, *mounted]
    for pod in pods:
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["enableServiceLinks"] is False
    assert (head_pod["metadata"]["labels"]["nevis.io/role"], worker_pod["metadata"]["labels"]["nevis.io/role"]) == (
        "harness",
        "learner",
    )
    env = yaml.safe_load(job["runtimeEnvYAML"])["env_vars"]
    assert env == {
        "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
        "NEVIS_RAY_ADDRESS": "",
        "NEVIS_SECRETS_PATH": HARNESS_SECRETS_DIR,
        **({"NEVIS_IMAGE_ROOT": IMAGE_ROOT} if spec.image else {}),
    }


def test_the_schema_check_would_catch_a_bad_manifest(schema, validator, tmp_path):
    manifest = render_rayjob(SPECS[0], _settings(tmp_path))
    broken = copy.deepcopy(manifest)
    broken["spec"]["backoffLimit"] = "zero"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)
    typo = copy.deepcopy(manifest)
    typo["spec"]["activeDeadlineSecond"] = 5
    assert unknown_keys(typo, schema) == [".spec.activeDeadlineSecond"]


def test_the_checked_in_example_is_what_the_renderer_makes(schema, validator, tmp_path):
    example = yaml.safe_load(EXAMPLE.read_text())
    validator.validate(example)
    assert unknown_keys(example, schema) == []
    settings = _settings(tmp_path, task_deadline_s=21600, start_timeout_s=900)
    spec = LaunchSpec(
        lease_id=42,
        submission_id=7,
        task_order=3,
        attempt=1,
        learner_name="my-learner",
        entrypoint="my_pkg.learner:make",
        image=f"ghcr.io/example/my-learner@sha256:{'ab' * 32}",
        resources=ResourceRequest(cpus=4, gpus=1, memory_mb=16384),
        nonce="a1b2c3",
    )
    assert example == yaml.safe_load(to_yaml(render_rayjob(spec, settings)))


def test_a_broken_rayjob_template_is_a_clear_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="not a RayJob template"):
        load_template(tmp_path)  # no files
    (tmp_path / "rayjob.yaml").write_text("kind: Deployment\nspec: {rayClusterSpec: {workerGroupSpecs: []}}\n")
    (tmp_path / "gpu.yaml").write_text("{}\n")
    with pytest.raises(ConfigError, match="must be a RayJob with one worker group"):
        load_template(tmp_path)
    settings = _settings(tmp_path, kuberay_rayjob_template=tmp_path)
    with pytest.raises(ConfigError):
        render_rayjob(SPECS[0], settings)


def test_a_cpu_learner_is_not_sent_to_gpu_nodes(tmp_path):
    pod = render_rayjob(SPECS[0], _settings(tmp_path))["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert "nodeSelector" not in pod["template"]["spec"] and "tolerations" not in pod["template"]["spec"]


def test_learner_pods_are_fenced_from_the_dashboard_the_database_and_the_internet(tmp_path):
    settings = _settings(tmp_path, kuberay_namespace="research", kuberay_operator_namespace="ray-ops")
    learner, head = render_network_policies(settings)
    assert {p["metadata"]["namespace"] for p in (learner, head)} == {"research"}
    assert learner["spec"]["podSelector"]["matchLabels"]["nevis.io/role"] == "learner"
    assert learner["spec"]["policyTypes"] == ["Ingress", "Egress"]
    destinations = [peer for rule in learner["spec"]["egress"] for peer in rule["to"]]
    assert all(
        peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name") == "nevis-worker"
        or peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
        for peer in destinations
    )
    assert not any("ipBlock" in peer for peer in destinations)  # nothing outside the cluster
    rules = head["spec"]["ingress"]
    from_ray_pods = [r for r in rules if r["from"][0].get("podSelector", {}).get("matchLabels")]
    ports = [(p["port"], p["endPort"]) for r in from_ray_pods for p in r["ports"]]
    assert all(not lo <= DASHBOARD_PORT <= hi for lo, hi in ports)  # learners never reach it
    dashboard_peers = [r["from"][0] for r in rules if r["ports"] == [{"port": DASHBOARD_PORT, "protocol": "TCP"}]]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ray-ops"}}} in dashboard_peers


def test_the_checked_in_network_policies_are_what_the_renderer_makes(tmp_path):
    checked_in = [d for d in yaml.safe_load_all(POLICIES.read_text()) if d]
    assert checked_in == [yaml.safe_load(to_yaml(p)) for p in render_network_policies(_settings(tmp_path))]


def test_the_backend_writes_each_rayjob_to_its_outbox(tmp_path, validator):
    backend = KubeRayBackend(_settings(tmp_path))
    job_id = backend.launch(SPECS[1])
    fences = list(yaml.safe_load_all((tmp_path / "kuberay" / "networkpolicies.yaml").read_text()))
    assert [f["kind"] for f in fences] == ["NetworkPolicy", "NetworkPolicy"]
    assert job_id == f"kuberay:nevis/{SPECS[1].job_name}"
    written = yaml.safe_load((tmp_path / "kuberay" / f"{SPECS[1].job_name}.yaml").read_text())
    validator.validate(written)
    assert backend.status(job_id).state is JobState.UNKNOWN  # no kubectl: the reaper decides
    backend.cancel(job_id)


def test_a_failing_kubectl_makes_the_launch_fail(tmp_path):
    backend = KubeRayBackend(_settings(tmp_path, kubectl="false"))
    with pytest.raises(Exception, match="failed"):
        backend.launch(SPECS[0])
    assert backend.status(f"kuberay:nevis/{SPECS[0].job_name}").state is JobState.UNKNOWN
