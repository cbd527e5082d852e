"""A local Ray cluster started by the service: its processes, the workers Ray starts ahead
included, inherit an environment without the driver's credentials, while the driver keeps
its own, and actors take those workers rather than starting processes of their own. Runs in a
subprocess: a real Ray of its own, beside the test session's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, ray
from workers.trainer.ray_env import start_local_ray

start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
import time

def idle_workers():
    found = set()
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"ray::IDLE" in open(f"/proc/{p}/cmdline", "rb").read():
                found.add(int(p))
        except OSError:
            pass
    return found

deadline = time.monotonic() + 60
while not (ahead := idle_workers()) and time.monotonic() < deadline:
    time.sleep(0.1)

@ray.remote(num_cpus=0)
class Spy:
    def seen(self):
        names = ("AWS_SECRET_ACCESS_KEY", "NEVIS_DATABASE_URL", "NEVIS_DATA_DIR")
        return os.getpid(), {n: os.environ.get(n) for n in names}

pid, seen = ray.get(Spy.remote().seen.remote())
print(json.dumps({"seen": seen, "driver": os.environ.get("AWS_SECRET_ACCESS_KEY"),
                  "took_a_worker_started_ahead": pid in ahead}))
ray.shutdown()
"""


def test_a_local_cluster_inherits_no_credential_and_its_actors_use_workers_started_ahead() -> None:
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": "s3cr3t", "NEVIS_DATABASE_URL": "postgresql://u:pw@db/x"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["seen"]["AWS_SECRET_ACCESS_KEY"] in ("", None)
    assert report["seen"]["NEVIS_DATABASE_URL"] == "sqlite://"
    assert report["seen"]["NEVIS_DATA_DIR"].startswith("/nonexistent")
    assert report["driver"] == "s3cr3t"  # the driver's own environment is as it was
    assert report["took_a_worker_started_ahead"]
