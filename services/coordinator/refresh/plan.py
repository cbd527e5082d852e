"""What a refresh queues on a new stream version: the baselines and the pinned submissions.

- Baselines: each built-in learner of ``NEVIS_REFRESH_BASELINES`` in the meta-test phase (the
  one leaderboards rank) with ``NEVIS_REFRESH_BUDGET``, owned by the ``NEVIS_REFRESH_OWNER`` user.
- Pinned: for each (learner, phase, owner) with a pinned submission on another version of the
  same stream, the newest such submission, copied: learner, phase, budget, owner, visibility
  and pretrained checkpoint. Its image size is kept when the owner chose it, and follows the
  new version's default when it was the old version's default. Owners an admin disabled are
  left out.

A planned run the version already has (a queued, running, succeeded or stopped submission of
the same learner and phase; for a pinned run, of the same owner too) is skipped, so a refresh
never duplicates work that exists. Runs that cannot be queued (a learner name taken by a
user's learner, a budget over today's limits) are skipped with a note, not an error.
Quotas are not checked (the service starts these runs, not their owners), but the runs count
in their owners' quotas afterwards like any submission.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.coordinator.common.client_errors import InvalidInputError
from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.config_refresh import refresh_budget_of
from services.coordinator.common.validation import split_list
from services.coordinator.crud.submission_checks import check_budget
from services.core import rulesets
from services.core.budget import RunBudget
from services.core.errors import BudgetError, ManifestError, UnknownNameError
from services.core.rulesets import DEFAULT_RULESET
from services.store.db.models import Learner, StreamVersion, Submission
from services.store.db.models_coordinator import ScheduledSubmission, User
from services.store.runs import records
from workers.stream.manifest import StreamManifest
from workers.stream.prepare import stored_image_size
from workers.stream.versions import stored_manifest

BASELINE_PHASE = "meta_test"
"""The phase baselines re-run in: the whole stream, scored on meta-test (the ranked phase)."""
KEPT_STATUSES: tuple[str, ...] = ("queued", "running", "succeeded", "stopped")
"""A submission in one of these on the target version already does a planned run's work.

``stopped`` is kept: such a run ended at its own FLOP or wall-time cap, as its budget asked,
and queueing it again with that budget would only stop at the same cap (a ``failed`` or
``cancelled`` one is queued again)."""


@dataclass(frozen=True)
class PlannedRun:
    """One submission a refresh means to queue."""

    kind: str  # "baseline" or "pinned"
    learner: Learner
    owner: User
    phase: str
    budget: RunBudget
    image_size: int
    visibility: str = "public"
    pretrained_key: str | None = None
    cflop_pretraining: float | None = None  # the pretrained checkpoint's own run, shown beside
    source_id: int | None = None  # the pinned submission copied
    code_url: str | None = None  # where the learner's code is public, copied from the pinned one
    ruleset: str = "open"  # the rules it plays by, copied from the pinned one (its board is that ruleset's)


@dataclass
class Plan:
    """The runs to queue and why others were left out."""

    runs: list[PlannedRun]
    notes: list[str]


def default_image_size(manifest: StreamManifest, settings: CoordinatorSettings) -> int:
    """The stored resolution a run of ``manifest`` gets when nobody chose one."""
    return stored_image_size(
        manifest, settings_size=settings.image_size, settings_explicit="image_size" in settings.model_fields_set
    )


def refresh_owner(session: Session, settings: CoordinatorSettings) -> User:
    """The user owning the baselines' refresh runs, made (role submitter) on first use."""
    found = session.scalar(select(User).where(User.name == settings.refresh_owner))
    if found is not None:
        return found
    user = User(name=settings.refresh_owner, role="submitter")
    session.add(user)
    session.flush()
    return user


def baseline_runs(
    session: Session, *, settings: CoordinatorSettings, manifest: StreamManifest, owner: User, notes: list[str]
) -> list[PlannedRun]:
    """One run per ``NEVIS_REFRESH_BASELINES`` entry (its built-in row, made if missing), under
    the entry's ruleset (``name@ruleset``; ``open`` without one)."""
    budget = refresh_budget_of(settings.refresh_budget)
    size = default_image_size(manifest, settings)
    runs = []
    for entry in split_list(settings.refresh_baselines):
        name, _, ruleset = entry.partition("@")
        learner = records.ensure_learner(session, spec=name, resources={})
        if learner.entrypoint != name:
            notes.append(f"baseline {name!r} skipped: a registered learner has that name")
            continue
        try:
            rulesets.ruleset(ruleset or DEFAULT_RULESET).apply(budget)
        except (BudgetError, UnknownNameError) as exc:
            notes.append(f"baseline {entry!r} skipped: {exc}")
            continue
        runs.append(
            PlannedRun(
                kind="baseline",
                learner=learner,
                owner=owner,
                phase=BASELINE_PHASE,
                budget=budget,
                image_size=size,
                ruleset=ruleset or DEFAULT_RULESET,
            )
        )
    return runs


def pinned_runs(
    session: Session,
    *,
    settings: CoordinatorSettings,
    version: StreamVersion,
    manifest: StreamManifest,
    notes: list[str],
) -> list[PlannedRun]:
    """The newest pinned submission per (learner, phase, owner) on the stream's other versions."""
    rows = session.execute(
        select(Submission, User)
        .join(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .join(User, User.id == ScheduledSubmission.user_id)
        .join(StreamVersion, StreamVersion.id == Submission.stream_version_id)
        .where(
            StreamVersion.name == version.name,
            StreamVersion.id != version.id,
            Submission.pinned.is_(True),
            User.disabled_at.is_(None),
        )
        .order_by(Submission.id.desc())
    ).all()
    seen: set[tuple[int, str, int]] = set()
    runs = []
    for source, owner in rows:
        key = (source.learner_id, source.phase, owner.id)
        if key in seen:
            continue
        seen.add(key)
        run = _copy(source, owner, settings=settings, manifest=manifest, notes=notes)
        if run is not None:
            runs.append(run)
    return runs


def _copy(
    source: Submission, owner: User, *, settings: CoordinatorSettings, manifest: StreamManifest, notes: list[str]
) -> PlannedRun | None:
    try:
        budget = check_budget(RunBudget.from_dict(source.budget), settings=settings)
        old_default = default_image_size(stored_manifest(source.stream_version), settings)
    except (InvalidInputError, BudgetError, ManifestError) as exc:
        notes.append(f"pinned submission {source.id} skipped: {exc}")
        return None
    size = default_image_size(manifest, settings) if source.image_size == old_default else source.image_size
    return PlannedRun(
        kind="pinned",
        learner=source.learner,
        owner=owner,
        phase=source.phase,
        budget=budget,
        image_size=size,
        visibility=source.visibility,
        pretrained_key=source.pretrained_key,
        cflop_pretraining=source.cflop_pretraining,
        source_id=source.id,
        code_url=source.code_url,
        ruleset=source.ruleset,
    )


def already_done(session: Session, *, version: StreamVersion, run: PlannedRun) -> bool:
    """Whether ``version`` has a submission that does ``run``'s work (see the module doc)."""
    query = (
        select(Submission.id)
        .outerjoin(ScheduledSubmission, ScheduledSubmission.submission_id == Submission.id)
        .where(
            Submission.stream_version_id == version.id,
            Submission.learner_id == run.learner.id,
            Submission.phase == run.phase,
            Submission.ruleset == run.ruleset,
            Submission.status.in_(KEPT_STATUSES),
        )
    )
    if run.kind == "pinned":
        query = query.where(ScheduledSubmission.user_id == run.owner.id)
    return session.scalar(query.limit(1)) is not None


def plan_refresh(
    session: Session, *, settings: CoordinatorSettings, version: StreamVersion, manifest: StreamManifest
) -> Plan:
    """Every run a refresh of ``version`` queues now."""
    notes: list[str] = []
    owner = refresh_owner(session, settings)
    planned = baseline_runs(session, settings=settings, manifest=manifest, owner=owner, notes=notes) + pinned_runs(
        session, settings=settings, version=version, manifest=manifest, notes=notes
    )
    runs = [run for run in planned if not already_done(session, version=version, run=run)]
    return Plan(runs=runs, notes=notes)


__all__ = [
    "BASELINE_PHASE",
    "KEPT_STATUSES",
    "Plan",
    "PlannedRun",
    "already_done",
    "baseline_runs",
    "default_image_size",
    "pinned_runs",
    "plan_refresh",
    "refresh_owner",
]
