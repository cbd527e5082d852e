"""Hostile learners against the service: what each obtained (must be nothing), whether the
harness stayed up, and what it was charged against the harness-measured floor.

Every adversary of issue 20 runs here: through ``nevis run``'s runner (``StreamRunner``, the
learner on this machine's import path, the default ``NEVIS_SANDBOX=auto``) and, where the
route matters, as an upload (``submitted=True``: what the coordinator's worker runs for a
bundle or image learner) or through the API (a FastAPI ``TestClient`` on the real app, SQLite);
hostile learner images (built with podman) are ``bench/adversary_images.py``; the public-labels
attack on salted splits (lookup tables) is ``bench/adversary_lookup.py``.
The learners are ``tests/integration/learner_fixtures/nevis_hostile_learners.py``; each
records in its saved state what it obtained (``state["obtained"]``).

A *finding* is: an adversary that obtained something, a refusal that did not happen, a
harness that did not answer a plain learner afterwards, a count below the harness floor
that was not charged and marked, a count topped up to just over the floor that was charged
under 1/4 of the tracked network's work and not marked (``floor`` or ``near_floor``), or a
carried table of labels that scored on salted splits without a mark. The last line prints the number of findings (target 0).

Usage: ``python bench/adversaries.py``; it takes a few minutes on 2 cores.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "integration" / "learner_fixtures"


@dataclass
class Outcome:
    name: str
    route: str
    outcome: str  # what happened, in words
    obtained: dict[str, Any] = field(default_factory=dict)
    charged: float | None = None
    floor: float | None = None
    cpu_s: float | None = None
    source: str = ""
    finding: str = ""


def stream_file(folder: Path, tasks: int) -> str:
    """A stream of procedurally generated shapes tasks (no download, no offline data)."""
    rule = {"kind": "random", "fractions": {"train": 0.6, "dev": 0.1, "dev_test": 0.1, "test": 0.2}, "seed": 0}
    catalogue = [
        (2004, "shapes:shape", "single", 4),
        (2012, "shapes:hue", "single", 6),
        (2020, "shapes:scale", "single", 4),
    ]
    doc = {
        "format": 1,
        "name": f"adv{tasks}",
        "version": "bench-1",
        "description": "adversaries",
        "source": "bench",
        "meta_test_from_year": 2019,
        "image_size": 16,
        "tasks": [
            {
                "order": i + 1,
                "year": y,
                "dataset": d,
                "title": d,
                "domain": "shape",
                "kind": k,
                "num_classes": n,
                "split": rule,
            }
            for i, (y, d, k, n) in enumerate(catalogue[:tasks])
        ],
    }
    path = folder / f"adv{tasks}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def make_runner(*, submitted: bool = False, import_paths=None, **env: str):
    from services.core.config import get_settings
    from workers.trainer.stream_runner import StreamRunner

    for name, value in env.items():
        os.environ[name] = value
    get_settings.cache_clear()
    runner = StreamRunner(get_settings(), submitted=submitted, import_paths=import_paths)
    for name in env:
        os.environ.pop(name)
    return runner


def run_one(
    runner,
    name: str,
    stream: str,
    *,
    steps: int = 1,
    route: str = "nevis run",
    expect_refusal: bool = False,
    scheduler: str = "fifo",
) -> Outcome:
    from sqlalchemy import select

    from services.core.budget import RunBudget
    from services.store.db.models import TaskRun, Trial
    from services.store.objects import open_store
    from workers.trainer.run_plan import RunRequest

    budget = RunBudget(trials=1, steps=steps, checkpoint_fractions=(1.0,), scheduler=scheduler)
    started = time.perf_counter()
    try:
        run = runner.start(RunRequest(stream=stream, learner=f"nevis_hostile_learners:{name}", budget=budget))
    except Exception as exc:  # noqa: BLE001 - a refusal or a failed task is an outcome
        text = f"{type(exc).__name__}: {str(exc).splitlines()[0][:150]}"
        finding = "" if expect_refusal or "failed" in text or "deadline" in text else "unexpected error"
        return Outcome(name, route, f"refused/failed in {time.perf_counter() - started:.0f} s: {text}", finding=finding)
    with runner.sessions() as session:
        trials = session.scalars(select(Trial).join(TaskRun).where(TaskRun.submission_id == run)).all()
        key = session.scalars(
            select(TaskRun.learner_state_key).where(TaskRun.submission_id == run).order_by(TaskRun.id.desc())
        ).first()
        charged = sum(t.flops for t in trials)
        floor = sum(t.flops_floor or 0 for t in trials)
        cpu = sum(t.cpu_seconds or 0 for t in trials)
        sources = ",".join(sorted({t.flops_source for t in trials}))
    state = pickle.loads(open_store(runner.settings.store_url).get_bytes(key))
    obtained = dict(state.get("obtained") or {}) if isinstance(state, dict) else {}
    finding = "obtained something" if obtained else ""
    if expect_refusal:
        finding = finding or "ran instead of being refused"
    return Outcome(
        name, route, f"ran in {time.perf_counter() - started:.0f} s", obtained, charged, floor, cpu, sources, finding
    )


def two_member_archive() -> bytes:
    """A gzip of a one-file tar, then a second gzip member with a hidden module."""

    def tar_of(files: dict[str, bytes]) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()

    return gzip.compress(tar_of({"pkg/__init__.py": b""})) + gzip.compress(
        tar_of({"pkg/hidden.py": b"x = 1\n", "pkg/big.bin": bytes(8 << 20)})
    )


def api_adversaries(folder: Path) -> list[Outcome]:
    """Through the real app: a two-member .tar.gz upload."""
    from fastapi.testclient import TestClient

    from services.coordinator.app import create_app
    from services.coordinator.common.config import CoordinatorSettings
    from services.coordinator.crud import users
    from services.store.db import make_engine, session_factory, transaction, upgrade

    data = folder / "api"
    settings = CoordinatorSettings(data_dir=data, database_url=f"sqlite:///{data / 'nevis.sqlite'}", streams_dir=folder)
    data.mkdir()
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    with transaction(session_factory(engine)) as session:
        user = users.create_user(session, name="mallory", role="submitter")
        _, token = users.create_token(session, user=user, label="bench")
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/v1/learners/bundle",
            headers={"Authorization": f"Bearer {token}"},
            data={"name": "two-member", "entrypoint": "pkg.hidden:make"},
            files={"file": ("two.tar.gz", two_member_archive(), "application/gzip")},
        )
    ok = 400 <= answer.status_code < 500
    return [
        Outcome(
            "two_member_archive",
            "API upload",
            f"HTTP {answer.status_code}: {answer.json().get('detail', '')[:120] if ok else answer.text[:120]}",
            finding="" if ok else "accepted",
        )
    ]


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="nevis-adversaries-"))
    (folder / "data").mkdir()
    os.environ["NEVIS_DATA_DIR"] = str(folder / "data")
    for var in ("NEVIS_DATABASE_URL", "NEVIS_STORE_URL", "NEVIS_SANDBOX"):
        os.environ.pop(var, None)
    sys.path[:0] = [str(FIXTURES)]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(FIXTURES), os.environ.get("PYTHONPATH")) if p)
    from adversary_images import image_adversaries
    from adversary_lookup import lookup_adversaries
    from nevis_hostile_learners import FLOOR_STEPS

    from services.core.config import get_settings
    from services.store.db import upgrade
    from workers.trainer.ray_env import connect_ray

    get_settings.cache_clear()
    upgrade(get_settings().database_url)
    connect_ray(get_settings())
    one, three = stream_file(folder, 1), stream_file(folder, 3)
    runner = make_runner()
    results = [
        run_one(runner, "two_workers_spy", one),  # sandboxed ranks (issue 46): runs, obtains nothing
        run_one(
            make_runner(submitted=True, NEVIS_SANDBOX="none"),
            "two_workers_spy",
            one,
            route="upload (sandbox none)",
            expect_refusal=True,
        ),
        run_one(runner, "mlp_tracked", one, steps=FLOOR_STEPS),
        run_one(runner, "mlp_raw", one, steps=FLOOR_STEPS),
        run_one(runner, "meter_patcher", one, steps=FLOOR_STEPS),
        run_one(runner, "floor_topper", one, steps=FLOOR_STEPS),
        run_one(runner, "hoarder", three),
        run_one(runner, "lock_signaller", three),
        run_one(runner, "tmpfs_filler", one),
        run_one(runner, "fork_bomber", one),
        run_one(runner, "frame_forger", one),
        run_one(runner, "rung_forger", one, steps=8, scheduler="proxy", expect_refusal=True),
        run_one(make_runner(NEVIS_HOST_STATE_MB="2"), "state_bloater", one, expect_refusal=True),
        run_one(make_runner(NEVIS_HOST_DECLARE_DEADLINE_S="20"), "silent", one, expect_refusal=True),
        *api_adversaries(folder),
        *[
            Outcome(**found)
            for found in image_adversaries(folder, lambda paths: make_runner(submitted=True, import_paths=paths))
        ],
        *[Outcome(**found) for found in lookup_adversaries(folder, one, FIXTURES, make_runner)],
    ]
    honest = run_one(runner, "mlp_tracked", one, steps=1)  # the harness still serves a plain learner
    results.append(
        Outcome(
            "harness after all",
            "nevis run",
            honest.outcome,
            finding="" if honest.outcome.startswith("ran") else "harness down",
        )
    )
    tracked = next(r for r in results if r.name == "mlp_tracked" and r.charged)
    for r in results:
        if r.charged is not None and r.floor and r.charged < r.floor:
            r.finding = r.finding or "charged below the floor"
        if r.name in ("mlp_raw", "meter_patcher") and r.source != "floor":
            r.finding = r.finding or "a count of nobody's was not marked"
        topped = r.name == "floor_topper" and r.charged is not None and r.source not in ("floor", "near_floor")
        if topped and r.charged < tracked.charged / 4:
            r.finding = r.finding or "a topped-up count was charged under 1/4 of the work and not marked"
        if r.name in ("rung_forger", "state_bloater") and "announces" not in r.outcome:
            r.finding = r.finding or "not refused before its bytes were read"
    print(
        f"{'adversary':<20} {'route':<22} {'charged':>10} {'floor':>10} {'cpu s':>6} {'source':<18} "
        f"{'obtained':<10} outcome"
    )
    for r in results:
        money = (
            f"{r.charged:10.3e} {r.floor:10.3e} {r.cpu_s:6.1f} {r.source:<18}"
            if r.charged is not None
            else f"{'-':>10} {'-':>10} {'-':>6} {'':<18}"
        )
        print(
            f"{r.name:<20} {r.route:<22} {money} {json.dumps(r.obtained) if r.obtained else 'nothing':<10} "
            f"{r.outcome}{'  FINDING: ' + r.finding if r.finding else ''}"
        )
    raw = next(r for r in results if r.name == "mlp_raw")
    if raw.charged is not None and tracked.charged:
        print(
            f"raw arithmetic charged {raw.charged / tracked.charged:.3f} x the tracked network "
            f"({'marked' if raw.source == 'floor' else 'NOT marked'} as floored)"
        )
    findings = sum(bool(r.finding) for r in results)
    print(f"findings: {findings}")
    runner.close()
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
