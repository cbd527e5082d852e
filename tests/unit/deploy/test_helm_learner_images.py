"""Learner images on the kuberay backend, rendered from the chart: a read-only image volume of
the learner pods (kuberay.learnerImages.delivery=imageVolume, the default), or none at all and
image learners refused (delivery=refuse, for clusters without image volumes). Both renderings
validate offline: the RayJobs against the KubeRay CRD schema, the learner pod against the
Kubernetes Pod schema. No pod ever runs the learner's image: it is files, never a Ray member.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from services.coordinator.backends.base import LaunchSpec
from services.coordinator.backends.kuberay_images import IMAGE_VOLUME, REFUSED
from services.coordinator.backends.kuberay_template import load_template, render_rayjob
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import ResourceRequest
from services.coordinator.learner_images import image_import_paths, register_image
from services.core.errors import ConfigError
from tests.support.helm_chart import KUBE_VERSION, render_raw, template_map, unknown_keys
from workers.sandbox.images import ImageError

LEARNER = f"registry.example.com/lab/learner@sha256:{'c' * 64}"
REFUSE = {"kuberay": {"learnerImages": {"delivery": "refuse"}}}
OWN_MOUNT = {"kuberay": {"learnerImages": {"mountPath": "/srv/learner", "pullPolicy": "Always"}}}


def _template(values: dict[str, Any] | None, folder: Path) -> Path:
    for name, text in template_map(render_raw(values))["data"].items():
        (folder / name).write_text(text)
    return folder


def _settings(folder: Path) -> CoordinatorSettings:
    return CoordinatorSettings(
        data_dir=folder, database_url="sqlite://", backend="kuberay", kuberay_rayjob_template=folder
    )


def _spec(image: str | None, gpus: int = 0) -> LaunchSpec:
    return LaunchSpec(
        lease_id=3,
        submission_id=4,
        task_order=5,
        attempt=1,
        learner_name="l",
        entrypoint="m:f",
        image=image,
        resources=ResourceRequest(cpus=1, gpus=gpus, memory_mb=2048),
    )


def _pods(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    cluster = job["spec"]["rayClusterSpec"]
    return cluster["headGroupSpec"]["template"]["spec"], cluster["workerGroupSpecs"][0]["template"]["spec"]


def _every_image(obj: Any) -> list[str]:
    """Every container image named anywhere in ``obj`` (containers and init containers)."""
    found: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("containers", "initContainers"):
                found += [c["image"] for c in value]
            found += _every_image(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _every_image(value)
    return found


@pytest.mark.parametrize("gpus", [0, 1])
@pytest.mark.parametrize("values", [None, OWN_MOUNT], ids=["default", "own-mount"])
def test_a_learner_image_is_a_read_only_image_volume_of_the_learner_pod(crd_validators, tmp_path, values, gpus):
    settings = _settings(_template(values, tmp_path))
    job = render_rayjob(_spec(LEARNER, gpus), settings, load_template(tmp_path))
    validator, schema = crd_validators["RayJob"]
    validator.validate(job)
    assert unknown_keys(job, schema) == []
    head, learner = _pods(job)
    mount = (values or {}).get("kuberay", {}).get("learnerImages", {}).get("mountPath", "/var/lib/nevis/learner-image")
    policy = (values or {}).get("kuberay", {}).get("learnerImages", {}).get("pullPolicy", "IfNotPresent")
    assert learner["volumes"] == [{"name": IMAGE_VOLUME, "image": {"reference": LEARNER, "pullPolicy": policy}}]
    (container,) = learner["containers"]
    assert container["volumeMounts"] == [{"name": IMAGE_VOLUME, "mountPath": mount, "readOnly": True}]
    # No pod runs the learner's image: both run the service's own; the head never mounts it.
    assert LEARNER not in _every_image(job)
    assert container["image"] == settings.kuberay_worker_image
    assert all(v["name"] != IMAGE_VOLUME for v in head.get("volumes", []))
    assert yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]["NEVIS_IMAGE_ROOT"] == mount
    assert {"name": "NEVIS_IMAGE_ROOT", "value": mount} in container["env"]  # its launcher checks links
    # The learner pod as the API server would take it (strict: unknown keys are errors).
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "learner"}, "spec": learner}
    kubernetes_validate.validate(pod, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("image", [None, LEARNER], ids=["bundle", "label"])
def test_a_bundle_or_an_image_as_a_label_gets_no_image_volume(crd_validators, tmp_path, image):
    """A bundle has no image; under NEVIS_IMAGE_LEARNERS=installed an image is a label (the
    worker image holds the learner's installation): no volume, and never the pod's image."""
    settings = _settings(_template(None, tmp_path)).model_copy(update={"image_learners": "installed"})
    job = render_rayjob(_spec(image), settings, load_template(tmp_path))
    crd_validators["RayJob"][0].validate(job)
    _, learner = _pods(job)
    assert learner["containers"][0]["image"] == settings.kuberay_worker_image
    assert "volumes" not in learner and "volumeMounts" not in learner["containers"][0]
    assert all(e["name"] != "NEVIS_IMAGE_ROOT" for e in learner["containers"][0]["env"])
    assert "NEVIS_IMAGE_ROOT" not in yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]


def test_the_refuse_fallback_renders_no_volume_and_refuses_image_learners(crd_validators, tmp_path):
    settings = _settings(_template(REFUSE, tmp_path))
    template = load_template(tmp_path)
    _, learner_template = _pods(template.rayjob)
    assert "volumes" not in learner_template and "volumeMounts" not in learner_template["containers"][0]
    job = render_rayjob(_spec(None), settings, template)  # bundles still run
    validator, schema = crd_validators["RayJob"]
    validator.validate(job)
    assert unknown_keys(job, schema) == []
    with pytest.raises(ConfigError, match="learnerImages.delivery is 'refuse'"):
        render_rayjob(_spec(LEARNER), settings, template)
    with pytest.raises(ImageError) as caught:
        register_image(LEARNER, entrypoint="m:f", settings=settings)
    assert str(caught.value) == REFUSED and caught.value.field == "image"


def test_a_coordinator_without_podman_takes_digests_only(tmp_path, monkeypatch):
    """The chart's coordinator has no podman: the kubelet pulls the digest; a tag it cannot
    resolve once is a 422 asking for the digest."""
    settings = _settings(_template(None, tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    registered = register_image(LEARNER, entrypoint="m:f", settings=settings)
    assert (registered.ref, registered.size_bytes) == (LEARNER, None)
    with pytest.raises(ImageError, match="must be named by digest"):
        register_image("registry.example.com/lab/learner:1.0", entrypoint="m:f", settings=settings)


def test_the_harness_names_the_volume_s_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("NEVIS_IMAGE_ROOT", "/var/lib/nevis/learner-image")
    paths = image_import_paths(LEARNER, settings=_settings(tmp_path))
    assert paths[0] == "/var/lib/nevis/learner-image/opt/learner"
    assert all(p.startswith("/var/lib/nevis/learner-image/") and p.endswith(("learner", "-packages")) for p in paths)


@pytest.mark.parametrize(
    "learner_images",
    [
        {"delivery": "initContainer"},
        {"mountPath": "relative/path"},
        {"mountPath": "/var/../etc"},
        {"pullPolicy": "Never"},
    ],
)
def test_the_values_schema_refuses_other_deliveries(learner_images):
    with pytest.raises(helm.HelmError, match="learnerImages"):
        render_raw({"kuberay": {"learnerImages": learner_images}})
