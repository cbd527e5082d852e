"""The ``kuberay`` backend: one KubeRay ``RayJob`` per launched task.

Each manifest is written to the outbox folder (``NEVIS_KUBERAY_OUTBOX``) and, when
``NEVIS_KUBECTL`` names a kubectl, applied with it; before the first, the NetworkPolicies that
fence learner pods are written and applied the same way (a launch without them fails); status and cancellation also go through
kubectl. Without kubectl the backend cannot see its jobs (``UNKNOWN``): the reaper still acts
on the worker's heartbeats and deadlines, and a worker whose lease was taken away stops.
"""

from __future__ import annotations

import subprocess

from services.coordinator.backends.base import JobState, JobStatus, LaunchSpec
from services.coordinator.backends.kuberay_template import render_network_policies, render_rayjob, to_yaml
from services.coordinator.common.config import CoordinatorSettings
from services.core.errors import ConfigError

_STATES = {
    "SUCCEEDED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "STOPPED": JobState.FAILED,
    "RUNNING": JobState.RUNNING,
    "PENDING": JobState.PENDING,
}
KUBECTL_TIMEOUT_S = 60


class KubeRayBackend:
    """RayJobs rendered into a folder and, optionally, applied with kubectl."""

    name = "kuberay"

    def __init__(self, settings: CoordinatorSettings) -> None:
        self.settings = settings
        self.outbox = settings.outbox
        self._fenced = False

    def launch(self, spec: LaunchSpec) -> str:
        if not self._fenced:  # learner pods never start unfenced
            self._write_and_apply("networkpolicies", "---\n".join(map(to_yaml, render_network_policies(self.settings))))
            self._fenced = True
        self._write_and_apply(spec.job_name, to_yaml(render_rayjob(spec, self.settings)))
        return f"kuberay:{self.settings.kuberay_namespace}/{spec.job_name}"

    def _write_and_apply(self, name: str, text: str) -> None:
        self.outbox.mkdir(parents=True, exist_ok=True)
        path = self.outbox / f"{name}.yaml"
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(path)
        if self.settings.kubectl:
            self._kubectl("apply", "-f", str(path))

    def status(self, job_id: str) -> JobStatus:
        if not self.settings.kubectl:
            return JobStatus(JobState.UNKNOWN, "no kubectl configured (NEVIS_KUBECTL)")
        namespace, name = _parse(job_id)
        try:
            out = self._kubectl("get", "rayjob", name, "-n", namespace, "-o", "jsonpath={.status.jobStatus}")
        except ConfigError as exc:
            return JobStatus(JobState.UNKNOWN, str(exc))
        return JobStatus(_STATES.get(out.strip(), JobState.UNKNOWN), out.strip())

    def reap(self) -> None:
        """Nothing to release here: the cluster cleans up its own jobs."""

    def cancel(self, job_id: str) -> None:
        if not self.settings.kubectl:
            return
        namespace, name = _parse(job_id)
        try:
            self._kubectl("delete", "rayjob", name, "-n", namespace, "--ignore-not-found")
        except ConfigError:
            pass

    def _kubectl(self, *args: str) -> str:
        command = [str(self.settings.kubectl), *args]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"Running {' '.join(command)} failed: {exc}") from None
        if done.returncode != 0:
            raise ConfigError(f"{' '.join(command)} failed: {done.stderr.strip()[:500]}")
        return done.stdout


def _parse(job_id: str) -> tuple[str, str]:
    kind, _, rest = job_id.partition(":")
    namespace, _, name = rest.partition("/")
    if kind != "kuberay" or not namespace or not name:
        raise ValueError(f"Not a kuberay job id: {job_id!r} (expected kuberay:<ns>/<name>).")
    return namespace, name


__all__ = ["KUBECTL_TIMEOUT_S", "KubeRayBackend"]
