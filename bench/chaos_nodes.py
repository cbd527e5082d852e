"""The node kill of bench/chaos.py (``--node-kills K``): the ``ray`` backend on a two-node cluster.

The run's Ray is a real cluster on this machine (``tests/support/ray_cluster.py``): a head,
where the jobs' worker harnesses and their storage actors run, and a learner node, the only one
advertising ``NEVIS_LEARNER_NODE_RESOURCE``, where every learner host runs. A kill point is a
running lease of a task with a whole trial still to come whose learner host, under the learner
node's raylet, is in a trial (the chaos learner names its process so); the kill is a SIGKILL of
that node's raylet (its workers and the learner hosts go with it). ``--node-down-s`` later a new
learner node joins, as an autoscaler would replace a lost one, and the task must go on (a
trial lost, or the attempt retried) and commit exactly once: the verdict is chaos.py's.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from chaos import DROPPED, MARKER, NEVIS, Chaos, Kill, LeaseView, alive, descendants, in_trial, learner_hosts_in, log

from tests.support.ray_cluster import LEARNER_RESOURCE, TwoNodes, two_node_cluster

RUNNING_RUNS = """
SELECT l.id, l.submission_id, l.task_order, l.attempt, r.id,
       (SELECT count(*) FROM trials t WHERE t.task_run_id = r.id),
       (SELECT count(*) FROM trials t WHERE t.task_run_id = r.id AND t.status = 'succeeded')
FROM task_leases l
JOIN submissions s ON s.id = l.submission_id
JOIN stream_tasks st ON st.stream_version_id = s.stream_version_id AND st."order" = l.task_order
JOIN task_runs r ON r.submission_id = l.submission_id AND r.stream_task_id = st.id
     AND r.status = 'running' AND r.started_at >= l.started_at
WHERE l.status = 'running'
ORDER BY l.id
"""


class NodeChaos(Chaos):
    """A chaos run whose kills are node kills, on the ``ray`` backend and a two-node cluster."""

    cluster: TwoNodes | None = None

    def backend_env(self) -> dict[str, str]:
        """Start the cluster (its processes carry the run's marker) and point the coordinator at
        it; the jobs' harnesses read the database and the store from a secrets file on the head."""
        base = {k: v for k, v in os.environ.items() if k not in DROPPED}
        cluster_env = {
            **base,
            MARKER: self.marker,
            "NEVIS_LEARNER_NODE_RESOURCE": LEARNER_RESOURCE,
            "NEVIS_DATA_DIR": str(self.root / "data"),
        }
        self.cluster = self.stack.enter_context(two_node_cluster(extra_env=cluster_env))
        log(f"two-node Ray cluster up: {self.cluster.dashboard_url} (learner node {self.cluster.learner_node_id()})")
        secrets = self.root / "worker-secrets"
        secrets.write_text(f"NEVIS_DATABASE_URL={self.pg.url}\nNEVIS_DATA_DIR={self.root / 'data'}\n")
        return {
            "NEVIS_BACKEND": "ray",
            "NEVIS_RAY_ADDRESS": self.cluster.dashboard_url,
            "NEVIS_RAY_SECRETS_PATH": str(secrets),
            "NEVIS_WORKER_COMMAND": str(NEVIS),
        }

    def learner_raylets(self) -> list[int]:
        return self.cluster.learner.raylet_pids() if self.cluster else []

    def opportunity(self, kill: Kill, *, last_tasks: bool) -> tuple[LeaseView, int | None] | None:
        """A running task run with a whole trial to come whose learner host (under the learner
        node's raylet) is in a trial; None if there is none now."""
        raylets = self.learner_raylets()
        hosts = [p for r in raylets for p in learner_hosts_in(descendants(r)) if in_trial(p)]
        if not hosts:
            return None
        for lease_id, sub, order, attempt, run_id, trials, ok_trials in self.db.rows(RUNNING_RUNS) or []:
            point = (lease_id, int(trials))
            if point in self.used_points or int(trials) > self.last_point():
                continue
            if lease_id in self.struck and not last_tasks:
                continue
            self.used_points.add(point)
            return LeaseView(lease_id, sub, order, attempt, 0, "", run_id, int(trials), int(ok_trials)), hosts[0]
        return None

    def trials_now(self, view: LeaseView) -> tuple[int, int] | None:
        rows = self.db.rows(
            "SELECT l.status, (SELECT count(*) FROM trials t WHERE t.task_run_id = :r), "
            "(SELECT count(*) FROM trials t WHERE t.task_run_id = :r AND t.status = 'succeeded') "
            "FROM task_leases l WHERE l.id = :i",
            i=view.lease_id,
            r=view.run_id,
        )
        if not rows or rows[0][0] != "running":
            return None
        return int(rows[0][1]), int(rows[0][2])

    def strike(self, kill: Kill, view: LeaseView, host: int | None) -> None:
        kill.attempted, kill.at_s = True, round(time.monotonic() - self.started, 1)
        kill.trials_recorded = view.ok_trials
        kill.target = (
            f"submission {view.submission_id} task {view.order} attempt {view.attempt} "
            f"(lease {view.lease_id}, {view.ok_trials} trial(s) done)"
        )
        raylets = self.learner_raylets()
        if not raylets or host is None or not (alive(host) and in_trial(host)):
            kill.note = "the trial ended before the signal"
            log(f"kill node: {kill.target}: {kill.note}")
            return
        for pid in raylets:
            os.kill(pid, signal.SIGKILL)
        kill.effective = True
        down = self.args.node_down_s
        log(f"kill node: SIGKILL of the learner node's raylet {raylets} (host {host} in a trial); new node in {down} s")
        time.sleep(down)
        new = self.cluster.replace_learner()
        kill.note = f"learner raylet pid {raylets[0]} killed in a trial; a new learner node (pgid {new.pgid}) joined"
        log(f"kill node: {kill.target}: {kill.note}")


def node_kill_plan(count: int) -> list[Kill]:
    """``count`` node kills, each at the first kill point (a trial running on the learner node)."""
    return [Kill(kind="node", skip=0, stage="started", delay_s=0.3) for _ in range(count)]


__all__ = ["NodeChaos", "node_kill_plan"]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(f"run bench/chaos.py --node-kills K (this module is its node kill): {Path(__file__).name}")
