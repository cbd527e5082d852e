"""A real two-node Ray cluster on this machine: a head and a learner node, each its own raylet.

``ray start`` twice, as an operator would on two machines: the head (``--num-cpus 1``, the
Jobs API, where job drivers and the harness actor run) and a second node that advertises the
custom resource learner actors ask for (``NEVIS_LEARNER_NODE_RESOURCE``) and a label, so a
trial landing there is placement, not chance. Each node has its own temporary folder and
ports, and runs in its own process group, killed as a group at the end (``ray stop`` would
kill every Ray on the machine, other test sessions' included). Used by the multi-node test
(tests/integration/coordinator/test_two_nodes.py) and bench/chaos.py's node kill.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
LEARNER_RESOURCE = "nevis_learner"  # what the second node advertises and learner actors ask for
LEARNER_LABEL = "nevis-role=learner"
OBJECT_STORE_BYTES = 256 << 20  # each node's; the default (30% of memory) twice would crowd /dev/shm


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RayNode:
    """One ``ray start`` and the process group its daemons live in."""

    name: str
    temp: Path
    pgid: int
    log: str

    def raylet_pids(self) -> list[int]:
        """The raylet processes of this node (found in /proc by process group and name)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if fields[0] not in ("Z", "X") and int(fields[2]) == self.pgid and argv and argv[0].endswith(b"raylet"):
                found.append(int(entry.name))
        return found

    def kill(self) -> None:
        """SIGTERM, then SIGKILL, the node's whole process group."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                return
            time.sleep(1.5)


@dataclass
class TwoNodes:
    """The running cluster: where to reach it and its two nodes."""

    gcs_address: str
    dashboard_url: str
    head: RayNode
    learner: RayNode
    env: dict[str, str] = field(default_factory=dict)
    learner_cpus: int = 1
    replaced: list[RayNode] = field(default_factory=list)  # learner nodes killed and replaced

    def replace_learner(self) -> RayNode:
        """Kill what is left of the learner node and start a new one like it (what an autoscaler
        does for a lost node); returns the new node."""
        old = self.learner
        old.kill()
        self.replaced.append(old)
        self.learner = _start_learner(self.gcs_address, self.learner_cpus, self.env)
        return self.learner

    def nodes(self) -> list[dict]:
        """``ray.nodes()``-like rows from the state API (node id, alive, resources, labels)."""
        from ray.util.state import list_nodes

        return [n.__dict__ if hasattr(n, "__dict__") else dict(n) for n in list_nodes(address=self.dashboard_url)]

    def learner_node_id(self) -> str:
        """The Ray node id of the learner node (the one advertising :data:`LEARNER_RESOURCE`)."""
        for node in self.nodes():
            if node["state"] == "ALIVE" and LEARNER_RESOURCE in (node.get("resources_total") or {}):
                return node["node_id"]
        raise RuntimeError(f"no alive node advertises {LEARNER_RESOURCE}: {self.nodes()}")


def _start(name: str, args: list[str], env: dict[str, str], *, attempts: int = 3) -> RayNode:
    """``ray start`` with ``args``, tried again (fresh ports) when it fails: Ray gives a raylet a
    fixed 30 s to register with the GCS, which a loaded 2-core machine can miss."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(name, args, env)
        except RuntimeError:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_once(name: str, args: list[str], env: dict[str, str]) -> RayNode:
    temp = Path(tempfile.mkdtemp(prefix=f"nevis-ray{name}-"))
    ports = [
        "--node-manager-port",
        str(free_port()),
        "--object-manager-port",
        str(free_port()),
        "--metrics-export-port",
        str(free_port()),
        "--dashboard-agent-listen-port",
        str(free_port()),
        "--dashboard-agent-grpc-port",
        str(free_port()),
        "--runtime-env-agent-port",
        str(free_port()),
    ]
    command = [
        str(VENV_BIN / "ray"),
        "start",
        *args,
        *ports,
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--temp-dir",
        str(temp),
        "--disable-usage-stats",
    ]
    proc = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out, _ = proc.communicate(timeout=180)
    node = RayNode(name=name, temp=temp, pgid=proc.pid, log=out)
    if proc.returncode != 0:
        node.kill()
        raise RuntimeError(f"ray start ({name}) failed:\n{out[-3000:]}")
    return node


@contextmanager
def two_node_cluster(*, head_cpus: int = 1, learner_cpus: int = 1, extra_env: dict[str, str] | None = None):
    """Start the head and the learner node; yield :class:`TwoNodes`; kill both at the end."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **(extra_env or {})}
    for name in ("RAY_ADDRESS", "PYTHONPATH"):  # learners arrive as bundles, not on a path
        env.pop(name, None)
    port, dashboard = free_port(), free_port()
    nodes: list[RayNode] = []
    cluster: TwoNodes | None = None
    try:
        nodes.append(
            _start(
                "head",
                [
                    "--head",
                    "--node-ip-address",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--num-cpus",
                    str(head_cpus),
                    "--include-dashboard",
                    "true",
                    "--dashboard-host",
                    "127.0.0.1",
                    "--dashboard-port",
                    str(dashboard),
                    "--ray-client-server-port",
                    str(free_port()),
                ],
                env,
            )
        )
        nodes.append(_start_learner(f"127.0.0.1:{port}", learner_cpus, env))
        cluster = TwoNodes(f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard}", nodes[0], nodes[1], env, learner_cpus)
        _wait_for_two(cluster)
        yield cluster
    finally:
        if cluster is not None and cluster.learner not in nodes:
            nodes.append(cluster.learner)
        for node in reversed(nodes):
            node.kill()


def _start_learner(gcs_address: str, cpus: int, env: dict[str, str]) -> RayNode:
    """A learner node: its CPUs, the resource learner actors ask for, and the label."""
    args = ["--address", gcs_address, "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus)]
    args += ["--resources", json.dumps({LEARNER_RESOURCE: 1}), "--labels", LEARNER_LABEL]
    return _start("learner", args, env)


def _wait_for_two(cluster: TwoNodes, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            alive = [n for n in cluster.nodes() if n["state"] == "ALIVE"]
            if len(alive) == 2:
                return
            last = alive
        except Exception as exc:  # noqa: BLE001 - the dashboard is still starting
            last = exc
        time.sleep(0.5)
    raise RuntimeError(f"the two Ray nodes did not both come up within {timeout_s:.0f} s: {last}")


__all__ = ["LEARNER_LABEL", "LEARNER_RESOURCE", "RayNode", "TwoNodes", "free_port", "two_node_cluster"]
