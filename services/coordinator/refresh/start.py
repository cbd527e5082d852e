"""Start refreshes: record the stream version and its refresh, queue the plan's runs, once.

The rule: a stream is refreshed when the version of its manifest that this coordinator serves
(built in, or ``NEVIS_STREAMS_DIR``; see :mod:`services.coordinator.streams`) has no
``refreshes`` row yet, whether or not its ``stream_versions`` row exists. Which streams the
schedule (and ``nevis refresh run`` without ``--stream``) looks at: those named in
``NEVIS_REFRESH_STREAMS``, else every available stream that has a stored version here
(streams nobody ran are not refreshed by themselves; name one to refresh it anyway).

Idempotence: :func:`start_refresh` takes the refresh lock (:mod:`.lock`), then looks for the
version's refresh row, which is unique per version, and returns it untouched when it exists;
otherwise it creates the version (:func:`ensure_stream_version`), the refresh row and the
planned submissions in the caller's transaction. A refresh whose plan is empty is finished
at once (its snapshot is taken then).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from services.coordinator.common.config import CoordinatorSettings
from services.coordinator.common.validation import split_list
from services.coordinator.refresh.lock import lock_refreshes
from services.coordinator.refresh.plan import PlannedRun, plan_refresh
from services.coordinator.refresh.snapshot import settle_refresh
from services.coordinator.streams import available_streams, resolve_stream
from services.core.errors import NevisError
from services.store.db import transaction
from services.store.db.models import StreamVersion, Submission
from services.store.db.models_coordinator import ScheduledSubmission
from services.store.db.models_refresh import REFRESH_TRIGGERS, Refresh, RefreshRun
from services.store.runs import records
from workers.stream.manifest import StreamManifest
from workers.stream.versions import ensure_stream_version

log = logging.getLogger("nevis.refresh")


@dataclass(frozen=True)
class RefreshOutcome:
    """The refresh of a stream's current version, and whether this call started it (plain
    values besides the row, so they stay readable once its session is closed)."""

    refresh: Refresh
    stream: str
    version: str
    created: bool
    queued: tuple[int, ...] = ()  # submission ids this call queued


@dataclass
class RefreshReport:
    """What one pass over several streams did (the scheduler's and the CLI's)."""

    outcomes: list[RefreshOutcome] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # stream -> why it was not refreshed

    @property
    def started(self) -> list[RefreshOutcome]:
        return [o for o in self.outcomes if o.created]


def find_refresh(session: Session, *, name: str, version: str) -> Refresh | None:
    """The refresh of stream ``name`` at ``version``, if there is one."""
    return session.scalar(
        select(Refresh)
        .join(StreamVersion, StreamVersion.id == Refresh.stream_version_id)
        .where(StreamVersion.name == name, StreamVersion.version == version)
    )


def start_refresh(
    session: Session, *, settings: CoordinatorSettings, stream: str, trigger: str, requested_by: str | None = None
) -> RefreshOutcome:
    """Refresh ``stream``'s current version unless it has been: see the module doc.

    Raises:
        InvalidInputError: (field ``stream``) unknown or broken stream.
        ManifestError: the version is stored with other content (a changed manifest kept its
            version string).
    """
    if trigger not in REFRESH_TRIGGERS:
        raise ValueError(f"The 'trigger' must be one of {', '.join(REFRESH_TRIGGERS)}. Got {trigger!r}.")
    manifest = resolve_stream(settings, stream).manifest
    lock_refreshes(session)
    found = find_refresh(session, name=manifest.name, version=manifest.version)
    if found is not None:
        return RefreshOutcome(found, manifest.name, manifest.version, created=False)
    version = ensure_stream_version(session, manifest=manifest)
    refresh = Refresh(stream_version_id=version.id, trigger=trigger, status="running", requested_by=requested_by)
    session.add(refresh)
    session.flush()
    plan = plan_refresh(session, settings=settings, version=version, manifest=manifest)
    queued = tuple(
        _queue(session, settings=settings, refresh=refresh, version=version, manifest=manifest, run=run)
        for run in plan.runs
    )
    refresh.note = "; ".join(plan.notes) or None
    session.flush()
    if not queued:
        settle_refresh(session, refresh=refresh)
    log.info("refresh %s of %s %s (%s): queued %s", refresh.id, version.name, version.version, trigger, list(queued))
    return RefreshOutcome(refresh, manifest.name, manifest.version, created=True, queued=queued)


def _queue(
    session: Session,
    *,
    settings: CoordinatorSettings,
    refresh: Refresh,
    version: StreamVersion,
    manifest: StreamManifest,
    run: PlannedRun,
) -> int:
    """Queue one planned run for the scheduler, as an API submission would be; its id."""
    tasks = manifest.tasks_of_phase(run.phase)
    submission = records.create_submission(
        session,
        learner=run.learner,
        stream_version=version,
        phase=run.phase,
        budget=run.budget,
        image_size=run.image_size,
        first_order=tasks[0].order,
        status="queued",
        visibility=run.visibility,
        ruleset=run.ruleset,
    )
    submission.pretrained_key, submission.cflop_pretraining = run.pretrained_key, run.cflop_pretraining
    submission.code_url = run.code_url
    session.add(ScheduledSubmission(submission_id=submission.id, user_id=run.owner.id))
    session.add(
        RefreshRun(
            submission_id=submission.id, refresh_id=refresh.id, kind=run.kind, source_submission_id=run.source_id
        )
    )
    records.add_event(
        session,
        submission_id=submission.id,
        kind="submission.queued",
        payload={
            "user": run.owner.name,
            "backend": settings.backend,
            "learner": run.learner.name,
            "tasks": len(tasks),
            "visibility": run.visibility,
            "refresh_id": refresh.id,
            "refresh_kind": run.kind,
            "source_submission_id": run.source_id,
        },
    )
    session.flush()
    return submission.id


def refreshable_streams(session: Session, settings: CoordinatorSettings) -> list[str]:
    """The streams a scheduled refresh looks at (see the module doc), sorted."""
    named = split_list(settings.refresh_streams)
    if named:
        return sorted(set(named))
    stored = set(session.scalars(select(StreamVersion.name).distinct()))
    return sorted(stored & set(available_streams(settings)))


def refresh_pending(session: Session, *, settings: CoordinatorSettings, stream: str) -> bool:
    """Whether ``stream``'s current version has no refresh yet (a cheap look, no lock)."""
    manifest = resolve_stream(settings, stream).manifest
    return find_refresh(session, name=manifest.name, version=manifest.version) is None


def run_refreshes(
    sessions: sessionmaker[Session], *, settings: CoordinatorSettings, trigger: str, streams: list[str] | None = None
) -> RefreshReport:
    """Refresh each of ``streams`` (default: :func:`refreshable_streams`) that is pending, each
    in its own transaction; a stream that fails is reported and the others go on."""
    report = RefreshReport()
    if streams is None:
        with sessions() as session:
            streams = refreshable_streams(session, settings)
    for name in streams:
        try:
            with sessions() as session:
                if not refresh_pending(session, settings=settings, stream=name):
                    continue
            with transaction(sessions) as session:
                report.outcomes.append(start_refresh(session, settings=settings, stream=name, trigger=trigger))
        except NevisError as exc:
            log.error("refresh of stream %r failed: %s", name, exc)
            report.errors[name] = str(exc)
    return report


def list_refreshes(
    session: Session, *, limit: int, offset: int, stream: str | None = None
) -> tuple[list[Refresh], int]:
    """Refreshes, newest first, optionally of one stream, and their count."""
    query = select(Refresh).join(StreamVersion, StreamVersion.id == Refresh.stream_version_id)
    if stream is not None:
        query = query.where(StreamVersion.name == stream)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Refresh.id.desc()).limit(limit).offset(offset))
    return list(rows), int(total)


def run_statuses(session: Session, *, refresh: Refresh) -> dict[int, str]:
    """The status of each submission ``refresh`` queued, by submission id."""
    rows = session.execute(
        select(Submission.id, Submission.status)
        .join(RefreshRun, RefreshRun.submission_id == Submission.id)
        .where(RefreshRun.refresh_id == refresh.id)
    )
    return {sid: status for sid, status in rows}


__all__ = [
    "RefreshOutcome",
    "RefreshReport",
    "find_refresh",
    "list_refreshes",
    "refresh_pending",
    "refreshable_streams",
    "run_refreshes",
    "run_statuses",
    "start_refresh",
]
