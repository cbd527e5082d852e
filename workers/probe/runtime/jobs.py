"""Running one claimed probe job: read what it needs, compute, and hand back a writer.

Each ``run_*`` function reads from the database in a short session, computes without
holding any transaction, and returns a *writer*: a function that writes the results (as
upserts) into a session. The worker calls the writer in the same transaction that marks
the job done (:func:`services.store.probes.queue.complete`), so results and completion commit
together or not at all. What a worker keeps between jobs is a
:class:`~workers.probe.runtime.probe_runtime.ProbeRuntime`.

Job kinds, one module each:
- ``checkpoint`` (:mod:`workers.probe.runtime.checkpoint_jobs`): load the checkpoint, extract
  features once per target task (stored for the trial job), LiDAR, RankMe and the held-out
  pretext error and loss.
- ``trial`` (:mod:`workers.probe.runtime.trial_jobs`): every probe kind with k folds on every
  target, batched over the trial's checkpoints (:mod:`workers.probe.runtime.trial_fits`), then
  the mismatch scores of each (target, probe kind) over the checkpoints (convergence index on
  the held-out pretext loss).
- ``summary`` (:mod:`workers.probe.runtime.summary_jobs`): Spearman ρ and Kendall τ-b between
  LiDAR / RankMe and linear-probe accuracy.

Every writer also records the job's *analysis FLOPs* on its ``probe_jobs`` row: for a
checkpoint job the learner's passes (loading, ``features``, ``predict``, augmentation),
metered in its learner host (:mod:`workers.probe.runtime.context`); for a trial job the probe fits
(:mod:`workers.probe.fits.fit_flops`); a summary job counts none (numpy only). They are the
harness's analysis, kept apart: nothing here touches a submission's FLOPs or cFLOP.
"""

from __future__ import annotations

from services.store.probes.queue import ClaimedJob
from workers.probe.runtime.checkpoint_jobs import run_checkpoint_job
from workers.probe.runtime.probe_runtime import ProbeRuntime, Writer
from workers.probe.runtime.summary_jobs import run_summary_job
from workers.probe.runtime.trial_jobs import run_trial_job


def run_job(runtime: ProbeRuntime, job: ClaimedJob) -> Writer:
    """Compute ``job`` and return its writer (see the module docstring)."""
    runners = {"checkpoint": run_checkpoint_job, "trial": run_trial_job, "summary": run_summary_job}
    return runners[job.kind](runtime, job)


__all__ = ["run_job"]
