"""The Helm chart helm/nevis rendered offline, for the chart's tests (tests/unit/deploy).

Rendering uses Helm's own Go SDK through helm-python-sdk.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from tests.support.k8s_schema import unknown_keys  # noqa: F401 - re-exported for the chart's tests

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "nevis"
PROD_VALUES = CHART / "ci" / "production-values.yaml"
KUBERAY_SCHEMAS = ROOT.parent / "shared" / "schemas" / "kuberay"
LEARNER_POLICIES = ROOT / "k8s" / "kuberay-networkpolicies.yaml"
KUBE_VERSION = "1.34.0"
CRD_FILES = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
    "RayCronJob": "ray.io_raycronjobs.yaml",
}
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


def render_raw(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    rendered = helm.Chart.load(CHART).render(values or {}, name="nevis", namespace="nevis", is_install=True)
    return [
        doc
        for path, text in sorted(rendered.items())
        if path.endswith(".yaml")
        for doc in yaml.load_all(text, Loader=_UniqueKeyLoader)
        if doc
    ]


PROD = yaml.safe_load(PROD_VALUES.read_text())
CASES = {"default": None, "production": PROD}


def pod_specs(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod template an object holds."""
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return [(obj["kind"], spec["template"]["spec"])]
    if obj["kind"] == "CronJob":
        return [("CronJob", spec["jobTemplate"]["spec"]["template"]["spec"])]
    if obj["kind"] == "RayCluster":
        return [("head", spec["headGroupSpec"]["template"]["spec"])] + [
            (g["groupName"], g["template"]["spec"]) for g in spec["workerGroupSpecs"]
        ]
    return []


def containers(objects):
    for obj in objects:
        for where, pod in pod_specs(obj):
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield f"{obj['metadata']['name']}/{where}/{container['name']}", pod, container


def one(objects, kind, name=None):
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def settings_map(objects):
    """The ConfigMap of NEVIS_* settings (the other one holds the RayJob template)."""
    (obj,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config")]
    return obj


def template_map(objects):
    """The ConfigMap holding the RayJob template the coordinator mounts."""
    (obj,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-rayjob-template")]
    return obj


def release_prefix(objects) -> str:
    """The release's name prefix, from the settings ConfigMap's name."""
    return settings_map(objects)["metadata"]["name"].removesuffix("-config")


def learner_pods(objects):
    """Every pod that starts learner hosts: Ray learner pods (standing cluster and RayJob
    template) and the probe workers (they load checkpoints with learner code)."""
    for obj in objects:
        for where, pod in pod_specs(obj):
            name = obj["metadata"]["name"]
            if where in ("cpu", "gpu") or name.endswith(("-probe-workers", "-probe-catchup")):
                yield f"{name}/{where}", pod
    job = yaml.safe_load(template_map(objects)["data"]["rayjob.yaml"])
    for group in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        yield "rayjob-template/" + group["groupName"], group["template"]["spec"]
