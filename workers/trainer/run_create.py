"""A submission's start: its request checked, its stream's data prepared, its row stored (and,
for ``nevis run``, run to the end).

Apart from :class:`~workers.trainer.stream_runner.StreamRunner`, which drives the tasks of a
submission that exists (issue 45 item 5); the runner's ``create`` and ``start`` call these.
"""

from __future__ import annotations

import ray

from services.store.db import transaction
from services.store.runs import records
from workers.learners.provenance import pretraining_cflop
from workers.stream.manifest_files import load_stream
from workers.stream.prepare import stored_image_size
from workers.stream.versions import ensure_stream_version
from workers.trainer.pretrained_key import stored_pretrained
from workers.trainer.ray_env import connect_ray
from workers.trainer.run_parts import RunParts
from workers.trainer.run_plan import RunRequest, preferred_budget


def start_run(runner: RunParts, request: RunRequest) -> int:
    """Create a submission for ``request`` and run it to the end; returns its id."""
    connect_ray(runner.settings)  # first, so the learner is described by the run's own executors
    submission_id = create_run(runner, request)
    runner.run(submission_id)
    return submission_id


def create_run(runner: RunParts, request: RunRequest) -> int:
    """Check ``request``, prepare its data and store it as a new submission; returns its id."""
    manifest = load_stream(request.stream)
    settings = runner.settings
    size = stored_image_size(
        manifest,
        settings_size=settings.image_size,
        settings_explicit="image_size" in settings.model_fields_set,
        override=request.image_size,
    )
    if ray.is_initialized():  # the run's harness starts while its learner is described
        runner.actors.harness(size)
    _, learner = runner.learner(request.learner, request.budget)
    budget = preferred_budget(request.budget, learner)
    tasks = manifest.tasks_of_phase(request.phase)
    runner.data.prepare(manifest, size, verify=True)
    store = runner.store
    pretrained_key = stored_pretrained(store, request.pretrained) if request.pretrained else None
    pretraining = pretraining_cflop(store.get_bytes(pretrained_key)) if pretrained_key else None
    with transaction(runner.sessions) as session:
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


__all__ = ["create_run", "start_run"]
