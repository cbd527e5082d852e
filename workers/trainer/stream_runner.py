"""Run a learner over a stream, task by task, in causal order, on Ray.

For each task from the submission's cursor: load its train/dev splits, run the trials
(:mod:`workers.trainer.task_job`), pick the best on dev error, evaluate it with harness code
on the test split (meta-test phase) or the dev-test split (meta-train phase), and commit the
result, FLOPs and new learner state in one transaction before the next task starts. A run
interrupted at any point resumes from its cursor; nothing committed is redone. A run with a
FLOP or wall-time cap ends ``stopped`` in the transaction that commits the task reaching it
(no further task is started). Every run reads its tasks from the stream version it was
created with (the manifest stored in the database).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, NoReturn

import ray
from sqlalchemy.orm import Session, sessionmaker

from services.core.budget import RunBudget
from services.core.config import Settings
from services.core.errors import LearnerError, NevisError, TaskFailedError
from services.store.db import sessions_on, transaction
from services.store.db.models import Submission, TaskRun, Trial
from services.store.objects import ObjectStore, open_store
from services.store.runs import records
from services.store.runs.outcomes import TaskOutcome, TrialOutcome, best_trial
from services.store.runs.predictions import predictions_key
from services.store.runs.transfer import keep_transfer_record
from services.store.runs.uncertainty import keep_run_interval
from workers.sandbox.client import HostSpec
from workers.sandbox.declaration import LearnerDeclaration
from workers.stream.manifest import StreamManifest, TaskSpec, eval_split
from workers.stream.task_data import TaskData
from workers.trainer.host_usage import EvaluationCost, failed_call_floor, sum_known
from workers.trainer.learner_check import LearnerCheck, fit_to_cluster_here
from workers.trainer.ray_env import connect_ray
from workers.trainer.run_actors import RunActors
from workers.trainer.run_create import create_run, start_run
from workers.trainer.run_data import RunData
from workers.trainer.run_manifests import RunManifests
from workers.trainer.run_plan import Attempt, RunObserver, RunPlan, RunRequest, Silent
from workers.trainer.task_budget import PREPARATION
from workers.trainer.task_job import run_trials
from workers.trainer.task_steps import evaluate, trial_spec
from workers.trainer.trial import TrialSpec
from workers.trainer.trial_flops import no_flops


class StreamRunner:
    """Drives submissions of the ``nevis run`` kind against one database and store."""

    def __init__(
        self,
        settings: Settings,
        *,
        observer: RunObserver | None = None,
        import_paths: Sequence[str] | None = None,
        submitted: bool = False,
        registered: Mapping[str, Any] | None = None,
    ) -> None:
        """``import_paths``: where learner modules are found (an unpacked bundle); default the
        entries of ``PYTHONPATH``. They are the only folders of yours a learner host sees.
        ``submitted``: the learner came from an upload (bundle or image), so it never runs
        outside a learner host (:mod:`workers.sandbox.trust`), whatever the sandbox setting;
        ``registered``: the resources its registration allows (``cpus``, ``gpus`` per task),
        which its declaration may not exceed."""
        self.settings = settings
        self.submitted, self.registered = submitted, registered
        self.observer = observer or Silent()
        if import_paths is None:
            import_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        self.import_paths = tuple(import_paths)
        self.sessions: sessionmaker[Session] = sessions_on(settings.database_url)
        self.store: ObjectStore = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
        self.actors = RunActors(settings)
        self.learners = LearnerCheck(self.actors, self.import_paths, submitted=submitted, registered=registered)
        self.data = RunData(settings, self.sessions, self.store)
        self.manifests = RunManifests()

    def close(self) -> None:
        """Stop the run's warm actors (a new task starts them again if needed)."""
        self.actors.close()

    def __enter__(self) -> StreamRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- entry points -------------------------------------------------------------------

    def start(self, request: RunRequest) -> int:
        """Create a submission for ``request`` and run it to the end; returns its id
        (:func:`~workers.trainer.run_create.start_run`)."""
        return start_run(self, request)

    def create(self, request: RunRequest) -> int:
        """Check ``request``, prepare its data and store it as a new submission; returns its id
        (:func:`~workers.trainer.run_create.create_run`)."""
        return create_run(self, request)

    def run(self, submission_id: int) -> None:
        """Run (or resume) a submission from its cursor to its last task."""
        while self.run_next_task(submission_id):
            pass

    def run_next_task(self, submission_id: int) -> bool:
        """Run the task at the submission's cursor and commit it.

        This is the unit of work one lease covers (a worker runs one or more in a row). Returns
        whether tasks remain after it: False after the last task, and after a task whose
        commit reached a FLOP or wall-time cap (the commit stopped the run). A finished or
        stopped submission returns False at once.
        """
        plan = self.plan(submission_id)
        task = plan.next_task()
        if task is None or self._stop_if_capped(plan):
            return False
        connect_ray(self.settings)  # first: the learner is described by the run's own executors
        self.actors.harness(plan.image_size)  # it starts (a second: a process, the store) meanwhile
        # The task's data is read while the learner is described: both take seconds (a host's
        # start; a train split of up to NEVIS_STREAM_TRAIN_BYTES), and a coordinator's worker
        # pays both for every task. A learner that fails to load is reported without waiting
        # for the read (the thread finishes it; this process waits for it only at exit).
        reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nevis-task-data")
        try:
            reading = reader.submit(self.data.for_task, plan.manifest, task, plan.image_size, plan.phase)
            host, learner = self.learner(plan.learner_spec, plan.budget)
            data = reading.result()
        finally:
            reader.shutdown(wait=False)
        host, learner = fit_to_cluster_here(host, learner)
        with transaction(self.sessions) as session:
            sub = session.get(Submission, submission_id)
            sub.status, sub.error, sub.finished_at = "running", None, None
        self.actors.start(host, learner.resources, plan.budget, plan.image_size)
        return self._run_task(plan, task, host, learner, data)

    def plan(self, submission_id: int) -> RunPlan:
        """What the database holds about a submission, with the manifest it was created with."""
        with self.sessions() as session:
            submission = session.get(Submission, submission_id)
            if submission is None:
                raise NevisError(f"No run with id {submission_id} in this database.")
            manifest = self.manifests.of(session, submission.stream_version_id)  # parsed once per version
            return RunPlan(
                submission_id=submission_id,
                manifest=manifest,
                tasks=manifest.tasks_of_phase(submission.phase),
                learner_spec=submission.learner.entrypoint,
                phase=submission.phase,
                cursor=submission.cursor,
                status=submission.status,
                budget=RunBudget.from_dict(submission.budget),
                image_size=submission.image_size,
                pretrained_key=submission.pretrained_key,
                ruleset=submission.ruleset,
            )

    def learner(self, spec: str, budget: RunBudget) -> tuple[HostSpec, LearnerDeclaration]:
        """Where the learner runs and what it declares, checked (:class:`LearnerCheck`)."""
        return self.learners(self.settings, spec, budget)

    def prepare(self, manifest: StreamManifest, size: int, *, verify: bool = True) -> None:
        """Make sure the stream's shards exist (:meth:`RunData.prepare`: verified in full, or
        with ``verify=False`` listed, as a task's worker does)."""
        self.data.prepare(manifest, size, verify=verify)

    # --- one task --------------------------------------------------------------------------

    def _run_task(
        self, plan: RunPlan, task: TaskSpec, host: HostSpec, learner: LearnerDeclaration, data: TaskData
    ) -> bool:
        """Search, choose, evaluate and commit one task; a failure is recorded, then raised.
        Returns whether the run goes on (neither its last task nor stopped by a cap)."""
        split = eval_split(plan.phase)
        attempt = self._open_attempt(plan, task)
        trial_ids: dict[int, int] = {}
        spec = trial_spec(self, attempt, host, learner, data)
        spec, preparation = self._prepare(attempt, host, learner, spec)
        if spec.rules.task_flop_cap is not None and preparation.flops:  # the cap hears the preparation too
            ray.get(spec.harness.budget_settle.remote(PREPARATION, int(preparation.flops)))
        outcomes = self._search(attempt, learner, spec, trial_ids)
        spent = preparation.flops + sum(o.flops for o in outcomes)  # the preparation, charged once
        best = best_trial(outcomes)
        if best is None:
            first = next((o.error for o in outcomes if o.error), "no trial reported")
            self._fail(attempt, f"all {len(outcomes)} trials failed; first error: {first}", spent)
        images, labels = data.splits[split]
        try:
            error, evaluation, predictions, consistency = evaluate(
                self, attempt, host, learner, data, best, images, labels
            )
        except Exception as exc:  # noqa: BLE001 - the learner's predict failed: the task fails
            cause = getattr(exc, "cause", None) or exc  # unwrap Ray's RayTaskError
            what = str(cause) if isinstance(cause, LearnerError) else f"{type(cause).__name__}: {cause}"
            self._fail(
                attempt,
                f"evaluating the best trial ({best.trial_index}) failed: {what}",
                spent + failed_call_floor(cause),
                cause=exc,
            )  # the evaluation's CPU floor too
        self.store.put_bytes(predictions_key(plan.submission_id, task.order, attempt.number), predictions)
        outcome = TaskOutcome(
            order=task.order,
            best_trial_index=best.trial_index,
            error=error,
            split=split,
            metric="accuracy" if task.kind == "single" else "map",
            flops=float(spent + evaluation.flops),
            wall_time_s=time.perf_counter() - attempt.started,
            peak_memory_bytes=max(o.peak_memory_bytes or 0 for o in outcomes),
            state_key=best.state.key,
            cpu_seconds=sum_known(
                [preparation.cpu_seconds, *(o.cpu_seconds for o in outcomes), evaluation.cpu_seconds]
            ),
            flops_floored=any(o.floored for o in outcomes) or evaluation.floored or preparation.floored,
            flops_near_floor=any(o.near_floor for o in outcomes),
            cpu_estimated=any(c.cpu_estimated for c in (*outcomes, evaluation, preparation)),
            flops_paper=float(sum(o.flops_paper for o in outcomes)),
            flops_prediction=float(evaluation.flops),
            consistency_jump=consistency.jump,
            inconsistent=consistency.flagged,
        )
        with transaction(self.sessions) as session:
            submission = session.get(Submission, plan.submission_id)
            records.commit_task(  # stops the run in this transaction if it reached a cap
                session,
                submission=submission,
                run=session.get(TaskRun, attempt.run_id),
                best_trial=session.get(Trial, trial_ids[best.trial_index]),
                outcome=outcome,
                next_order=plan.next_order(task),
            )
            goes_on = submission.status == "running"
        with self.sessions() as session:  # the transfer report's learner part, read from the state once
            keep_transfer_record(session, self.store, submission_id=plan.submission_id)
        self.observer.task_committed(task, outcome)
        if not goes_on:  # the run ended: E's interval is computed once, for every later reader
            keep_run_interval(self.sessions, self.store, submission_id=plan.submission_id)
        return goes_on

    def _open_attempt(self, plan: RunPlan, task: TaskSpec) -> Attempt:
        with transaction(self.sessions) as session:
            submission = session.get(Submission, plan.submission_id)
            stream_task = records.stream_task(session, stream_version_id=submission.stream_version_id, order=task.order)
            run = records.start_task_run(session, submission=submission, task=stream_task)
            return Attempt(plan=plan, task=task, run_id=run.id, number=run.attempt, started=time.perf_counter())

    def _prepare(
        self, attempt: Attempt, host: HostSpec, learner: LearnerDeclaration, spec: TrialSpec
    ) -> tuple[TrialSpec, EvaluationCost]:
        """The learner's ``prepare_task``, once for the task before its trials (skipped when it
        declares none): its result goes into every trial's spec, its FLOPs to the task once.
        Multi-worker trials do that work themselves. A learner's failure here fails the task,
        charged what the preparation's host last reported (the ``task.failed`` event's FLOPs)."""
        if not learner.prepares_task:
            return spec, EvaluationCost.of(no_flops())
        try:
            done = self.actors.prepare(host, learner.resources, attempt.plan.budget, spec)
        except Exception as exc:  # noqa: BLE001 - the learner's prepare_task failed: the task fails
            cause = getattr(exc, "cause", None) or exc  # unwrap Ray's RayTaskError
            spent = float(getattr(cause, "flops", 0))  # PrepareFailed: what its host last reported
            self._fail(attempt, f"prepare_task failed: {cause}", spent, cause=exc)
        if done is None:
            return spec, EvaluationCost.of(no_flops())
        prepared, fields = done
        return replace(spec, prepared=prepared), EvaluationCost.of(fields)

    def _search(
        self, attempt: Attempt, learner: LearnerDeclaration, spec: TrialSpec, trial_ids: dict[int, int]
    ) -> list[TrialOutcome]:
        """Run the task's trials; each is recorded as it ends (its FLOPs count even if the
        task is interrupted later), its row id kept in ``trial_ids``."""
        plan, task = attempt.plan, attempt.task
        band = self.settings.near_floor_band  # a count within band × its floor is marked near_floor

        def on_trial(outcome: TrialOutcome) -> None:
            outcome = replace(outcome, near_floor_band=band)
            with transaction(self.sessions) as session:
                trial = records.record_trial(session, task_run_id=attempt.run_id, outcome=outcome)
                trial_ids[outcome.trial_index] = trial.id
            self.observer.trial_finished(task, outcome)

        self.observer.task_started(task, plan.tasks.index(task) + 1, len(plan.tasks), plan.budget.trials)
        try:
            outcomes = run_trials(
                learner,
                spec,
                plan.budget,
                storage_path=str(self.settings.data_dir / "ray_results"),
                on_trial=on_trial,
                pool=self.actors.executor_pool(spec.host, learner.resources, plan.budget),
                search=plan.budget.search,
                scheduler=plan.budget.scheduler,
            )
        except KeyboardInterrupt:
            with transaction(self.sessions) as session:
                records.interrupt_task(
                    session,
                    submission=session.get(Submission, plan.submission_id),
                    run=session.get(TaskRun, attempt.run_id),
                )
            raise
        return [replace(o, near_floor_band=band) for o in outcomes]

    def _fail(self, attempt: Attempt, reason: str, spent: float, *, cause: BaseException | None = None) -> NoReturn:
        """Close the attempt, stop the submission with the reason, and raise it."""
        task = attempt.task
        message = f"Task {task.order} ({task.dataset}) failed: {reason}"
        with transaction(self.sessions) as session:
            records.fail_task(
                session,
                submission=session.get(Submission, attempt.plan.submission_id),
                run=session.get(TaskRun, attempt.run_id),
                message=message,
                task_flops=spent,
            )
        raise TaskFailedError(message) from cause

    # --- helpers -----------------------------------------------------------------------------

    def _stop_if_capped(self, plan: RunPlan) -> bool:
        """Stop the submission before its next task if a cap is reached already; whether it was.

        The commit that reaches a cap stops the run (:func:`records.commit_task`), so this is
        defence in depth: a cap lowered after that commit, or a run committed by older code.
        """
        if not plan.budget.capped:
            return False
        with transaction(self.sessions) as session:
            return records.stop_if_capped(session, submission=session.get(Submission, plan.submission_id)) is not None


__all__ = ["StreamRunner"]
