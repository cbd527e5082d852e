"""Request and response bodies (pydantic, at the HTTP edge only).

Requests forbid unknown fields, so a typo is a 422 naming it instead of a silent default.
Types are checked here, strictly (``true`` is no integer, ``1e309`` and ``NaN`` no number),
with every integer within its database column and every string and list bounded (see
:mod:`services.coordinator.api.fields`); values (syntax, finer ranges) by the domain checks,
whose messages name the field the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, StringConstraints

from services.coordinator.api.fields import (
    ENTRYPOINT_MAX,
    IMAGE_MAX,
    STREAM_MAX,
    VERSION_MAX,
    Label,
    Name,
    StrictDbCount,
    StrictDbId,
    StrictFloat,
    StrictInt,
)
from services.coordinator.api.schemas_uncertainty import ErrorIntervalOut
from services.coordinator.common.validation import CODE_URL_MAX
from services.core.budget import RunBudget

T = TypeVar("T")


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Problem(BaseModel):
    """RFC 9457 problem details; ``field`` names the offending input."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    field: str | None = None
    errors: list[dict[str, str]] | None = None


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


# --- users and tokens -------------------------------------------------------------------


class UserCreate(Request):
    name: Name = Field(examples=["alice"])
    role: Literal["admin", "submitter"] = "submitter"
    max_concurrent: StrictDbCount | None = Field(default=None, description="Queued + running at once.")
    max_per_day: StrictDbCount | None = Field(default=None, description="Submissions per 24 hours.")


class UserOut(BaseModel):
    id: int
    name: str
    role: str
    max_concurrent: int | None
    max_per_day: int | None
    created_at: datetime
    disabled_at: datetime | None = Field(default=None, description="Set while an admin has disabled the user.")


class TokenCreate(Request):
    label: Label = Field(default="api", examples=["laptop"])
    expires_at: AwareDatetime | None = Field(
        default=None,
        description="When the token stops working: with a time zone (e.g. "
        "2026-12-31T00:00:00Z), after now and at most 366 days ahead.",
    )


class TokenOut(BaseModel):
    id: int
    label: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(TokenOut):
    token: str = Field(description="The secret; shown only in this response.")


# --- learners ---------------------------------------------------------------------------


class Resources(Request):
    cpus: StrictFloat = Field(default=1.0, description="CPUs per task, in (0, 512].")
    gpus: StrictInt = Field(default=0, description="GPUs per task, in [0, 64].")
    memory_mb: StrictInt = Field(default=2048, description="Memory per task (MiB), in [64, 4194304].")


class LearnerCreate(Request):
    name: Name = Field(examples=["my-learner"])
    entrypoint: Annotated[str, StringConstraints(max_length=ENTRYPOINT_MAX)] = Field(
        examples=["my_package.learner:make"], description="'package.module:factory' that returns a learner."
    )
    image: Annotated[str, StringConstraints(max_length=IMAGE_MAX)] | None = Field(
        default=None, examples=["ghcr.io/me/learner:1.0"], description="Pinned container image (tag or digest)."
    )
    resources: Resources = Field(default_factory=Resources)


class BundleOut(BaseModel):
    key: str
    sha256: str
    size_bytes: int | None


class LearnerOut(BaseModel):
    id: int
    name: str
    owner: str | None
    entrypoint: str
    image: str | None
    bundle: BundleOut | None
    resources: dict[str, Any]
    created_at: datetime


# --- submissions ------------------------------------------------------------------------


class SubmissionCreate(Request):
    learner_id: StrictDbId
    stream: Annotated[str, StringConstraints(max_length=STREAM_MAX)] = Field(
        examples=["mini"], description="A stream name (GET /v1/streams)."
    )
    stream_version: Annotated[str, StringConstraints(max_length=VERSION_MAX)] | None = Field(
        default=None, description="Must match, if given."
    )
    phase: Literal["meta_train", "meta_test"] = "meta_test"
    budget: RunBudget = Field(default_factory=RunBudget, description="Search budget and caps.")
    image_size: StrictDbId | None = Field(
        default=None,
        description="Task resolution: the side in pixels of the images learners see and are scored on (default: the stream's).",
    )
    visibility: Literal["public", "private"] = Field(
        default="public",
        description="'private': the leaderboard, the front and the dashboard's "
        "pages show it only to you and admins; to others its pages are a 404.",
    )
    pinned: StrictBool = Field(
        default=False,
        description="Re-run it on each new version of its stream (a benchmark "
        "refresh copies its learner, phase and budget); see POST /v1/submissions/{id}/pin.",
    )
    code_url: Annotated[str, StringConstraints(max_length=CODE_URL_MAX)] | None = Field(
        default=None,
        examples=["https://github.com/me/my-learner"],
        description=(
            "Where the learner's code is public: an https:// URL (at most 500 characters, no "
            "credentials). Without one, the leaderboard marks the run 'code not public'."
        ),
    )
    ruleset: Annotated[str, StringConstraints(max_length=48)] = Field(
        default="open",
        examples=["open", "budget-1e12", "self-tuning"],
        description=(
            "The rules it competes under (docs/rules.md), each with its own leaderboard: 'open' (any "
            "search, every trial charged), 'budget-<X>' or 'budget-<X>-total-<Y>' (the harness "
            "stops trials once a task's charge reaches X cFLOP; Y caps the run), 'self-tuning' "
            "(one trial per task with the learner's defaults)."
        ),
    )


class LearnerRef(BaseModel):
    id: int
    name: str


class StreamRef(BaseModel):
    name: str
    version: str


class CurrentTask(BaseModel):
    """The launch in flight (``lease``): which task, which attempt, and its liveness."""

    order: int
    attempt: int
    lease_id: int
    lease_status: str
    backend: str
    job_id: str | None
    started_at: datetime | None
    heartbeat_at: datetime
    deadline_at: datetime


class SubmissionBrief(BaseModel):
    id: int
    owner: str
    learner: LearnerRef
    stream: StreamRef
    phase: str
    status: str = Field(
        description=(
            "queued, running, succeeded, failed, stopped or cancelled. 'stopped': ended by its own "
            "budget.flop_cap or budget.wall_cap_s after the task that reached it (no failure; "
            "'error' names the cap)."
        )
    )
    visibility: Literal["public", "private"] = Field(description="'private': shown to its owner and admins only.")
    cursor: int
    error: str | None
    created_at: datetime
    finished_at: datetime | None
    current_task: CurrentTask | None
    pinned: bool = Field(default=False, description="Re-run on each new version of its stream.")
    code_url: str | None = Field(
        default=None,
        description=("Where the learner's code is public, as its submitter gave it; null: not declared public."),
    )
    ruleset: str = Field(default="open", description="The ruleset it competes under (docs/rules.md).")


class TaskOut(BaseModel):
    order: int
    dataset: str
    year: int
    phase: str
    status: str
    error: float | None = Field(description="e_i = 1 - accuracy (or 1 - mAP) once committed.")
    split: str | None
    flops: float = Field(
        description=(
            "FLOPs charged: the learner's own count (its meter runs in its process), or the harness's "
            "floor where 'flops_floored'."
        )
    )
    retried_flops: float
    trials: int
    failed_trials: int
    capped_trials: int = Field(
        default=0,
        description=(
            "Trials the harness stopped, or did not start, at the task's cap under a budget-<X> ruleset "
            "(docs/rules.md); the task committed its best trial within the cap."
        ),
    )
    wall_time_s: float | None
    cpu_seconds: float | None = Field(
        description=(
            "CPU seconds of the learner hosts (its trials and the evaluation), measured by the harness "
            "outside the learner's reach; null: not measured (not committed, stored before this was "
            "recorded, or a machine where it cannot be read), never 0."
        )
    )
    flops_floored: bool = Field(
        description=(
            "Some trial's (or the evaluation's) FLOP count was below what its measured CPU time "
            "implies; the harness charged a floor, so 'flops' is partly the floor."
        )
    )
    flops_per_cpu_second: float | None = Field(
        default=None,
        description=(
            "flops / cpu_seconds: the speed the charged count implies, to compare with the node's "
            "calibrated rate and the built-in learners' (docs/isolation.md); null without cpu_seconds."
        ),
    )
    flops_paper: float | None = Field(
        default=None,
        description=(
            "FLOPs of the trials' training updates, as the NEVIS'22 paper counts them (every backward "
            "and the forward passes with gradients on); null: stored before FLOPs were split by purpose."
        ),
    )
    flops_validation: float | None = Field(
        default=None,
        description=(
            "FLOPs of validation, dev scoring and transfer selection (no gradients): in 'flops', not in 'flops_paper'."
        ),
    )
    flops_prediction: float | None = Field(
        default=None, description=("FLOPs of the evaluation's prediction: in 'flops', not in 'flops_paper'.")
    )
    consistency_jump: float | None = Field(
        default=None,
        description=(
            "Meta-test consistency check (docs/isolation.md, 'Public data'): the net share of a secret "
            "sample of test images answered right as originals and wrong as copies shifted by one "
            "pixel; null: not checked (meta-train, too few test images, or stored before the check)."
        ),
    )
    inconsistent: bool = Field(
        default=False,
        description=(
            "The jump is beyond what an honest learner shows (a table of test labels answers the "
            "originals only): the task, and its submission, are marked."
        ),
    )


class SubmissionOut(SubmissionBrief):
    budget: RunBudget
    image_size: int = Field(
        description="Task resolution (pixels per side) of the images this submission trains and is scored on."
    )
    updated_at: datetime
    next_launch_at: datetime | None
    tasks: list[TaskOut]
    e: float | None = Field(description="E: mean error over the phase's committed tasks.")
    scored_tasks: int
    headline_tasks: int = Field(description="Tasks E averages over once complete.")
    cflop: float = Field(description="cFLOP: committed FLOPs of every task.")
    retried_flops: float
    flops_sources: list[str] = Field(
        description=(
            "Where the FLOPs came from: 'measured' (the harness's meter), 'reported' (the learner "
            "said), 'floor' (the harness charged the floor its measured CPU time implies)."
        )
    )
    cpu_seconds: float | None = Field(
        description=(
            "CPU seconds of the committed tasks' learner hosts, measured by the harness; null: none was measured."
        )
    )
    floored_tasks: int = Field(description="Committed tasks charged the harness's CPU-time FLOP floor.")
    flops_floored: bool = Field(description="floored_tasks > 0: part of cFLOP is the harness's floor.")
    inconsistent_tasks: int = Field(
        default=0, description=("Committed tasks marked by the consistency check (see the tasks' 'inconsistent').")
    )
    inconsistent: bool = Field(
        default=False,
        description=(
            "inconsistent_tasks > 0: its answers jumped on shifted copies of test images, as a table "
            "of test labels' would; E is not to be trusted."
        ),
    )
    cflop_paper: float | None = Field(
        default=None,
        description=(
            "cFLOP as the NEVIS'22 paper counts it: the training updates of every trial of every "
            "committed task (cFLOP also counts validation, selection and prediction); null: a "
            "committed task was stored before FLOPs were split by purpose."
        ),
    )
    cflop_pretraining: float | None = Field(
        default=None,
        description=(
            "cFLOP of the run that made the self-pretrained checkpoint this run starts from "
            "(pt_self / pt_ft_self, `nevis pretrain`), as the checkpoint records it; not in 'cflop' "
            "(a PT run is not charged its pretraining, as in the paper); null: no such checkpoint."
        ),
    )
    error_interval: ErrorIntervalOut | None = Field(
        default=None,
        description=(
            "E's 95 % bootstrap interval (tasks, and test examples within tasks, resampled; "
            "docs/uncertainty.md) on GET /v1/submissions/{id}; null in the answers of writes."
        ),
    )


class EventOut(BaseModel):
    id: int
    kind: str
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    items: list[EventOut]
    next_after: int = Field(description="Pass as ?after= to get the events that follow.")


class PinUpdate(Request):
    pinned: StrictBool = Field(
        description="true: re-run this submission on each new version of its stream (benchmark refreshes); false: stop."
    )


class CodeUrlUpdate(Request):
    code_url: Annotated[str, StringConstraints(max_length=CODE_URL_MAX)] | None = Field(
        examples=["https://github.com/me/my-learner"],
        description=(
            "Where the learner's code is public (an https:// URL); null withdraws it, and the "
            "leaderboard marks the run 'code not public' again."
        ),
    )


class StreamOut(BaseModel):
    name: str
    version: str
    tasks: int
    meta_train: int
    meta_test: int


class QuotaUseOut(BaseModel):
    """A windowed quota: submissions counted in the window, the limit, and when the next
    is allowed."""

    used: int
    limit: int
    window_days: float
    next_allowed_at: datetime | None = Field(
        description="When the next is allowed while the quota is used up (then a create is a "
        "429 with Retry-After); null: one is allowed now, or none at all when the limit is 0."
    )


class ConcurrentOut(BaseModel):
    used: int = Field(description="Queued or running submissions now.")
    limit: int


class MetaTestQuotaOut(BaseModel):
    """Counted meta-test submissions of one learner on one stream version."""

    learner: LearnerRef
    stream: StreamRef
    use: QuotaUseOut


class QuotaOut(BaseModel):
    """The caller's quotas, counted as POST /v1/submissions counts them."""

    user: str
    concurrent: ConcurrentOut
    daily: QuotaUseOut
    meta_test_limit: int = Field(
        description="Meta-test submissions allowed per learner and stream "
        "version in the window (NEVIS_META_TEST_QUOTA; 0: none)."
    )
    meta_test_window_days: float = Field(description="NEVIS_META_TEST_QUOTA_DAYS.")
    meta_test: list[MetaTestQuotaOut] = Field(
        description=(
            "Per learner and stream version with a counted meta-test submission in the window. One "
            "counts while it is queued or running, and once any of its tasks ran; one that failed or "
            "was cancelled before any task ran does not. Meta-train submissions are not limited."
        )
    )
    meta_test_by_ruleset: dict[str, QuotaUseOut] = Field(
        default_factory=dict,
        description=(
            "Per ruleset with a counted meta-test submission in NEVIS_META_TEST_RULESET_QUOTA_DAYS: its "
            "use of NEVIS_META_TEST_RULESET_QUOTA (any learner, any stream; docs/rules.md)."
        ),
    )


__all__ = [
    "BundleOut",
    "CurrentTask",
    "EventOut",
    "EventPage",
    "LearnerCreate",
    "LearnerOut",
    "LearnerRef",
    "Page",
    "PinUpdate",
    "CodeUrlUpdate",
    "Problem",
    "Request",
    "Resources",
    "StreamOut",
    "StreamRef",
    "SubmissionBrief",
    "SubmissionCreate",
    "SubmissionOut",
    "TaskOut",
    "TokenCreate",
    "TokenCreated",
    "TokenOut",
    "UserCreate",
    "UserOut",
    "ConcurrentOut",
    "MetaTestQuotaOut",
    "QuotaOut",
    "QuotaUseOut",
]
