"""What a trial and a task produce, as typed records: the contract between the runner that
makes them and the records that store them.

Inside Ray a trial's result travels as the plain dict that ``tune.report`` needs; it becomes
a :class:`TrialOutcome` once, where the runner receives it
(:meth:`TrialOutcome.from_metrics`), and nothing downstream reads string keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

TrialStatus = Literal["ok", "failed", "stopped"]  # stopped: ended early by the search's scheduler
FlopsSource = Literal["measured", "reported", "floor", "near_floor"]
"""floor: the harness's CPU-time floor was charged; near_floor: the learner's own count was charged,
but it lies within :data:`NEAR_FLOOR_BAND` times the floor (a count topped up to just over it)."""
NEAR_FLOOR_BAND = 4.0
"""A count below this many times its floor is marked near-floor (``NEVIS_NEAR_FLOOR_BAND``): the
floor is 1/16 of the calibrated rate, the built-ins count about 0.29 of it, so a count under 4 ×
the floor is under 1/4 of what the host's CPU time buys at that rate (docs/isolation.md)."""
NEAR_FLOOR_MIN_CPU_S = 1.0
"""A trial whose host used less CPU time than this is too small to judge: its count is dominated
by start-up and first calls, and topping it up would gain less than a CPU-second's floor."""


@dataclass(frozen=True)
class StoredObject:
    """An object the harness wrote to the store: key, size and checksum."""

    key: str
    size: int
    sha256: str

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> StoredObject:
        return cls(key=str(doc["key"]), size=int(doc["size"]), sha256=str(doc["sha256"]))


@dataclass(frozen=True)
class CheckpointRef(StoredObject):
    """A checkpoint of a trial at ``step``."""

    step: int = 0

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> CheckpointRef:
        return cls(key=str(doc["key"]), size=int(doc["size"]), sha256=str(doc["sha256"]), step=int(doc["step"]))


class FloorCharged:
    """FLOPs charged against the harness's floor: the learner's own count, or the floor its
    host's measured CPU time implies when the count is below it (docs/isolation.md)."""

    flops_floor: int

    @property
    def counted_flops(self) -> int:
        raise NotImplementedError

    @property
    def floored(self) -> bool:
        """The count was implausibly low for the CPU time the host used: the floor is charged."""
        return self.flops_floor > self.counted_flops

    @property
    def flops(self) -> int:
        return max(self.counted_flops, self.flops_floor)

    def is_near_floor(self, band: float = NEAR_FLOOR_BAND) -> bool:
        """The learner's own count was charged (at least the floor), but it is below ``band``
        times the floor: too little to vouch for, marked rather than floored."""
        cpu = getattr(self, "cpu_seconds", None)
        large_enough = cpu is None or cpu >= NEAR_FLOOR_MIN_CPU_S
        return (
            large_enough and not self.floored and self.flops_floor > 0 and self.counted_flops < band * self.flops_floor
        )


@dataclass(frozen=True)
class TrialOutcome(FloorCharged):
    """One finished trial, ok or failed, with the FLOPs it spent either way."""

    trial_index: int
    seed: int
    status: TrialStatus
    config: Mapping[str, Any] = field(default_factory=dict)
    flops_measured: int = 0
    flops_reported: int = 0
    flops_untracked: int = 0  # the part of flops_measured from modules the learner did not track
    dev_error: float | None = None
    wall_time_s: float | None = None
    peak_memory_bytes: int | None = None
    curve: tuple[tuple[int, float | None], ...] = ()
    checkpoints: tuple[CheckpointRef, ...] = ()
    missed_checkpoints: tuple[int, ...] = ()
    predictor: StoredObject | None = None
    state: StoredObject | None = None
    error: str | None = None
    traceback: str | None = None
    num_workers: int = 1
    cpu_seconds: float | None = None  # the learner host's CPU time, measured by the harness
    flops_floor: int = 0  # the least that CPU time is charged (workers.sandbox.metering.calibration)
    flops_updates: int | None = None  # the part of the count spent on training updates; None: all of it
    cpu_estimated: bool = False  # cpu_seconds is wall time × declared CPUs: no reading could be had
    near_floor_band: float = NEAR_FLOOR_BAND  # the setting (NEVIS_NEAR_FLOOR_BAND) the runner ran under
    # GPU time, peak GPU memory (NVML; None with gpu_note saying why) and energy (workers/trainer/energy.py)
    gpu_seconds: float | None = None
    gpu_peak_memory_bytes: int | None = None
    gpu_note: str | None = None
    energy_kwh: float | None = None
    energy_source: str | None = None  # rapl or estimate, +nvml with the GPUs' counters

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def counted_flops(self) -> int:
        """What the learner's process counted and reported: its own word."""
        return self.flops_measured + self.flops_reported

    @property
    def flops_paper(self) -> int:
        """FLOPs as NEVIS'22 counts them: the training updates of the trial (no validation,
        dev scoring or selection passes). A floored trial's own split is not believed: the
        floor is its paper count too. A host that did not split its count: all of it."""
        if self.floored or self.flops_updates is None:
            return self.flops
        return min(self.flops_updates, self.counted_flops)

    @property
    def near_floor(self) -> bool:
        """The count lies within the band above the floor (:meth:`FloorCharged.is_near_floor`)."""
        return self.is_near_floor(self.near_floor_band)

    @property
    def flops_source(self) -> FlopsSource:
        """``floor`` when the harness's floor was charged; ``near_floor`` when the learner's count
        was, but it lies within the band above the floor; else ``reported`` as soon as any part
        was reported by the learner, else ``measured``."""
        if self.floored:
            return "floor"
        if self.near_floor:
            return "near_floor"
        return "reported" if self.flops_reported else "measured"

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> TrialOutcome:
        """The outcome of a trial from the dict it reported to Ray Tune (the runner sets
        ``near_floor_band`` from its settings where it records the outcome)."""
        ok = metrics.get("status") == "ok"
        status: TrialStatus = "ok" if ok else "stopped" if metrics.get("status") == "stopped" else "failed"
        return cls(
            trial_index=int(metrics["trial_index"]),
            seed=int(metrics["seed"]),
            status=status,
            config=_plain(metrics.get("config") or {}),
            flops_measured=int(metrics.get("flops_measured") or 0),
            flops_reported=int(metrics.get("flops_reported") or 0),
            flops_untracked=int(metrics.get("flops_untracked") or 0),
            dev_error=float(metrics["dev_error"]) if ok and metrics.get("dev_error") is not None else None,
            wall_time_s=_float_or_none(metrics.get("wall_time_s")),
            peak_memory_bytes=_int_or_none(metrics.get("peak_memory_bytes")),
            curve=tuple((int(step), _float_or_none(loss)) for step, loss in metrics.get("curve") or ()),
            checkpoints=tuple(CheckpointRef.from_dict(c) for c in metrics.get("checkpoints") or ()),
            missed_checkpoints=tuple(int(s) for s in metrics.get("missed_checkpoints") or ()),
            predictor=StoredObject.from_dict(metrics["predictor"]) if metrics.get("predictor") else None,
            state=StoredObject.from_dict(metrics["state"]) if metrics.get("state") else None,
            error=metrics.get("error"),
            traceback=metrics.get("traceback"),
            num_workers=int(metrics.get("num_workers") or 1),
            cpu_seconds=_float_or_none(metrics.get("cpu_seconds")),
            flops_floor=int(metrics.get("flops_floor") or 0),
            flops_updates=_int_or_none(metrics.get("flops_updates")),
            cpu_estimated=bool(metrics.get("cpu_estimated")),
            gpu_seconds=_float_or_none(metrics.get("gpu_seconds")),
            gpu_peak_memory_bytes=_int_or_none(metrics.get("gpu_peak_memory_bytes")),
            gpu_note=metrics.get("gpu_note"),
            energy_kwh=_float_or_none(metrics.get("energy_kwh")),
            energy_source=metrics.get("energy_source"),
        )


@dataclass(frozen=True)
class TaskOutcome:
    """A task's committed result: the chosen trial, its error and what the task cost."""

    order: int
    best_trial_index: int
    error: float
    split: str  # test (meta-test phase) or dev_test (meta-train phase)
    metric: str  # accuracy (single-label) or map (multi-label)
    flops: float  # every trial's FLOPs plus the evaluation's
    wall_time_s: float
    peak_memory_bytes: int
    state_key: str  # the learner state carried to the next task
    cpu_seconds: float | None = None  # learner hosts' CPU time (trials and evaluation), harness-measured
    flops_floored: bool = False  # a trial or the evaluation was charged the CPU-time floor
    flops_near_floor: bool = False  # a trial's own count was charged but lies near its floor (marked)
    cpu_estimated: bool = False  # part of cpu_seconds is wall time × declared CPUs (no reading)
    flops_paper: float | None = None  # NEVIS'22's count: the training updates of every trial
    flops_prediction: float | None = None  # the evaluation's prediction (in ``flops``, not in the paper's)
    consistency_jump: float | None = None  # share lost on shifted copies (workers.trainer.consistency); None: unchecked
    inconsistent: bool = False  # the jump is beyond what an honest learner shows: marked everywhere


def best_trial(outcomes: Sequence[TrialOutcome]) -> TrialOutcome | None:
    """The successful trial with the lowest dev error (ties: lowest trial index)."""
    ok = [o for o in outcomes if o.ok and o.dev_error is not None]
    return min(ok, key=lambda o: (o.dev_error, o.trial_index)) if ok else None


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _plain(value: Any) -> Any:
    """JSON-storable copy of a config: numpy scalars become Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


__all__ = [
    "NEAR_FLOOR_BAND",
    "NEAR_FLOOR_MIN_CPU_S",
    "FloorCharged",
    "CheckpointRef",
    "FlopsSource",
    "StoredObject",
    "TaskOutcome",
    "TrialOutcome",
    "TrialStatus",
    "best_trial",
]
