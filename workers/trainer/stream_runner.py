"""Run a learner over a stream, task by task, in causal order, on Ray.

For each task from the submission's cursor: load its train/dev splits, run the trials
(:mod:`workers.trainer.task_job`), pick the best on dev error, evaluate it with harness code
on the test split (meta-test phase) or the dev-test split (meta-train phase), and commit the
result, FLOPs and new learner state in one transaction before the next task starts. A run
stopped at any point resumes from its cursor; nothing committed is redone.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from typing import Any, Protocol

import ray
from sqlalchemy.orm import Session, sessionmaker

from services.core.config import Settings
from services.core.errors import NevisError, TaskFailedError
from services.store.db import make_engine, session_factory, transaction
from services.store.db.models import Submission
from services.store.objects import ObjectStore, open_store
from workers.learners.protocol import LabelledData, Learner, TaskInfo
from workers.learners.registry import load_learner
from workers.stream.catalog import database_recorder
from workers.stream.manifest import StreamManifest, TaskSpec
from workers.stream.prepare import load_task_data, load_task_index, prepare_stream, stored_image_size
from workers.probe.settings import ProbeSettings
from workers.stream.registry import load_stream
from workers.trainer import records
from workers.trainer.budget import RunBudget
from workers.trainer.evaluation import task_error
from workers.trainer.ray_env import connect_ray
from workers.trainer.run_actors import RunActors
from workers.trainer.task_job import best_trial, run_trials
from workers.trainer.trial import TrialSpec


class RunObserver(Protocol):
    """What the runner tells a user interface (progress bars, logs)."""

    def task_started(self, task: TaskSpec, position: int, total: int, trials: int) -> None: ...
    def trial_finished(self, task: TaskSpec, result: dict[str, Any]) -> None: ...
    def task_committed(self, task: TaskSpec, error: float, flops: float) -> None: ...


class _Silent:
    def task_started(self, task: TaskSpec, position: int, total: int, trials: int) -> None: ...
    def trial_finished(self, task: TaskSpec, result: dict[str, Any]) -> None: ...
    def task_committed(self, task: TaskSpec, error: float, flops: float) -> None: ...


@dataclass(frozen=True)
class RunRequest:
    """What ``nevis run`` asks for."""

    stream: str
    learner: str
    phase: str = "meta_test"
    budget: RunBudget = RunBudget()
    image_size: int | None = None


def tasks_of_phase(manifest: StreamManifest, phase: str) -> tuple[TaskSpec, ...]:
    """Meta-test runs the whole stream; meta-train runs the meta-train tasks only."""
    if phase == "meta_test":
        return manifest.tasks
    if phase == "meta_train":
        return manifest.meta_train
    raise NevisError(f"Unknown phase {phase!r}: use 'meta_train' or 'meta_test'.")


def eval_split(phase: str) -> str:
    return "test" if phase == "meta_test" else "dev_test"


_RUN_KEYS = ("image_size", "stream_ref")  # kept with the budget, not part of it


@dataclass(frozen=True)
class _Plan:
    manifest: StreamManifest
    tasks: tuple[TaskSpec, ...]
    learner_spec: str
    phase: str
    cursor: int
    status: str
    budget: RunBudget
    image_size: int


class StreamRunner:
    """Drives submissions of the ``nevis run`` kind against one database and store."""

    def __init__(self, settings: Settings, *, observer: RunObserver | None = None) -> None:
        self.settings = settings
        self.observer = observer or _Silent()
        self.sessions: sessionmaker[Session] = session_factory(make_engine(settings.database_url))
        self.store: ObjectStore = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
        self.actors = RunActors(settings)
        self._prepared: set[tuple[str, str, int]] = set()
        self._indices: dict[tuple[str, int], Any] = {}
        preset = settings.probe_preset
        self._probe_settings = None if preset == "off" else ProbeSettings.preset(preset)

    # --- entry points -------------------------------------------------------------------

    def start(self, request: RunRequest) -> int:
        """Create a submission for ``request`` and run it to the end; returns its id."""
        submission_id = self.create(request)
        self.run(submission_id)
        return submission_id

    def create(self, request: RunRequest) -> int:
        """Check ``request``, prepare its data and store it as a new submission; returns its id."""
        manifest = load_stream(request.stream)
        learner = load_learner(request.learner)
        tasks = tasks_of_phase(manifest, request.phase)
        size = stored_image_size(
            manifest, settings_size=self.settings.image_size,
            settings_explicit="image_size" in self.settings.model_fields_set, override=request.image_size,
        )
        self._prepare(manifest, size)
        budget = {**request.budget.to_dict(), "image_size": size, "stream_ref": request.stream}
        res = learner.resources()
        with transaction(self.sessions) as session:
            version = records.ensure_stream_version(session, manifest=manifest)
            row = records.ensure_learner(session, spec=request.learner, resources=vars(res))
            submission = records.create_submission(
                session, learner=row, stream_version=version, phase=request.phase,
                budget=budget, first_order=tasks[0].order,
            )
        return submission.id

    def run(self, submission_id: int) -> None:
        """Run (or resume) a submission from its cursor to its last task."""
        while self.run_next_task(submission_id):
            pass

    def run_next_task(self, submission_id: int) -> bool:
        """Run the task at the submission's cursor and commit it.

        This is the unit of work a scheduler launches (one Ray job per task). Returns
        whether tasks remain after it; a finished submission returns False at once.
        """
        plan = self._plan(submission_id)
        if plan.status == "succeeded":
            return False
        task = next((t for t in plan.tasks if t.order >= plan.cursor), None)
        if task is None:
            return False
        learner = load_learner(plan.learner_spec)
        self._prepare(plan.manifest, plan.image_size)
        connect_ray(self.settings)
        with transaction(self.sessions) as session:
            sub = session.get(Submission, submission_id)
            sub.status, sub.error, sub.finished_at = "running", None, None
        self._check_caps(submission_id, plan.budget)
        # Start the run's warm actors now: their imports overlap with loading the task's data.
        self.actors.start(learner, plan.learner_spec, plan.budget)
        self._run_task(submission_id, plan.manifest, plan.tasks, task, plan.tasks.index(task) + 1,
                       learner, plan.learner_spec, plan.budget, plan.image_size, plan.phase)
        return task is not plan.tasks[-1]

    def _plan(self, submission_id: int) -> "_Plan":
        """Everything stored about a submission that the runner needs, checked."""
        with self.sessions() as session:
            submission = session.get(Submission, submission_id)
            if submission is None:
                raise NevisError(f"No run with id {submission_id} in this database.")
            manifest = load_stream(submission.budget["stream_ref"])
            stored = submission.stream_version
            if (manifest.name, manifest.version) != (stored.name, stored.version):
                raise NevisError(
                    f"Run {submission_id} used stream {stored.name} {stored.version}; the "
                    f"manifest found now is {manifest.name} {manifest.version}."
                )
            return _Plan(
                manifest=manifest, tasks=tasks_of_phase(manifest, submission.phase),
                learner_spec=submission.learner.entrypoint, phase=submission.phase,
                cursor=submission.cursor, status=submission.status,
                budget=RunBudget.from_dict({k: v for k, v in submission.budget.items() if k not in _RUN_KEYS}),
                image_size=int(submission.budget["image_size"]),
            )

    # --- one task --------------------------------------------------------------------------

    def _run_task(self, submission_id: int, manifest: StreamManifest, tasks: tuple[TaskSpec, ...],
                  task: TaskSpec, position: int, learner: Learner, learner_spec: str,
                  budget: RunBudget, size: int, phase: str) -> None:
        started = time.perf_counter()
        split = eval_split(phase)
        data = load_task_data(self.store, task, image_size=size, splits=("train", "dev", split))
        info = task_info(task, data.index, size)
        past = {t.order: t for t in tasks if t.order < task.order}
        with transaction(self.sessions) as session:
            submission = session.get(Submission, submission_id)
            stream_task = records.stream_task(session, stream_version_id=submission.stream_version_id, order=task.order)
            run = records.start_task_run(session, submission=submission, task=stream_task)
            state_key = records.last_state_key(session, submission_id=submission_id)
        prefix = f"runs/{submission_id}/task-{task.order:03d}/attempt-{run.attempt}"
        state = self.store.get_bytes(state_key) if state_key else pickle.dumps(learner.init_state())
        harness = self.actors.harness(size)
        ray.get(harness.begin_task.remote(past=past, current_order=task.order, key_prefix=prefix))
        spec = TrialSpec(
            learner_spec=learner_spec, info=info,
            past=tuple(task_info(t, self._index(t, size), size) for t in past.values()),
            stream_length=len(manifest.tasks), steps=budget.steps,
            checkpoint_fractions=budget.checkpoint_fractions, threads=budget.threads_per_trial,
            state=state, train=LabelledData(*data.splits["train"]), dev=LabelledData(*data.splits["dev"]),
            key_prefix=prefix, harness=harness,
        )
        trial_ids: dict[int, int] = {}

        def on_trial(result: dict[str, Any]) -> None:
            with transaction(self.sessions) as session:
                trial_ids[int(result["trial_index"])] = records.record_trial(session, task_run_id=run.id, result=result).id
            self.observer.trial_finished(task, result)

        self.observer.task_started(task, position, len(tasks), budget.trials)
        try:
            results = run_trials(learner, spec, budget, storage_path=str(self.settings.data_dir / "ray_results"),
                                 on_trial=on_trial, pool=self.actors.executor_pool(learner, learner_spec, budget))
        except KeyboardInterrupt:
            self._interrupt(submission_id, run.id)
            raise
        spent = sum(r.get("flops_measured", 0) + r.get("flops_reported", 0) for r in results)
        best = best_trial(results)
        if best is None:
            first = next((r.get("error") for r in results if r.get("error")), "no trial reported")
            message = f"Task {task.order} ({task.dataset}) failed: all {len(results)} trials failed; first error: {first}"
            with transaction(self.sessions) as session:
                submission = session.get(Submission, submission_id)
                records.fail_task(session, submission=submission, run=session.merge(run), message=message, task_flops=spent)
            raise TaskFailedError(message)
        images, labels = data.splits[split]
        try:
            scores, eval_flops = self.actors.score(learner, learner_spec, budget, info, images, seed=int(best["seed"]),
                                                   predictor=self.store.get_bytes(best["predictor"]["key"]))
            error = task_error(scores, labels, task.kind)
        except Exception as exc:  # noqa: BLE001 - the learner's predict failed: the task fails
            cause = getattr(exc, "cause", None) or exc  # unwrap Ray's RayTaskError
            message = (f"Task {task.order} ({task.dataset}) failed: evaluating the best trial "
                       f"({best['trial_index']}) failed: {type(cause).__name__}: {cause}")
            with transaction(self.sessions) as session:
                submission = session.get(Submission, submission_id)
                records.fail_task(session, submission=submission, run=session.merge(run), message=message, task_flops=spent)
            raise TaskFailedError(message) from exc
        task_flops = float(spent + eval_flops["flops_measured"] + eval_flops["flops_reported"])
        next_order = next((t.order for t in tasks if t.order > task.order), None)
        with transaction(self.sessions) as session:
            submission = session.get(Submission, submission_id)
            records.commit_task(
                session, submission=submission, run=session.merge(run),
                best_trial=session.get(records.Trial, trial_ids[int(best["trial_index"])]),
                error=error, split=split, metric="accuracy" if task.kind == "single" else "map",
                task_flops=task_flops, wall_time_s=time.perf_counter() - started,
                peak_memory_bytes=max(int(r.get("peak_memory_bytes") or 0) for r in results),
                state_key=best["state"]["key"], next_order=next_order,
                probe_settings=self._probe_settings,
            )
        self.observer.task_committed(task, error, task_flops)

    # --- helpers -----------------------------------------------------------------------------

    def _index(self, task: TaskSpec, size: int) -> Any:
        """A past task's shard index (class names, counts), read once per run."""
        key = (task.dataset, size)
        if key not in self._indices:
            self._indices[key] = load_task_index(self.store, task, image_size=size)
        return self._indices[key]

    def _prepare(self, manifest: StreamManifest, size: int) -> None:
        """Make sure the stream's shards exist and verify, once per stream and size in this
        runner (every later read checks each shard's checksum again anyway)."""
        key = (manifest.name, manifest.version, size)
        if key in self._prepared:
            return
        prepare_stream(manifest, self.store, image_size=size, offline_dir=self.settings.offline_data_dir,
                       on_prepared=database_recorder(self.sessions, self.store))
        self._prepared.add(key)

    def _interrupt(self, submission_id: int, run_id: int) -> None:
        with transaction(self.sessions) as session:
            run = session.get(records.TaskRun, run_id)
            run.status, run.error = "failed", "interrupted by the user (Ctrl-C)"
            submission = session.get(Submission, submission_id)
            submission.status, submission.error = "failed", f"interrupted; resume with `nevis run --resume {submission_id}`"

    def _check_caps(self, submission_id: int, budget: RunBudget) -> None:
        if budget.flop_cap is None and budget.wall_cap_s is None:
            return
        from workers.trainer.results import load_summary  # noqa: PLC0415

        with self.sessions() as session:
            summary = load_summary(session, submission_id=submission_id)
        wall = sum(t.wall_time_s or 0.0 for t in summary.tasks)
        reason = None
        if budget.flop_cap is not None and summary.cflop >= budget.flop_cap:
            reason = f"FLOP cap {budget.flop_cap:.3g} reached ({summary.cflop:.3g} spent)"
        if budget.wall_cap_s is not None and wall >= budget.wall_cap_s:
            reason = f"wall-time cap {budget.wall_cap_s:.0f} s reached ({wall:.0f} s spent)"
        if reason:
            with transaction(self.sessions) as session:
                submission = session.get(Submission, submission_id)
                submission.status, submission.error = "failed", f"stopped: {reason}"
            raise NevisError(f"Run {submission_id} stopped: {reason}.")


def task_info(task: TaskSpec, index: Any, size: int) -> TaskInfo:
    """What a learner may know about a task: metadata and split sizes, no data."""
    class_names = tuple(index.class_names) if index is not None else ()
    num_classes = index.num_classes if index is not None else (task.num_classes or 0)
    counts = index.counts if index is not None else {}
    return TaskInfo(
        order=task.order, key=task.key, dataset=task.dataset, title=task.title, year=task.year,
        domain=task.domain, kind=task.kind, num_classes=num_classes, class_names=class_names,
        image_size=size, num_train=int(counts.get("train", 0)), num_dev=int(counts.get("dev", 0)),
    )
