"""Probe workers: a loop that claims jobs, keeps their leases alive, and commits results.

A :class:`ProbeWorker` runs in one process: claim a job (queue), run it (jobs) while a
heartbeat thread renews the lease, then write the results and mark the job done in one
transaction. A :class:`~services.core.errors.ProbeInputError` (missing or corrupted
checkpoint, a learner that cannot load it) or a :class:`LearnerError` (the learner broke
its contract) fails the job at once with its message; any
other exception is retried until the job's attempts run out. Neither stops the worker.

:func:`run_pool` starts N such workers as separate processes (``spawn``, so no state is
shared) and waits for them. With ``stop_when_idle`` a worker exits once nothing it may take
is queued or running; otherwise it polls forever, and with ``watch`` it also queues the
jobs of newly committed tasks.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.core.errors import LearnerError, ManifestError, ProbeInputError
from services.store.db import sessions_on, transaction
from services.store.objects import open_store
from services.store.probes import queue
from services.store.probes.queue import ClaimedJob, LeaseLostError
from services.store.probes.settings import ProbeSettings
from workers.probe.runtime.jobs import run_job
from workers.probe.runtime.planner import enqueue_committed
from workers.probe.runtime.probe_runtime import ProbeRuntime

log = logging.getLogger("nevis.probe")

JobEvent = Callable[[ClaimedJob, str, float, str], None]  # job, outcome, seconds, message


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker process needs (picklable, so it can cross ``spawn``).

    Attributes:
        database_url: SQLAlchemy URL of the database holding the queue.
        store_url: Object store of the checkpoints and datasets.
        s3_endpoint_url: S3-compatible endpoint, if any.
        lease_s: Lease length; the heartbeat renews it every ``lease_s / 3`` seconds.
        poll_s: Sleep between claims when nothing is ready.
        stop_when_idle: Exit once no job it may take is queued or running.
        submission_id: Only take this submission's jobs (None: any).
        job_ids: Only take these jobs (None: any): ``nevis probe run`` drains the jobs it
            queued, never other jobs waiting in the shared queue.
        threads: torch / BLAS threads of the worker.
        watch: Settings (as a dict) to queue newly committed tasks with; None: don't.
        sandbox: Where learner hosts run (``NEVIS_SANDBOX``: auto, bwrap or none).
        import_paths: Folders where learner modules are found (default: none).
        bundles_dir: Where uploaded learner bundles are unpacked (the service's
            ``NEVIS_DATA_DIR/bundles``); None: probing an uploaded learner fails, saying so.
        images_dir: Where learner images are unpacked, by digest, as files for the learner
            hosts (the service's ``NEVIS_DATA_DIR/images``); None: an image learner's code
            comes from ``import_paths`` (``NEVIS_IMAGE_LEARNERS=installed``).
    """

    database_url: str
    store_url: str
    s3_endpoint_url: str | None = None
    lease_s: float = queue.DEFAULT_LEASE_S
    poll_s: float = 2.0
    stop_when_idle: bool = True
    submission_id: int | None = None
    job_ids: tuple[int, ...] | None = None
    threads: int = 1
    watch: dict[str, Any] | None = None
    sandbox: str = "auto"
    import_paths: tuple[str, ...] = ()
    bundles_dir: str | None = None
    images_dir: str | None = None


def worker_name() -> str:
    """A lease owner name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeaseHeartbeat:
    """Renews a job's lease in a background thread until stopped; notes a lost lease."""

    def __init__(self, worker: ProbeWorker, job: ClaimedJob) -> None:
        self.worker, self.job = worker, job
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"heartbeat-{job.id}")

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        interval = max(0.05, self.worker.config.lease_s / 3.0)
        while not self._stop.wait(interval):
            try:
                with transaction(self.worker.sessions) as session:
                    held = queue.heartbeat(session, self.job, lease_s=self.worker.config.lease_s)
            except Exception:
                log.warning("heartbeat of probe job %s failed", self.job.id, exc_info=True)
                continue
            if not held:
                self.lost = True
                return


class ProbeWorker:
    """One worker: claims and runs jobs until told to stop (see the module docstring)."""

    def __init__(self, config: WorkerConfig, *, owner: str | None = None, on_event: JobEvent | None = None) -> None:
        self.config = config
        self.owner = owner or worker_name()
        self.sessions = sessions_on(config.database_url)
        self.runtime = ProbeRuntime(
            self.sessions,
            open_store(config.store_url, s3_endpoint_url=config.s3_endpoint_url),
            sandbox=config.sandbox,
            import_paths=config.import_paths,
            threads=config.threads,
            bundles_dir=Path(config.bundles_dir) if config.bundles_dir else None,
            images_dir=Path(config.images_dir) if config.images_dir else None,
        )
        self.on_event = on_event or (lambda job, outcome, seconds, message: None)
        self._watch = ProbeSettings.from_dict(config.watch) if config.watch is not None else None

    def run_once(self) -> bool:
        """Claim and run one job; False when nothing was ready."""
        with transaction(self.sessions) as session:
            job = queue.claim(
                session,
                owner=self.owner,
                lease_s=self.config.lease_s,
                submission_id=self.config.submission_id,
                job_ids=self.config.job_ids,
            )
        if job is None:
            return False
        started = time.perf_counter()
        try:
            with LeaseHeartbeat(self, job):
                writer = run_job(self.runtime, job)
            seconds = time.perf_counter() - started
            with transaction(self.sessions) as session:
                writer(session)
                queue.complete(session, job, wall_time_s=seconds)
        except (ProbeInputError, LearnerError, ManifestError) as exc:  # would only fail again
            self._fail(job, str(exc), retry=False, started=started)
        except LeaseLostError as exc:
            self.on_event(job, "lost", time.perf_counter() - started, str(exc))
            log.warning("%s", exc)
        except Exception as exc:  # noqa: BLE001 - transient until attempts run out
            text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
            self._fail(job, text, retry=True, started=started)
        except KeyboardInterrupt:
            # Give the job back at once instead of leaving it to its lease.
            self._fail(job, "interrupted (Ctrl-C) while running", retry=True, started=started)
            raise
        else:
            self.on_event(job, "done", seconds, "")
        return True

    def _fail(self, job: ClaimedJob, reason: str, *, retry: bool, started: float) -> None:
        with transaction(self.sessions) as session:
            status = queue.fail(session, job, reason=reason, retry=retry)
        seconds = time.perf_counter() - started
        outcome = {"queued": "retry", "failed": "failed"}.get(status or "", "lost")
        self.on_event(job, outcome, seconds, reason.splitlines()[0] if reason else "")
        log.warning("probe job %s (%s) %s: %s", job.id, job.job_key, outcome, reason)

    def has_open_jobs(self) -> bool:
        """Whether a job this worker may take is still claimable or running (one waiting only
        for jobs outside its selection is not: see :func:`queue.has_work`)."""
        with self.sessions() as session:
            return queue.has_work(session, submission_id=self.config.submission_id, job_ids=self.config.job_ids)

    def run(self, *, stop: threading.Event | None = None) -> int:
        """Work until idle (``stop_when_idle``) or until ``stop`` is set; returns jobs run."""
        stop = stop or threading.Event()
        done, scanned = 0, -float("inf")
        try:
            while not stop.is_set():
                if self._watch is not None and time.monotonic() - scanned >= self.config.poll_s:
                    with transaction(self.sessions) as session:  # at most once per poll interval
                        enqueue_committed(session, settings=self._watch)
                    scanned = time.monotonic()
                if self.run_once():
                    done += 1
                    continue
                if self.config.stop_when_idle and not self.has_open_jobs():
                    break
                stop.wait(self.config.poll_s)
        finally:
            self.runtime.close()
        return done


def _worker_main(config: WorkerConfig) -> None:
    import torch  # noqa: PLC0415

    torch.set_num_threads(max(1, config.threads))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    ProbeWorker(config).run()


def start_workers(config: WorkerConfig, n: int) -> list[multiprocessing.process.BaseProcess]:
    """Start ``n`` worker processes (spawned) and return them."""
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_worker_main, args=(config,), name=f"probe-worker-{i}", daemon=False) for i in range(n)
    ]
    for process in processes:
        process.start()
    return processes


def run_pool(
    config: WorkerConfig, n: int, *, on_wait: Callable[[], None] | None = None, wait_s: float = 2.0
) -> list[int | None]:
    """Run ``n`` worker processes to completion; returns their exit codes. ``on_wait`` is
    called every ``wait_s`` while they run (a progress line) and once at the end."""
    processes = start_workers(config, n)
    try:
        while alive := [process for process in processes if process.is_alive()]:
            alive[0].join(timeout=wait_s)
            if on_wait is not None:
                on_wait()
    except KeyboardInterrupt:
        for process in processes:
            process.terminate()
        for process in processes:
            process.join()
        raise
    return [p.exitcode for p in processes]


def default_workers() -> int:
    """Worker processes when none are asked for: one per CPU core, at most 4. A checkpoint job
    keeps its learner host busy and a trial job's fits run on one thread, so one worker leaves
    cores idle; on offline (2 cores) two workers probed a task in 147 s instead of 190 s."""
    return max(1, min(4, os.cpu_count() or 1))


def default_threads(n: int) -> int:
    """Threads per worker so that n workers share the machine's CPUs."""
    return max(1, (os.cpu_count() or 1) // max(1, n))


__all__ = [
    "JobEvent",
    "LeaseHeartbeat",
    "ProbeWorker",
    "WorkerConfig",
    "default_threads",
    "default_workers",
    "run_pool",
    "start_workers",
    "worker_name",
]
