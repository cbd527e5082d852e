"""The KubeRay ``RayJob`` the ``kuberay`` backend renders for one launch, and the
NetworkPolicies that fence its pods.

One RayJob per launched task (named and labelled with its submission, task and lease), on
a cluster that exists only for that job. Trust is split by pod:

- the head pod runs the service's own image (``NEVIS_KUBERAY_HARNESS_IMAGE``): the worker
  harness is the job's driver there, and only there is the credentials Secret mounted, as
  files that the job's runtime env points to (``NEVIS_SECRETS_PATH``; the runtime env itself
  carries no credential). The head takes no Ray tasks (``num-cpus: 0``);
- worker pods run the service's worker image, never the learner's: a learner image is a
  read-only image volume of theirs (:mod:`.kuberay_images`). They hold no Secret, no service
  account token and no service links; learner code runs in bubblewrap hosts there
  (``NEVIS_SANDBOX=bwrap``: no network namespace, so not even Ray's ports);
- :func:`render_network_policies`: learner pods talk to Ray pods and DNS only (no database,
  store or internet); a head's dashboard, which can start jobs, answers only the KubeRay
  operator and the job's submitter, never a learner pod. No Service or Ingress exposes it.

Deadlines mirror the coordinator's: ``preRunningDeadlineSeconds`` is the start timeout and
``activeDeadlineSeconds`` the task deadline times ``NEVIS_WORKER_MAX_TASKS`` (a worker may go
on with its submission's next tasks; each has its own lease, whose deadline the reaper
enforces by cancelling the job); ``backoffLimit`` is 0 because the
coordinator's reaper owns retries (bounded, with back-off, counted per task).
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

from services.coordinator.backends.base import LaunchSpec
from services.coordinator.backends.kuberay_images import mount_learner_image
from services.coordinator.common.config import CoordinatorSettings
from services.core.credentials import SECRETS_PATH_VAR
from services.core.errors import ConfigError
from workers.sandbox.images.mounted import IMAGE_ROOT_VAR

API_VERSION = "ray.io/v1"
DEFAULT_TEMPLATE = Path(__file__).with_name("rayjob_template")
"""The chart's RayJob template rendered with default values (deploy/render_k8s.py writes it)."""
HARNESS_SECRETS_DIR = "/var/run/secrets/nevis"
DASHBOARD_PORT = 8265
WORKER_APP = "nevis-worker"


@dataclass(frozen=True)
class RayJobTemplate:
    """The operator's RayJob (``rayjob.yaml``) and where GPU learners go (``gpu.yaml``): the
    files of the chart's ConfigMap, mounted at NEVIS_KUBERAY_RAYJOB_TEMPLATE."""

    rayjob: dict[str, Any]
    gpu: dict[str, Any]


def load_template(folder: Path | None = None) -> RayJobTemplate:
    """The RayJob template in ``folder`` (default: the chart's default rendering, shipped here).

    Raises:
        ConfigError: a file is missing, not YAML, or not a RayJob with one learner group.
    """
    folder = folder or DEFAULT_TEMPLATE
    try:
        rayjob = yaml.safe_load((folder / "rayjob.yaml").read_text(encoding="utf-8"))
        gpu = yaml.safe_load((folder / "gpu.yaml").read_text(encoding="utf-8")) or {}
        groups = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        ok = rayjob.get("kind") == "RayJob" and len(groups) == 1 and isinstance(gpu, dict)
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ConfigError(f"NEVIS_KUBERAY_RAYJOB_TEMPLATE {folder}: not a RayJob template ({exc}).") from exc
    if not ok:
        raise ConfigError(
            f"NEVIS_KUBERAY_RAYJOB_TEMPLATE {folder}: rayjob.yaml must be a RayJob with one "
            "worker group and gpu.yaml a mapping (render them from helm/nevis)."
        )
    return RayJobTemplate(rayjob=rayjob, gpu=gpu)


def render_rayjob(
    spec: LaunchSpec, settings: CoordinatorSettings, template: RayJobTemplate | None = None
) -> dict[str, Any]:
    """The RayJob manifest (a plain dict, ready for YAML) for one launch: the operator's
    template with this launch's name, labels, entrypoint, runtime env, deadlines, images,
    Secret and learner resources filled in."""
    template = template or load_template(settings.kuberay_rayjob_template)
    job = copy.deepcopy(template.rayjob)
    labels = {
        "app.kubernetes.io/name": WORKER_APP,
        "app.kubernetes.io/managed-by": "nevis-coordinator",
        "nevis.io/submission": str(spec.submission_id),
        "nevis.io/task-order": str(spec.task_order),
        "nevis.io/lease": str(spec.lease_id),
    }
    runtime_env = {
        "env_vars": {
            "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
            "NEVIS_RAY_ADDRESS": "",
            SECRETS_PATH_VAR: HARNESS_SECRETS_DIR,
        }
    }
    job["metadata"] = {
        "name": spec.job_name,
        "namespace": settings.kuberay_namespace,
        "labels": {**job["metadata"].get("labels", {}), **labels},
    }
    body = job["spec"]
    body.update(
        entrypoint=shlex.join([*shlex.split(settings.worker_command), *spec.worker_args()]),
        runtimeEnvYAML=yaml.safe_dump(runtime_env, sort_keys=True),
        activeDeadlineSeconds=int(settings.task_deadline_s * settings.worker_max_tasks),
        preRunningDeadlineSeconds=max(1, int(settings.start_timeout_s)),
        backoffLimit=0,
    )
    cluster = body["rayClusterSpec"]
    cluster["rayVersion"] = version("ray")
    head = cluster["headGroupSpec"]["template"]
    _label(head, labels, "harness")
    head["spec"]["containers"][0]["image"] = settings.kuberay_harness_image
    for volume in head["spec"].get("volumes", []):
        if volume.get("name") == "nevis-secrets":  # the harness's credentials, as files only it reads
            volume["secret"]["secretName"] = settings.kuberay_secret_name
    learner = cluster["workerGroupSpecs"][0]["template"]
    _label(learner, labels, "learner")
    _learner_container(learner, spec, settings, template.gpu)
    image_root = mount_learner_image(job, spec.image if settings.image_learners == "unpack" else None)
    if image_root is not None:  # where the learner pods show the image's files, for the harness
        runtime_env["env_vars"][IMAGE_ROOT_VAR] = image_root
        body["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=True)
    return job


def _label(pod: dict[str, Any], labels: dict[str, str], role: str) -> None:
    pod.setdefault("metadata", {})["labels"] = {**pod["metadata"].get("labels", {}), **labels, "nevis.io/role": role}


def _learner_container(
    pod: dict[str, Any], spec: LaunchSpec, settings: CoordinatorSettings, gpu: dict[str, Any]
) -> None:
    """The learner pod's image (the service's worker image, never a learner's) and resources;
    a GPU learner is scheduled where GPUs are."""
    res = spec.resources
    container = pod["spec"]["containers"][0]
    amounts: dict[str, Any] = {"cpu": f"{int(res.cpus * 1000)}m", "memory": f"{res.memory_mb}Mi"}
    if res.gpus:
        amounts["nvidia.com/gpu"] = res.gpus
    container["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    container["image"] = (gpu.get("image") if res.gpus else None) or settings.kuberay_worker_image
    if res.gpus:
        for key in ("nodeSelector", "tolerations"):
            pod["spec"].pop(key, None)
            if gpu.get(key):
                pod["spec"][key] = copy.deepcopy(gpu[key])


def render_network_policies(settings: CoordinatorSettings) -> list[dict[str, Any]]:
    """The namespace's fences around RayJob pods (applied once; the same for every job)."""
    namespace = settings.kuberay_namespace
    ray_pods = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": WORKER_APP}}}
    dns = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    dashboard = [{"port": DASHBOARD_PORT, "protocol": "TCP"}]
    learner_pods = {"matchLabels": {"app.kubernetes.io/name": WORKER_APP, "nevis.io/role": "learner"}}
    return [
        _network_policy(
            "nevis-learner-fence",
            namespace,
            learner_pods,
            {
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [ray_pods]}],
                "egress": [
                    {"to": [ray_pods]},
                    {"to": [dns], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
                ],
            },
        ),
        _network_policy(
            "nevis-harness-dashboard",
            namespace,
            {"matchLabels": {"app.kubernetes.io/name": WORKER_APP, "nevis.io/role": "harness"}},
            {
                "policyTypes": ["Ingress"],
                "ingress": [
                    # Ray's own ports, from the job's pods; the dashboard is not among them.
                    {
                        "from": [ray_pods],
                        "ports": [
                            {"port": 1, "endPort": DASHBOARD_PORT - 1, "protocol": "TCP"},
                            {"port": DASHBOARD_PORT + 1, "endPort": 65535, "protocol": "TCP"},
                        ],
                    },
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": settings.kuberay_operator_namespace}
                                }
                            }
                        ],
                        "ports": dashboard,
                    },
                    {
                        "from": [
                            {
                                "podSelector": {
                                    "matchExpressions": [{"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]
                                }
                            }
                        ],
                        "ports": dashboard,
                    },  # the RayJob's submitter (a Kubernetes Job)
                ],
            },
        ),
    ]


def _network_policy(name: str, namespace: str, selector: dict[str, Any], rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "nevis-coordinator"},
        },
        "spec": {"podSelector": selector, **rules},
    }


def to_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False)


__all__ = [
    "API_VERSION",
    "DASHBOARD_PORT",
    "DEFAULT_TEMPLATE",
    "HARNESS_SECRETS_DIR",
    "WORKER_APP",
    "RayJobTemplate",
    "load_template",
    "render_network_policies",
    "render_rayjob",
    "to_yaml",
]
