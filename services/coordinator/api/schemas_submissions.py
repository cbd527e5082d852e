"""Submission bodies: the create request, the brief and full answers with their tasks, events,
and the pin and code-URL updates (the shared base models are :mod:`services.coordinator.api.schemas`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, StringConstraints

from services.coordinator.api.fields import STREAM_MAX, VERSION_MAX, StrictDbId
from services.coordinator.api.schemas import LearnerRef, Request, StreamRef
from services.coordinator.api.schemas_uncertainty import ErrorIntervalOut
from services.coordinator.api.schemas_verify import VerificationOut
from services.coordinator.common.validation import CODE_URL_MAX
from services.core.budget import RunBudget


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


GPU_ENERGY_FIELDS = ("gpu_seconds", "gpu_peak_memory_bytes", "gpu_note", "energy_kwh", "energy_source")


class GpuEnergyOut(BaseModel):
    """GPU time, peak GPU memory and energy beside cFLOP (issue 46; docs/running.md)."""

    gpu_seconds: float | None = Field(
        default=None,
        description="GPU-seconds of the learner hosts' processes (NVML, read by the harness); null with "
        "gpu_note saying why where none was measured (no GPU given, no NVML on the node): never 0 for that.",
    )
    gpu_peak_memory_bytes: int | None = Field(default=None, description="Peak GPU memory of a trial's hosts.")
    gpu_note: str | None = Field(default=None, description="Why the GPU figures are null, or what they miss.")
    energy_kwh: float | None = Field(
        default=None,
        description="Energy in kWh: the node's RAPL counters, or an estimate (CPU-seconds x 10 W) where it has "
        "none, plus the GPUs' (NVML); energy_source says which. Null: nothing measured.",
    )
    energy_source: str | None = Field(
        default=None, description="'rapl' or 'estimate', with '+nvml' where the GPUs' energy is in."
    )


def gpu_energy_of(row: Any) -> dict[str, Any]:
    """The GPU and energy fields of a summary row (services/store/runs/summary.py)."""
    return {name: getattr(row, name, None) for name in GPU_ENERGY_FIELDS}


class TaskOut(GpuEnergyOut):
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
    flops_near_floor: bool = Field(
        default=False,
        description=(
            "Some trial's own FLOP count was charged but lies within NEVIS_NEAR_FLOOR_BAND (4) times "
            "the floor its CPU time implies, as a count topped up to just over the floor does: not vouched for."
        ),
    )
    cpu_estimated: bool = Field(
        default=False, description="Part of cpu_seconds is wall time × declared CPUs: no usage reading could be had."
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


class SubmissionOut(SubmissionBrief, GpuEnergyOut):
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
            "said), 'floor' (the harness charged the floor its measured CPU time implies), 'near_floor' "
            "(the learner's count was charged, but it lies within NEVIS_NEAR_FLOOR_BAND times the floor)."
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
    near_floor_tasks: int = Field(
        default=0, description="Committed tasks a trial of which counted near its floor (see 'flops_near_floor')."
    )
    near_floor: bool = Field(default=False, description="near_floor_tasks > 0: part of cFLOP is not vouched for.")
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
    verification: VerificationOut | None = Field(
        default=None,
        description=(
            "Its verification by replays with new seeds (GET /v1/submissions/{id}/verify; docs/rules.md): "
            "the verdict, the interval it was judged by, the replays, or the run it replays "
            "(replay_of); on GET /v1/submissions/{id}, null in the answers of writes."
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


__all__ = [
    "GPU_ENERGY_FIELDS",
    "GpuEnergyOut",
    "CodeUrlUpdate",
    "CurrentTask",
    "EventOut",
    "EventPage",
    "PinUpdate",
    "SubmissionBrief",
    "SubmissionCreate",
    "SubmissionOut",
    "TaskOut",
    "gpu_energy_of",
]
