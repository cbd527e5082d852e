"""Hostile learner images for bench/adversaries.py: what each obtained (must be nothing).

The images are the tests' (tests/support/learner_images.py), built here with podman:

- ``startup_files``: a sitecustomize, usercustomize, .pth files and fake ``ray`` and
  ``services`` packages in ``/opt/learner`` and in the site-packages the image adds. Obtained:
  any of them run in a learner host or in this (harness) process, or a host module resolved
  from the image.
- ``hostile_fs``: a setuid binary, a device node, a symlink to ``/`` and one out of the root.
  Obtained: any of them still there, with its bit, or leading outside the image.
- ``over_the_cap``: more files than the cap. Obtained: not refused.
- ``snooper``: the test learners' ``cheater`` from the image, trained through the runner as an
  upload: it reads the Ray session folder, ``/proc/*/environ``, secrets, and the network.
  Obtained: anything of those.

Each result is a dict with the fields of ``adversaries.Outcome``.
"""

from __future__ import annotations

import builtins
import pickle
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _result(name: str, outcome: str, obtained: dict[str, Any], *, refusal: bool = False) -> dict[str, Any]:
    finding = "obtained something" if obtained else ""
    return {
        "name": name,
        "route": "image (podman)",
        "outcome": outcome,
        "obtained": obtained,
        "finding": finding or ("" if not refusal or "refused" in outcome else "not refused"),
    }


def _facts(paths: tuple[str, ...]) -> dict[str, Any]:
    from workers.sandbox.client import HostSpec, LearnerHost
    from workers.sandbox.learner_calls import describe

    with LearnerHost(HostSpec("nevis_img_probe:make", import_paths=paths, sandbox="auto")) as host:
        return pickle.loads(describe(host).init_state)


def image_adversaries(folder: Path, runner_for) -> list[dict[str, Any]]:
    """Build, unpack and run the hostile images; ``runner_for(import_paths)`` makes the
    runner an uploaded learner gets (``StreamRunner(..., submitted=True)``)."""
    sys.path.insert(0, str(ROOT))
    from tests.support.learner_images import MARK, build_hostile_fs, build_plain
    from workers.sandbox.images import ImageError, ImageLimits, unpack_image

    suffix = uuid.uuid4().hex[:8]
    plain_tag, fs_tag = f"localhost/nevis-bench-plain-{suffix}:1", f"localhost/nevis-bench-fs-{suffix}:1"
    results = []
    try:
        build_plain(folder / "plain-image", plain_tag)
        build_hostile_fs(fs_tag)
        cache = folder / "images"
        plain = unpack_image(plain_tag, cache=cache, limits=ImageLimits())
        facts = _facts(plain.import_paths)
        shadowed = {m: o for m, o in facts["origins"].items() if o and o.startswith(str(plain.root))}
        ran = [*facts["ran"], *(f"harness:{k}" for k in dir(builtins) if k.startswith(MARK))]
        results.append(
            _result(
                "startup_files",
                "unpacked, host started",
                {k: v for k, v in {"ran": ran, "shadowed": shadowed}.items() if v},
            )
        )
        fs = unpack_image(fs_tag, cache=cache, limits=ImageLimits())
        facts = _facts(fs.import_paths)
        kept = {
            "setuid": bool(facts["su"] and facts["su"] & (stat.S_ISUID | stat.S_ISGID)),
            "device": facts["dev"] is not None,
            "escaping_link": facts["escape"] is not None,
            "root_outside_image": not str(facts["to_root"]).startswith(str(fs.root)),
        }
        results.append(_result("hostile_fs", "unpacked, host started", {k: v for k, v in kept.items() if v}))
        try:
            unpack_image(fs_tag, cache=folder / "capped", limits=ImageLimits(max_files=3))
            results.append(_result("over_the_cap", "unpacked", {"unpacked": True}, refusal=True))
        except ImageError as exc:
            results.append(_result("over_the_cap", f"refused: {str(exc)[:100]}", {}, refusal=True))
        results.append(_snoop(runner_for(plain.import_paths), folder))
    finally:
        subprocess.run(["podman", "rmi", "-f", plain_tag, fs_tag], capture_output=True, timeout=120, check=False)
    return results


def _snoop(runner, folder: Path) -> dict[str, Any]:
    from sqlalchemy import select

    from services.core.budget import RunBudget
    from services.store.db.models import TaskRun
    from services.store.objects import open_store
    from workers.trainer.run_plan import RunRequest

    stream = next(folder.glob("adv1.json"))
    run = runner.start(
        RunRequest(
            stream=str(stream),
            learner="nevis_test_learners:cheater",
            budget=RunBudget(trials=1, steps=1, checkpoint_fractions=(1.0,)),
        )
    )
    with runner.sessions() as session:
        key = session.scalars(select(TaskRun.learner_state_key).where(TaskRun.submission_id == run)).first()
    machine = pickle.loads(open_store(runner.settings.store_url).get_bytes(key))["cheats"][0]["machine"]
    got = {
        k: machine[k]
        for k in ("env_secrets", "foreign_environs_with_secrets", "readable_paths", "connected")
        if machine[k]
    }
    if machine["visible_pids"] > 3:
        got["visible_pids"] = machine["visible_pids"]
    return _result("snooper", "ran (trained from the image's files)", got)


__all__ = ["image_adversaries"]
