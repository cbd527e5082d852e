"""Submissions: create (idempotent, within quotas), list, read with results, cancel, events."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response, status
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services.coordinator.api.deps import CurrentUser, Limit, MetricsDep, Offset, SessionDep, SettingsDep, StoreDep
from services.coordinator.api.fields import NAME_MAX, NAME_PATTERN, DbCount, DbId
from services.coordinator.api.routes import problems
from services.coordinator.api.schemas import LearnerRef, Page, StreamRef
from services.coordinator.api.schemas_submissions import (
    CodeUrlUpdate,
    CurrentTask,
    EventOut,
    EventPage,
    PinUpdate,
    SubmissionBrief,
    SubmissionCreate,
    SubmissionOut,
    TaskOut,
    gpu_energy_of,
)
from services.coordinator.api.schemas_uncertainty import ErrorIntervalOut
from services.coordinator.api.schemas_verify import VerificationOut
from services.coordinator.common.validation import check_idempotency_key
from services.coordinator.crud import submission_create
from services.coordinator.crud import submissions as crud
from services.coordinator.crud.submission_create import SubmissionRequest
from services.coordinator.crud.submissions import SubmissionRow
from services.core.budget import RunBudget
from services.store.db.models import SUBMISSION_STATUSES
from services.store.db.models_coordinator import TaskLease
from services.store.probes.report import load_probe_report
from services.store.runs.summary import load_summary
from services.store.runs.uncertainty import run_interval_of
from services.store.runs.verdicts import verification_of

router = APIRouter(prefix="/v1/submissions", tags=["submissions"], responses=problems(401, 422, 503))
StatusFilter = Annotated[
    str | None,
    Query(pattern="^(" + "|".join(SUBMISSION_STATUSES) + ")$", description="Only submissions with this status."),
]
SubmissionId = Annotated[DbId, Path(description="The submission's id.")]
REPLAYED = {
    200: {
        "model": SubmissionOut,
        "description": (
            "An idempotent replay: a request with this Idempotency-Key and body was made before; its "
            "submission is returned again (header `Idempotent-Replayed: true`), nothing new is queued."
        ),
        "headers": {"Idempotent-Replayed": {"description": "Always 'true' on a replay.", "schema": {"type": "string"}}},
    }
}
QUOTA_EXCEEDED = {
    429: {
        **problems(429)[429],
        "description": (
            "A quota is used up (problem `quota-exceeded`); `field` names it: `quota.concurrent` "
            "(queued + running at once), `quota.daily` (per 24 hours), or `quota.meta_test` (meta-test "
            "submissions of one learner on one stream version per NEVIS_META_TEST_QUOTA_DAYS; "
            "meta-train is not limited). GET /v1/users/me/quota shows each. The per-token write rate "
            "limit is a 429 too."
        ),
        "headers": {
            "Retry-After": {
                "schema": {"type": "integer"},
                "description": (
                    "Seconds until the quota allows one more (meta-test: until the oldest counted "
                    "submission leaves the window); absent when none ever will (NEVIS_META_TEST_QUOTA=0)."
                ),
            }
        },
    }
}


def current_task(lease: TaskLease | None) -> CurrentTask | None:
    if lease is None:
        return None
    return CurrentTask(
        order=lease.task_order,
        attempt=lease.attempt,
        lease_id=lease.id,
        lease_status=lease.status,
        backend=lease.backend,
        job_id=lease.job_id,
        started_at=lease.started_at,
        heartbeat_at=lease.heartbeat_at,
        deadline_at=lease.deadline_at,
    )


def brief(row: SubmissionRow) -> SubmissionBrief:
    sub = row.submission
    return SubmissionBrief(
        id=sub.id,
        owner=row.owner.name,
        learner=LearnerRef(id=sub.learner.id, name=sub.learner.name),
        stream=StreamRef(name=sub.stream_version.name, version=sub.stream_version.version),
        phase=sub.phase,
        status=sub.status,
        visibility=sub.visibility,
        cursor=sub.cursor,
        error=sub.error,
        created_at=sub.created_at,
        finished_at=sub.finished_at,
        current_task=current_task(row.lease),
        pinned=sub.pinned,
        code_url=sub.code_url,
        ruleset=sub.ruleset,
    )


def detail(session: Session, row: SubmissionRow) -> SubmissionOut:
    summary = load_summary(session, submission_id=row.submission.id)
    headline = [t for t in summary.tasks if t.phase == summary.phase]
    return SubmissionOut(
        **brief(row).model_dump(),
        budget=RunBudget.from_dict(row.submission.budget),
        image_size=row.submission.image_size,
        updated_at=row.submission.updated_at,
        next_launch_at=row.schedule.next_launch_at,
        tasks=[
            TaskOut(
                order=t.order,
                dataset=t.dataset,
                year=t.year,
                phase=t.phase,
                status=t.status,
                error=t.error,
                split=t.split,
                flops=t.flops,
                retried_flops=t.retried_flops,
                trials=t.trials,
                failed_trials=t.failed_trials,
                capped_trials=t.capped_trials,
                wall_time_s=t.wall_time_s,
                cpu_seconds=t.cpu_seconds,
                flops_floored=t.flops_floored,
                flops_near_floor=t.flops_near_floor,
                cpu_estimated=t.cpu_estimated,
                flops_paper=t.flops_paper,
                flops_per_cpu_second=t.flops / t.cpu_seconds if t.cpu_seconds else None,
                flops_validation=t.flops_validation,
                flops_prediction=t.flops_prediction,
                consistency_jump=t.consistency_jump,
                inconsistent=t.inconsistent,
                **gpu_energy_of(t),  # GPU time and energy beside cFLOP (null with gpu_note: no GPU)
            )
            for t in summary.tasks
        ],
        e=summary.mean_error,
        scored_tasks=sum(t.error is not None for t in headline),
        headline_tasks=summary.headline_tasks,
        cflop=summary.cflop,
        retried_flops=summary.retried_flops,
        flops_sources=list(summary.flops_sources),
        cpu_seconds=summary.cpu_seconds,
        floored_tasks=summary.floored_tasks,
        flops_floored=summary.flops_floored,
        cflop_paper=summary.cflop_paper,
        cflop_pretraining=summary.cflop_pretraining,
        inconsistent_tasks=summary.inconsistent_tasks,
        inconsistent=summary.inconsistent,
        near_floor_tasks=summary.near_floor_tasks,
        near_floor=summary.near_floor,
        **gpu_energy_of(summary),
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={**REPLAYED, **problems(404, 409, 413), **QUOTA_EXCEEDED},
    summary="Submit a learner on a stream (Idempotency-Key supported)",
)
def create_submission(
    body: SubmissionCreate,
    user: CurrentUser,
    session: SessionDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="1-200 printable ASCII characters (no spaces); retrying with the same key "
            "and body returns the first result.",
        ),
    ] = None,
) -> SubmissionOut:
    if idempotency_key is not None:
        check_idempotency_key(idempotency_key)
    request = SubmissionRequest(
        learner_id=body.learner_id,
        stream=body.stream,
        phase=body.phase,
        budget=body.budget,
        stream_version=body.stream_version,
        image_size=body.image_size,
        visibility=body.visibility,
        pinned=body.pinned,
        code_url=body.code_url,
        ruleset=body.ruleset,
    )
    try:
        submission, replayed = submission_create.create_submission(
            session, settings=settings, user=user, request=request, idempotency_key=idempotency_key
        )
        session.commit()
    except IntegrityError:  # a concurrent request with the same key won (SQLite path)
        session.rollback()
        if idempotency_key is None:
            raise
        submission = submission_create.find_replay(session, user=user, key=idempotency_key, request=request)
        if submission is None:
            raise
        replayed = True
    if replayed:
        response.status_code = status.HTTP_200_OK
        response.headers["Idempotent-Replayed"] = "true"
    else:
        metrics.submissions_created.inc()
    response.headers["Location"] = f"/v1/submissions/{submission.id}"
    row = crud.get_submission(session, user=user, submission_id=submission.id)
    return detail(session, row)


@router.get("", summary="Submissions you may see, newest first")
def read_submissions(
    user: CurrentUser,
    session: SessionDep,
    limit: Limit = 20,
    offset: Offset = 0,
    status_: Annotated[StatusFilter, Query(alias="status")] = None,
    learner_id: Annotated[DbId | None, Query()] = None,
    owner: Annotated[str | None, Query(max_length=NAME_MAX, pattern=NAME_PATTERN, description="Admins only.")] = None,
    phase: Annotated[str | None, Query(pattern="^(meta_train|meta_test)$")] = None,
) -> Page[SubmissionBrief]:
    rows, total = crud.list_submissions(
        session, user=user, limit=limit, offset=offset, status=status_, learner_id=learner_id, owner=owner, phase=phase
    )
    return Page[SubmissionBrief](items=[brief(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get(
    "/{submission_id}",
    responses=problems(404),
    summary="A submission: status, current task, per-task results, E and cFLOP",
)
def read_submission(
    submission_id: SubmissionId, user: CurrentUser, session: SessionDep, store: StoreDep
) -> SubmissionOut:
    out = detail(session, crud.get_submission(session, user=user, submission_id=submission_id))
    interval = run_interval_of(session, store, submission_id=submission_id)
    verification = VerificationOut.model_validate(verification_of(session, submission_id=submission_id).to_dict())
    return out.model_copy(
        update={"error_interval": ErrorIntervalOut(**interval.to_dict()), "verification": verification}
    )


@router.post(
    "/{submission_id}/cancel", responses=problems(404, 409, 413), summary="Cancel a queued or running submission"
)
def cancel_submission(submission_id: SubmissionId, user: CurrentUser, session: SessionDep) -> SubmissionOut:
    row = crud.cancel_submission(session, user=user, submission_id=submission_id)
    session.commit()
    return detail(session, crud.get_submission(session, user=user, submission_id=row.submission.id))


@router.post(
    "/{submission_id}/pin",
    responses=problems(404, 413),
    summary="Pin or unpin a submission: a pinned one is re-run on each new stream version",
)
def pin_submission(
    submission_id: SubmissionId, body: PinUpdate, user: CurrentUser, session: SessionDep
) -> SubmissionOut:
    row = crud.pin_submission(session, user=user, submission_id=submission_id, pinned=body.pinned)
    session.commit()
    return detail(session, crud.get_submission(session, user=user, submission_id=row.submission.id))


@router.post(
    "/{submission_id}/code-url",
    responses=problems(404, 413),
    summary="Say where a submission's learner code is public (or withdraw it)",
)
def set_code_url(
    submission_id: SubmissionId, body: CodeUrlUpdate, user: CurrentUser, session: SessionDep
) -> SubmissionOut:
    row = crud.set_code_url(session, user=user, submission_id=submission_id, code_url=body.code_url)
    session.commit()
    return detail(session, crud.get_submission(session, user=user, submission_id=row.submission.id))


@router.get("/{submission_id}/events", responses=problems(404), summary="The submission's event log, oldest first")
def read_events(
    submission_id: SubmissionId,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[DbCount, Query(description="Only events with a larger id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> EventPage:
    crud.get_submission(session, user=user, submission_id=submission_id)
    events = crud.list_events(session, submission_id=submission_id, after=after, limit=limit)
    return EventPage(
        items=[EventOut(id=e.id, kind=e.kind, payload=dict(e.payload), created_at=e.created_at) for e in events],
        next_after=events[-1].id if events else after,
    )


@router.get(
    "/{submission_id}/probes",
    responses=problems(404),
    summary="Probe results: mismatch curves and scalars, LiDAR, RankMe, proxy correlations",
)
def read_probes(
    submission_id: SubmissionId,
    user: CurrentUser,
    session: SessionDep,
    task: Annotated[DbId | None, Query(description="Only this task (by stream order).")] = None,
) -> dict[str, Any]:
    crud.get_submission(session, user=user, submission_id=submission_id)
    return load_probe_report(session, submission_id=submission_id, task_order=task).to_dict()


__all__ = [
    "brief",
    "cancel_submission",
    "create_submission",
    "current_task",
    "detail",
    "pin_submission",
    "read_events",
    "read_probes",
    "read_submission",
    "read_submissions",
    "router",
]
