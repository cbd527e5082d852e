"""The KubeRay ``RayJob`` the ``kuberay`` backend renders for one launch, and the
NetworkPolicies that fence its pods.

One RayJob per launched task (named and labelled with its submission, task and lease), on
a cluster that exists only for that job. Trust is split by pod:

- the head pod runs the service's own image (``NEVIS_KUBERAY_HARNESS_IMAGE``): the worker
  harness is the job's driver there, and only there is the credentials Secret mounted, as
  files that the job's runtime env points to (``NEVIS_SECRETS_PATH``; the runtime env itself
  carries no credential). The head takes no Ray tasks (``num-cpus: 0``);
- worker pods run the learner's image (built FROM the nevis learner base image), with no
  Secret, no service account token and no service links; learner code runs in bubblewrap
  hosts there (``NEVIS_SANDBOX=bwrap``: no network namespace, so not even Ray's ports);
- :func:`render_network_policies`: learner pods talk to Ray pods and DNS only (no database,
  store or internet); a head's dashboard, which can start jobs, answers only the KubeRay
  operator and the job's submitter, never a learner pod. No Service or Ingress exposes it.

Deadlines mirror the coordinator's: ``preRunningDeadlineSeconds`` is the start timeout and
``activeDeadlineSeconds`` the task deadline; ``backoffLimit`` is 0 because the
coordinator's reaper owns retries (bounded, with back-off, counted per task).
"""

from __future__ import annotations

import copy
import shlex
from importlib.metadata import version
from typing import Any

import yaml

from services.coordinator.backends.base import LaunchSpec
from services.coordinator.core.config import CoordinatorSettings
from services.core.credentials import SECRETS_PATH_VAR

API_VERSION = "ray.io/v1"
TTL_AFTER_FINISHED_S = 600
HARNESS_SECRETS_DIR = "/var/run/secrets/nevis"
DASHBOARD_PORT = 8265
WORKER_APP = "nevis-worker"
_SECURITY = {
    "runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
}


def render_rayjob(spec: LaunchSpec, settings: CoordinatorSettings) -> dict[str, Any]:
    """The RayJob manifest (a plain dict, ready for YAML) for one launch."""
    image = spec.image or settings.kuberay_worker_image
    labels = {
        "app.kubernetes.io/name": WORKER_APP,
        "app.kubernetes.io/managed-by": "nevis-coordinator",
        "nevis.io/submission": str(spec.submission_id),
        "nevis.io/task-order": str(spec.task_order),
        "nevis.io/lease": str(spec.lease_id),
    }
    runtime_env = {"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "NEVIS_RAY_ADDRESS": "",
                                SECRETS_PATH_VAR: HARNESS_SECRETS_DIR}}
    entrypoint = shlex.join([*shlex.split(settings.worker_command), *spec.worker_args()])
    return {
        "apiVersion": API_VERSION,
        "kind": "RayJob",
        "metadata": {"name": spec.job_name, "namespace": settings.kuberay_namespace,
                     "labels": labels},
        "spec": {
            "entrypoint": entrypoint,
            "runtimeEnvYAML": yaml.safe_dump(runtime_env, sort_keys=True),
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "activeDeadlineSeconds": int(settings.task_deadline_s),
            "preRunningDeadlineSeconds": max(1, int(settings.start_timeout_s)),
            "backoffLimit": 0,
            "rayClusterSpec": {
                "rayVersion": version("ray"),
                "headGroupSpec": {
                    # The operator and the submitter reach the dashboard through the head's
                    # Service; render_network_policies keeps learner pods away from it.
                    "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
                    "template": _pod(settings.kuberay_harness_image, {**labels, "nevis.io/role": "harness"},
                                     cpus=1.0, memory_mb=2048, gpus=0, name="ray-head",
                                     secret=settings.kuberay_secret_name),
                },
                "workerGroupSpecs": [{
                    "groupName": "learner",
                    "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                    "rayStartParams": {},
                    "template": _pod(image, {**labels, "nevis.io/role": "learner"}, cpus=spec.resources.cpus,
                                     memory_mb=spec.resources.memory_mb,
                                     gpus=spec.resources.gpus, name="ray-worker", secret=None),
                }],
            },
        },
    }


def _pod(image: str, labels: dict[str, str], *, cpus: float, memory_mb: int, gpus: int,
         name: str, secret: str | None) -> dict[str, Any]:
    cpu = f"{int(cpus * 1000)}m"
    resources: dict[str, Any] = {
        "requests": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
        "limits": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
    }
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = gpus
        resources["requests"]["nvidia.com/gpu"] = gpus
    container: dict[str, Any] = {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "resources": resources, "securityContext": copy.deepcopy(_CONTAINER_SECURITY),
    }
    pod: dict[str, Any] = {"securityContext": copy.deepcopy(_SECURITY),
                           "automountServiceAccountToken": False, "enableServiceLinks": False,
                           "containers": [container]}
    if secret:  # the harness's credentials, as files only it reads
        container["volumeMounts"] = [{"name": "nevis-secrets", "mountPath": HARNESS_SECRETS_DIR,
                                      "readOnly": True}]
        pod["volumes"] = [{"name": "nevis-secrets",
                           "secret": {"secretName": secret, "defaultMode": 0o440}}]
    else:  # learner pods: learner code only inside bubblewrap hosts
        container["env"] = [{"name": "NEVIS_SANDBOX", "value": "bwrap"}]
    return {"metadata": {"labels": dict(labels)}, "spec": pod}


def render_network_policies(settings: CoordinatorSettings) -> list[dict[str, Any]]:
    """The namespace's fences around RayJob pods (applied once; the same for every job)."""
    namespace = settings.kuberay_namespace
    ray_pods = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": WORKER_APP}}}
    dns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
           "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    dashboard = [{"port": DASHBOARD_PORT, "protocol": "TCP"}]
    learner_pods = {"matchLabels": {"app.kubernetes.io/name": WORKER_APP, "nevis.io/role": "learner"}}
    return [
        _network_policy("nevis-learner-fence", namespace, learner_pods, {
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [ray_pods]}],
            "egress": [{"to": [ray_pods]},
                       {"to": [dns], "ports": [{"port": 53, "protocol": "UDP"},
                                               {"port": 53, "protocol": "TCP"}]}],
        }),
        _network_policy("nevis-harness-dashboard", namespace, {
            "matchLabels": {"app.kubernetes.io/name": WORKER_APP, "nevis.io/role": "harness"}}, {
            "policyTypes": ["Ingress"],
            "ingress": [
                # Ray's own ports, from the job's pods; the dashboard is not among them.
                {"from": [ray_pods], "ports": [{"port": 1, "endPort": DASHBOARD_PORT - 1, "protocol": "TCP"},
                                               {"port": DASHBOARD_PORT + 1, "endPort": 65535, "protocol": "TCP"}]},
                {"from": [{"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": settings.kuberay_operator_namespace}}}],
                 "ports": dashboard},
                {"from": [{"podSelector": {"matchExpressions": [
                    {"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]}}],
                 "ports": dashboard},  # the RayJob's submitter (a Kubernetes Job)
            ],
        }),
    ]


def _network_policy(name: str, namespace: str, selector: dict[str, Any],
                    rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "nevis-coordinator"}},
            "spec": {"podSelector": selector, **rules}}


def to_yaml(manifest: dict[str, Any]) -> str:
    return yaml.safe_dump(manifest, sort_keys=False)


__all__ = [
    "API_VERSION", "DASHBOARD_PORT", "HARNESS_SECRETS_DIR", "TTL_AFTER_FINISHED_S", "WORKER_APP",
    "render_network_policies", "render_rayjob", "to_yaml",
]
