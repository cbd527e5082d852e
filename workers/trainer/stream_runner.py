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

import numpy as np
import ray
from sqlalchemy.orm import Session, sessionmaker

from services.core.budget import RunBudget
from services.core.config import Settings
from services.core.errors import LearnerError, NevisError, TaskFailedError
from services.core.metrics import task_error
from services.core.predictions import encode as encode_predictions
from services.store import key_layout
from services.store.db import sessions_on, transaction
from services.store.db.models import Submission, TaskRun, Trial
from services.store.objects import ObjectStore, open_store
from services.store.runs import records, run_keys
from services.store.runs.outcomes import TaskOutcome, TrialOutcome, best_trial
from services.store.runs.predictions import predictions_key
from services.store.runs.uncertainty import keep_run_interval
from workers.learners.provenance import pretraining_cflop
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.declaration import LearnerDeclaration
from workers.sandbox.learner_calls import describe
from workers.sandbox.limits import HostLimits
from workers.sandbox.trust import bounded_by_registration, multi_worker_refusal
from workers.stream.manifest import StreamManifest, TaskSpec, eval_split
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import stored_image_size
from workers.stream.task_data import TaskData
from workers.stream.task_info import task_info
from workers.stream.versions import ensure_stream_version, stored_manifest
from workers.trainer import searchers
from workers.trainer.consistency import Consistency, judge, plan_check
from workers.trainer.host_usage import EvaluationCost, failed_call_floor, sum_known
from workers.trainer.placement import check_placement_here
from workers.trainer.pretrained_key import stored_pretrained
from workers.trainer.ray_env import connect_ray
from workers.trainer.run_actors import RunActors
from workers.trainer.run_data import RunData
from workers.trainer.run_plan import Attempt, RunObserver, RunPlan, RunRequest, Silent, preferred_budget
from workers.trainer.task_job import fit_to_cluster, run_trials
from workers.trainer.trial import TrialSpec, no_flops


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
        self._declarations: dict[HostSpec, LearnerDeclaration] = {}
        self.sessions: sessionmaker[Session] = sessions_on(settings.database_url)
        self.store: ObjectStore = open_store(settings.store_url, s3_endpoint_url=settings.s3_endpoint_url)
        self.actors = RunActors(settings)
        self.data = RunData(settings, self.sessions, self.store)

    def close(self) -> None:
        """Stop the run's warm actors (a new task starts them again if needed)."""
        self.actors.close()

    def __enter__(self) -> StreamRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- entry points -------------------------------------------------------------------

    def start(self, request: RunRequest) -> int:
        """Create a submission for ``request`` and run it to the end; returns its id."""
        connect_ray(self.settings)  # first, so the learner is described by the run's own executors
        submission_id = self.create(request)
        self.run(submission_id)
        return submission_id

    def create(self, request: RunRequest) -> int:
        """Check ``request``, prepare its data and store it as a new submission; returns its id."""
        manifest = load_stream(request.stream)
        size = stored_image_size(
            manifest,
            settings_size=self.settings.image_size,
            settings_explicit="image_size" in self.settings.model_fields_set,
            override=request.image_size,
        )
        if ray.is_initialized():  # the run's harness starts while its learner is described
            self.actors.harness(size)
        _, learner = self.learner(request.learner, request.budget)
        budget = preferred_budget(request.budget, learner)
        tasks = manifest.tasks_of_phase(request.phase)
        self.prepare(manifest, size)
        pretrained_key = stored_pretrained(self.store, request.pretrained) if request.pretrained else None
        pretraining = pretraining_cflop(self.store.get_bytes(pretrained_key)) if pretrained_key else None
        with transaction(self.sessions) as session:
            version = ensure_stream_version(session, manifest=manifest)
            row = records.ensure_learner(session, spec=request.learner, resources=vars(learner.resources))
            submission = records.create_submission(
                session,
                learner=row,
                stream_version=version,
                phase=request.phase,
                budget=budget,
                image_size=size,
                first_order=tasks[0].order,
                visibility=request.visibility,
                ruleset=request.ruleset,
            )
            submission.pretrained_key, submission.cflop_pretraining = pretrained_key, pretraining
        return submission.id

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
        host, learner = self._fit_to_cluster(host, learner)
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
            manifest = stored_manifest(submission.stream_version)
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
        """Where the learner runs and what it declares, asked of a learner host (this process
        never imports learner code); once per runner.

        Raises:
            UnknownNameError, LearnerError: the learner cannot be loaded or declares nonsense.
            ConfigError: the sandbox asked for is not installed.
        """
        limits = HostLimits.from_settings(self.settings)
        probe = HostSpec(spec, self.import_paths, self.settings.sandbox, budget.threads_per_trial, limits=limits)
        if probe not in self._declarations:
            declared = self.actors.describe_in_guessed_pool(probe, budget) if ray.is_initialized() else None
            if declared is None:
                with LearnerHost(probe) as host:
                    declared = describe(host)
            self._declarations[probe] = declared
        declaration = self._declarations[probe]
        resources = declaration.resources
        refusal = multi_worker_refusal(resources.num_workers, sandbox=self.settings.sandbox, submitted=self.submitted)
        if refusal is not None:
            raise LearnerError(f"Learner {spec!r} {refusal}.")
        check_placement_here(resources, sandbox=self.settings.sandbox, spec=spec)  # before any trial waits
        bounded = bounded_by_registration(resources, self.registered, spec=spec)
        if bounded != resources:
            resources, declaration = bounded, replace(declaration, resources=bounded)
        cpus = max(float(resources.cpus_per_worker), float(budget.threads_per_trial))  # the host's CPU quota
        return HostSpec(
            spec,
            self.import_paths,
            self.settings.sandbox,
            budget.threads_per_trial,
            gpu=resources.gpus_per_worker > 0,
            limits=replace(limits, cpus=cpus),
        ), declaration

    @staticmethod
    def _fit_to_cluster(host: HostSpec, learner: LearnerDeclaration) -> tuple[HostSpec, LearnerDeclaration]:
        """The learner's ask on the connected cluster (an optional GPU only where there is one)."""
        resources = fit_to_cluster(learner.resources, ray.cluster_resources())
        if resources == learner.resources:
            return host, learner
        return replace(host, gpu=resources.gpus_per_worker > 0), replace(learner, resources=resources)

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
        spec = self._trial_spec(attempt, host, learner, data)
        spec, preparation = self._prepare(attempt, host, learner, spec)
        outcomes = self._search(attempt, learner, spec, trial_ids)
        spent = preparation.flops + sum(o.flops for o in outcomes)  # the preparation, charged once
        best = best_trial(outcomes)
        if best is None:
            first = next((o.error for o in outcomes if o.error), "no trial reported")
            self._fail(attempt, f"all {len(outcomes)} trials failed; first error: {first}", spent)
        images, labels = data.splits[split]
        try:
            error, evaluation, predictions, consistency = self._evaluate(
                attempt, host, learner, data, best, images, labels
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

        def on_trial(outcome: TrialOutcome) -> None:
            with transaction(self.sessions) as session:
                trial = records.record_trial(session, task_run_id=attempt.run_id, outcome=outcome)
                trial_ids[outcome.trial_index] = trial.id
            self.observer.trial_finished(task, outcome)

        self.observer.task_started(task, plan.tasks.index(task) + 1, len(plan.tasks), plan.budget.trials)
        try:
            return run_trials(
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

    def _trial_spec(self, attempt: Attempt, host: HostSpec, learner: LearnerDeclaration, data: TaskData) -> TrialSpec:
        """What every trial of the attempt gets: the task's data, the learner's state, the past."""
        plan, task, size = attempt.plan, attempt.task, attempt.plan.image_size
        with self.sessions() as session:
            state_key = records.last_state_key(session, submission_id=plan.submission_id)
            predictors = run_keys.committed_predictor_keys(session, submission_id=plan.submission_id)
        state = (
            self.store.get_bytes(state_key, max_bytes=self.settings.host_state_mb << 20)  # sized before read
            if state_key
            else learner.init_state
        )
        past = {t.order: t for t in plan.tasks if t.order < task.order}
        harness = self.actors.harness(size)
        stopping = searchers.stopping_rule(plan.budget.scheduler, plan.budget.steps)
        streamed = "train" not in data.splits  # too large to send whole: the host asks for its shards
        ray.get(
            harness.begin_task.remote(
                past=past,
                current_order=task.order,
                key_prefix=attempt.key_prefix,
                past_predictors={o: k for o, k in predictors.items() if o in past},
                pretrained_key=plan.pretrained_key,
                stopping=stopping,
                streamed=data.index if streamed else None,
                flop_cap=plan.rules.task_flop_cap,
            )
        )
        return TrialSpec(
            host=host,
            info=task_info(task, data.index, size),
            past=tuple(task_info(t, self.data.index(t, size), size) for t in past.values()),
            stream_length=len(plan.manifest.tasks),
            steps=plan.budget.steps,
            checkpoint_fractions=plan.budget.checkpoint_fractions,
            state=state,
            train=None if streamed else data.labelled("train"),
            dev=data.labelled("dev"),
            key_prefix=attempt.key_prefix,
            harness=harness,
            rungs=stopping.rungs,
            rung_proxy=stopping.proxy,
            train_shards=tuple(s.num_examples for s in data.index.shards["train"]) if streamed else (),
            rules=plan.rules,
        )

    def _evaluate(
        self,
        attempt: Attempt,
        host: HostSpec,
        learner: LearnerDeclaration,
        data: TaskData,
        best: TrialOutcome,
        images: np.ndarray,
        labels: np.ndarray,
    ) -> tuple[float, EvaluationCost, bytes, Consistency]:
        """The chosen predictor's error on the evaluation split, its cost, predictions and, in
        meta-test, the consistency check (:mod:`.consistency`); ``predict`` sees images only."""
        plan = attempt.plan
        check = plan_check(images, enabled=plan.phase == "meta_test")
        scores, flops = self.actors.score(
            host,
            learner.resources,
            plan.budget,
            task_info(attempt.task, data.index, plan.image_size),
            check.images,
            seed=best.seed,
            predictor=self.store.get_bytes(best.predictor.key),
            log_to=(self.actors.harness(plan.image_size), key_layout.predict_log_key(attempt.key_prefix)),
        )
        consistency, scores, kind = judge(check, scores, labels), check.originals(scores), attempt.task.kind
        return (
            task_error(scores, labels, kind),
            EvaluationCost.of(flops),
            encode_predictions(scores, labels, kind),
            consistency,
        )

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
