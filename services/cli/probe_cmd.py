"""``nevis probe run`` and ``nevis probe-workers``: probe saved checkpoints, read the results.

``probe run`` queues the probe jobs of a run's committed tasks (idempotently: jobs already
done are not redone) and works through those jobs, and no other job of the shared queue, with
N workers, then prints the report that ``nevis results ID --probes`` prints too
(:mod:`services.cli.probe_report_cmd` reads and prints it).
``probe-workers`` is the long-running pool: it takes jobs from the queue until stopped and,
with ``--watch`` (default), queues the jobs of tasks as soon as they are committed: the one
mechanism that queues probe jobs on its own (accounting never calls the probe layer), with the
settings of ``NEVIS_PROBE_PRESET``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import typer
from rich.console import Console

from services.cli.probe_report_cmd import show_probe_report
from services.core.config import get_settings
from services.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True, help="Probe saved checkpoints (mismatch curves, LiDAR, RankMe).")
console = Console()

_PRESET = typer.Option(
    "standard",
    "--preset",
    help="standard (every checkpoint of the chosen trial + first and last of 1 other, "
    "LiDAR 150 × 4, MLP 32 × 100 steps), publish (the papers' scale, for any "
    "published figure: LiDAR 1000 × 50, every checkpoint of every trial; full "
    "is the same) or ci (small, fast).",
)


def build_settings(preset: str, *, all_trials: bool = False, all_earlier: bool = False, **overrides: Any) -> Any:
    """Probe settings of ``preset`` with the options the user gave (None = keep);
    ``all_trials`` probes every checkpoint of every trial, ``all_earlier`` every earlier task."""
    from services.store.probes.settings import ProbeSettings  # noqa: PLC0415 - imported when the command runs (fast start)

    given = {k: v for k, v in overrides.items() if v is not None}
    if "kinds" in given:
        given["kinds"] = tuple(k.strip() for k in given["kinds"].split(",") if k.strip())
    if all_trials:
        given.update(other_trials=None, other_checkpoints=None)
    if all_earlier:
        given.update(max_earlier=None)
    return ProbeSettings.preset(preset, **given)


def learner_paths(configured: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The folders of learner code the pool's learner hosts see: ``NEVIS_LEARNER_PATHS``, or
    for local use the entries of ``PYTHONPATH``.

    A probe worker holds the database credentials, so learner code must never be on its own
    import path (a ``sitecustomize.py`` there runs in every Python process): in production a
    set ``PYTHONPATH`` is refused, naming the setting to use instead.
    """
    pythonpath = environ.get("PYTHONPATH", "")
    if pythonpath and environ.get("NEVIS_ENVIRONMENT") == "production":
        raise ConfigError(
            "PYTHONPATH is set on a production probe worker: learner code must never be on "
            "the import path of a process that holds credentials. Unset it and name the "
            "folders in NEVIS_LEARNER_PATHS (learner hosts see them read-only)."
        )
    chosen = configured or pythonpath
    return tuple(p for p in chosen.split(os.pathsep) if p)


def _worker_config(
    *,
    submission_id: int | None,
    lease_s: float,
    poll_s: float,
    stop_when_idle: bool,
    threads: int,
    watch: dict | None = None,
    job_ids: tuple[int, ...] | None = None,
) -> Any:
    from workers.probe.runtime.pool import WorkerConfig  # noqa: PLC0415 - imported when the command runs (fast start)

    settings = get_settings()
    paths = learner_paths(settings.learner_paths, os.environ)
    # Image learners' files are unpacked by digest (as the worker harness does), unless the
    # operator's images are labels only (the coordinator's NEVIS_IMAGE_LEARNERS=installed).
    installed = os.environ.get("NEVIS_IMAGE_LEARNERS") == "installed"
    return WorkerConfig(
        database_url=settings.database_url,
        store_url=settings.store_url,
        s3_endpoint_url=settings.s3_endpoint_url,
        lease_s=lease_s,
        poll_s=poll_s,
        stop_when_idle=stop_when_idle,
        submission_id=submission_id,
        job_ids=job_ids,
        threads=threads,
        watch=watch,
        sandbox=settings.sandbox,
        import_paths=paths,
        bundles_dir=str(settings.data_dir / "bundles"),
        images_dir=None if installed else str(settings.data_dir / "images"),
    )


def run(
    submission: int = typer.Option(..., "--submission", help="Run (submission) id to probe."),
    task: int | None = typer.Option(None, "--task", help="Only this task (order); default every committed task."),
    workers: int = typer.Option(
        0, "--workers", "-n", min=0, help="Worker processes (0: one per CPU core, at most 4; 1: in this process)."
    ),
    preset: str = _PRESET,
    folds: int | None = typer.Option(None, "--folds", help="k of the k-fold probes."),
    kinds: str | None = typer.Option(None, "--kinds", help="Comma list of linear, mlp2, mlp3."),
    targets: str | None = typer.Option(None, "--targets", help="earlier (current + earlier tasks) or current."),
    max_earlier: int | None = typer.Option(
        None, "--max-earlier", min=0, help="At most this many earlier target tasks, the most recent (standard: 3)."
    ),
    all_earlier: bool = typer.Option(False, "--all-earlier", help="Every earlier task as a target (publish does)."),
    other_trials: int | None = typer.Option(
        None, "--other-trials", min=0, help="Other trials probed per task besides the chosen one (preset: 1)."
    ),
    other_checkpoints: int | None = typer.Option(
        None,
        "--other-checkpoints",
        min=1,
        help="Checkpoints probed per other trial: first and last, evenly spaced between (preset: 2).",
    ),
    all_trials: bool = typer.Option(False, "--all-trials", help="Probe every checkpoint of every trial of each task."),
    max_examples: int | None = typer.Option(
        None, "--max-examples", help="Held-out (dev + dev_test) images per target task."
    ),
    lidar_n: int | None = typer.Option(None, "--lidar-n", help="Clean images for LiDAR."),
    lidar_q: int | None = typer.Option(None, "--lidar-q", help="Augmentations per clean image."),
    lidar_delta_mode: str | None = typer.Option(
        None, "--lidar-delta-mode", help="relative (default: δ × mean within-class eigenvalue) or absolute."
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed of subsamples, folds and augmentations."),
    lease_s: float = typer.Option(120.0, "--lease-s", help="Job lease (renewed while a job runs)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Queue this run's failed jobs again."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Probe the checkpoints of a run's committed tasks and print the report."""
    from services.store.db import ensure_current, sessions_on, transaction  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.probe.runtime.planner import queue_submission  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.probe.runtime.pool import ProbeWorker, default_threads, default_workers, run_pool  # noqa: PLC0415 - imported when the command runs (fast start)

    probe_settings = build_settings(
        preset,
        folds=folds,
        kinds=kinds,
        targets=targets,
        max_earlier=max_earlier,
        max_examples=max_examples,
        lidar_n=lidar_n,
        lidar_q=lidar_q,
        seed=seed,
        lidar_delta_mode=lidar_delta_mode,
        other_trials=other_trials,
        other_checkpoints=other_checkpoints,
        all_trials=all_trials,
        all_earlier=all_earlier,
    )
    url = get_settings().database_url
    ensure_current(url)
    sessions = sessions_on(url)
    with transaction(sessions) as session:
        queued = queue_submission(
            session, submission_id=submission, settings=probe_settings, task_order=task, retry_failed=retry_failed
        )
    out = Console(stderr=True) if as_json else console
    out.print(
        f"Run {submission}: {queued.added} new probe job(s) queued "
        f"(settings {probe_settings.settings_hash}, preset {preset})."
    )
    workers = workers or default_workers()
    # Only this plan's jobs: others in the shared queue (other runs', other settings') stay.
    config = _worker_config(
        submission_id=submission,
        job_ids=queued.job_ids,
        lease_s=lease_s,
        poll_s=0.5,
        stop_when_idle=True,
        threads=default_threads(workers),
    )
    if workers == 1:

        def on_event(job: Any, outcome: str, seconds: float, message: str) -> None:
            tail = f": {message}" if message else ""
            out.print(
                f"  {job.kind:<10} task {job.task_order:>3}  {outcome:<6} {seconds:6.1f} s  {job.job_key}{tail}",
                highlight=False,
            )

        ProbeWorker(config, on_event=on_event).run()
    else:
        run_pool(
            config,
            workers,
            on_wait=_progress(out, sessions, submission=submission, job_ids=queued.job_ids, workers=workers),
        )
    _note_waiting(out, sessions, submission=submission, job_ids=queued.job_ids)
    show_probe_report(submission, settings_hash=probe_settings.settings_hash, task_order=task, as_json=as_json)


def _progress(
    out: Console, sessions: Any, *, submission: int, job_ids: tuple[int, ...], workers: int
) -> Callable[[], None]:
    """A line each time more of this plan's jobs have finished (the workers print nothing)."""
    from services.store.probes import queue_plans  # noqa: PLC0415 - imported when the command runs (fast start)

    shown = [-1]

    def show() -> None:
        with sessions() as session:
            counts = queue_plans.status_counts(session, submission_id=submission, job_ids=job_ids)
        finished = counts.get("done", 0) + counts.get("failed", 0)
        if finished != shown[0]:
            shown[0] = finished
            failed = f", {counts['failed']} failed" if counts.get("failed") else ""
            out.print(
                f"  probe jobs finished: {finished} of {len(job_ids)}{failed} ({workers} workers)", highlight=False
            )

    return show


def _note_waiting(out: Console, sessions: Any, *, submission: int, job_ids: tuple[int, ...]) -> None:
    """Say so when some of this plan's jobs are left queued: they wait for jobs it did not
    queue (a summary waiting for other tasks' jobs), which are someone else's to run."""
    from services.store.probes import queue_plans  # noqa: PLC0415 - imported when the command runs (fast start)

    with sessions() as session:
        waiting = queue_plans.status_counts(session, submission_id=submission, job_ids=job_ids).get("queued", 0)
    if waiting:
        out.print(
            f"{waiting} of its job(s) still wait for jobs this command did not queue (another "
            "task's, queued by the probe pool's watch or another `nevis probe run`); "
            "`nevis probe-workers` runs them."
        )


def workers_command(
    n: int = typer.Option(1, "-n", "--workers", min=1, help="Worker processes."),
    watch: bool = typer.Option(True, "--watch/--no-watch", help="Queue jobs of newly committed tasks."),
    once: bool = typer.Option(False, "--once", help="Exit when the queue is empty instead of polling."),
    preset: str | None = typer.Option(
        None, "--preset", help="Settings of the watch: standard, ci, full or off (default: NEVIS_PROBE_PRESET)."
    ),
    lease_s: float = typer.Option(120.0, "--lease-s", help="Job lease (renewed while a job runs)."),
    poll_s: float = typer.Option(5.0, "--poll-s", help="Seconds between polls of an empty queue."),
) -> None:
    """Run a pool of probe workers on the queue (Ctrl-C to stop; leases make it safe)."""
    from services.store.db import ensure_current  # noqa: PLC0415 - imported when the command runs (fast start)
    from workers.probe.runtime.pool import default_threads, run_pool  # noqa: PLC0415 - imported when the command runs (fast start)

    ensure_current(get_settings().database_url)
    preset = preset or get_settings().probe_preset
    watch_doc = build_settings(preset).to_dict() if watch and preset != "off" else None
    console.print(f"Starting {n} probe worker(s){' (watching for committed tasks)' if watch else ''}.")
    codes = run_pool(
        _worker_config(
            submission_id=None,
            lease_s=lease_s,
            poll_s=poll_s,
            stop_when_idle=once,
            threads=default_threads(n),
            watch=watch_doc,
        ),
        n,
    )
    console.print(f"Probe workers exited with codes {codes}.")


__all__ = ["app", "build_settings", "learner_paths", "run", "workers_command"]
