"""What a call into a learner host cost, as harness code measures it: the CPU time of the
host's processes (kernel-kept, outside the learner's reach), the wall time, and the FLOP
floor that CPU time implies on this node (:mod:`workers.sandbox.metering.calibration`). The floor is
charged when the learner's own count falls below it, and the trial is marked for it.

A host's whole life is charged, not only its measured calls: each measured call also takes
the CPU time the host used since the previous measured call ended (from its start, for the
first: imports, ``describe``, ``init_state``; between calls: calls that failed or were not
measured, and idle threads of a host that is not paused between calls: a
:class:`~workers.sandbox.pause.PausingHost` is, after each measured call), as
``cpu_outside_calls_s``, recorded and floored with the call. A
reading that comes back empty is never 0: the call is charged wall time × declared CPUs,
marked ``cpu_estimated``."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from services.store.runs.outcomes import FloorCharged
from workers.sandbox.client import LearnerHost
from workers.sandbox.metering.calibration import FLOOR_FRACTION, compute_floor, machine_flop_rate
from workers.sandbox.metering.gpu_calibration import gpu_flop_rate
from workers.sandbox.metering.gpu_usage import GpuUsage, absent, watched
from workers.sandbox.metering.usage import tree_pids
from workers.sandbox.pause import PausingHost
from workers.trainer.energy import RaplWindow, energy_fields

T = TypeVar("T")


START_ALLOWANCE_S = 5.0
"""CPU-seconds of a host's start never floored (the interpreter, bubblewrap, importing torch
and the learner, the warm-up pass: 2.7 CPU-s for ``indep_small`` on the 2-core CI machine,
``bench/bench_floor_rate.py``); past it, compute outside calls is floored like a call's."""

_CHARGED: weakref.WeakKeyDictionary[LearnerHost, float] = weakref.WeakKeyDictionary()
"""Per host: its CPU reading when its last measured call ended (what was charged already)."""


def measured_call(host: LearnerHost, call: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """Run ``call`` (which talks to ``host``) and return its result with the usage fields:
    ``cpu_seconds`` (the call's and what the host used outside calls since the last measured
    one, ``cpu_outside_calls_s``; an estimate where the machine cannot say, ``cpu_estimated``),
    ``host_wall_s``, ``flop_rate`` (FLOPs per CPU-second of this node), the GPU fields
    (:class:`GpuUsage`: ``None`` with ``gpu_note`` saying why where not measured) and
    ``flops_floor``. A call that raises carries its usage fields on the exception
    (:func:`charge_failure`); uncharged there, they go to the host's next measured call."""
    first = host not in _CHARGED
    charged = _CHARGED.get(host, 0.0)
    before, started = host.cpu_seconds(), time.perf_counter()
    rapl = RaplWindow().start()  # the node's package energy, where it exposes RAPL
    failed: BaseException | None = None
    with watched(lambda: tree_pids(host.pid), gpu=host.spec.gpu) as gpu:
        try:
            result = call()
        except BaseException as exc:  # noqa: BLE001 - raised below, its usage attached
            failed = exc
        after = host.cpu_seconds()
    if isinstance(host, PausingHost):
        host.pause()  # it computes nothing until its next request
    wall = time.perf_counter() - started
    used, estimated = call_cpu_seconds(before, after, wall, host.spec.limits.cpus)
    outside = 0.0 if before is None else max(before - charged, 0.0)
    fields = usage_fields(
        used,
        wall,
        gpu.usage,
        outside_s=outside,
        outside_allowance_s=START_ALLOWANCE_S if first else 0.0,
        rapl_j=rapl.joules(),
    )
    fields["cpu_estimated"] = estimated
    if failed is not None:  # charged by whoever catches it (charge_failure), else by the host's next call
        failed.usage = {**fields, "cpu_reading": after}  # type: ignore[attr-defined] # plain: crosses Ray
        raise failed
    if after is not None:
        _CHARGED[host] = after
    return result, fields


def charge_failure(host: LearnerHost, exc: BaseException) -> dict[str, Any] | None:
    """The usage fields :func:`measured_call` attached to the exception a call into ``host``
    raised, now charged by the caller (the host's next call no longer takes that time);
    ``None`` if it carries none."""
    usage = getattr(exc, "usage", None)
    if not isinstance(usage, dict):
        return None
    if isinstance(usage.get("cpu_reading"), (int, float)):
        _CHARGED[host] = float(usage["cpu_reading"])
    return {k: v for k, v in usage.items() if k != "cpu_reading"}


def failed_call_floor(exc: BaseException) -> float:
    """The floor the usage a failed measured call carries implies (0 where it carries none;
    it survives pickling, so a Ray task error's cause still has it): what a task whose
    evaluation failed is charged for that evaluation."""
    usage = getattr(exc, "usage", None)
    return float(usage.get("flops_floor") or 0) if isinstance(usage, dict) else 0.0


def call_cpu_seconds(
    before: float | None, after: float | None, wall_s: float, declared_cpus: float
) -> tuple[float, bool]:
    """A call's CPU time and whether it is an estimate: the readings' difference, or, where
    either reading is missing, wall time × the CPUs the host declared (at least one)."""
    if before is not None and after is not None:
        return max(after - before, 0.0), False
    return wall_s * max(declared_cpus or 1.0, 1.0), True


def estimated_usage(wall_s: float, declared_cpus: float, why: str) -> dict[str, Any]:
    """The usage fields of a call whose host went with its reading (its executor's process died):
    wall time × the CPUs it declared, floored like any call's and marked ``cpu_estimated``;
    never 0, which would let a learner that kills its own executor train for free."""
    used, _ = call_cpu_seconds(None, None, wall_s, declared_cpus)
    return {**usage_fields(used, wall_s, absent(why)), "cpu_estimated": True}


def usage_of_failure(exc: BaseException, wall_s: float, declared_cpus: float) -> dict[str, Any]:
    """What a trial that failed outside the learner's own report is charged: the usage fields its
    call carried (:func:`measured_call` attached them; Ray keeps them on the cause), else
    :func:`estimated_usage`."""
    for candidate in (exc, getattr(exc, "cause", None)):
        usage = getattr(candidate, "usage", None)
        if isinstance(usage, dict):
            return {k: v for k, v in usage.items() if k != "cpu_reading"}
    return estimated_usage(wall_s, declared_cpus, f"no reading: {type(exc).__name__}")


def usage_fields(
    cpu_seconds: float | None,
    wall_s: float,
    gpu: GpuUsage,
    *,
    outside_s: float = 0.0,
    outside_allowance_s: float = 0.0,
    rapl_j: float | None = None,
) -> dict[str, Any]:
    """The usage fields of a call: CPU and GPU time, the node's rates, and the floor they imply
    (one rule for both: :func:`~workers.sandbox.metering.calibration.compute_floor`); ``outside_s`` of
    CPU used outside calls is added to the call's, floored past ``outside_allowance_s``."""
    rate = machine_flop_rate()
    gpu_rate, why = gpu_flop_rate() if gpu.gpu_seconds is not None else (None, "")
    floor = compute_floor(cpu_seconds, rate, gpu_seconds=gpu.gpu_seconds, gpu_rate=gpu_rate)
    floor += int(max(outside_s - outside_allowance_s, 0.0) * rate * FLOOR_FRACTION)
    total = None if cpu_seconds is None else cpu_seconds + outside_s
    return {
        "cpu_seconds": total,
        "cpu_outside_calls_s": outside_s,
        "host_wall_s": wall_s,
        "flop_rate": rate,
        **gpu.fields(),
        "gpu_flop_rate": gpu_rate,
        "gpu_note": gpu.gpu_note or why or None,
        "flops_floor": floor,
        **energy_fields(total, rapl_j, gpu.gpu_energy_j),  # RAPL's joules, else the labelled estimate
    }


@dataclass(frozen=True)
class EvaluationCost(FloorCharged):
    """What scoring the chosen predictor cost: FLOPs charged (the floor when the learner's own
    count is below it), the host's CPU time, and whether the floor was charged."""

    counted: int
    flops_floor: int
    cpu_seconds: float | None
    cpu_estimated: bool = False  # cpu_seconds is wall time × declared CPUs

    @property
    def counted_flops(self) -> int:
        return self.counted

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> EvaluationCost:
        """From a prediction job's FLOP and usage fields (:func:`measured_call`)."""
        used = fields.get("cpu_seconds")
        return cls(
            counted=int(fields["flops_measured"] + fields["flops_reported"]),
            flops_floor=int(fields.get("flops_floor") or 0),
            cpu_seconds=float(used) if isinstance(used, (int, float)) else None,
            cpu_estimated=bool(fields.get("cpu_estimated")),
        )


def sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the values that were measured; ``None`` when none was."""
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


__all__ = [
    "START_ALLOWANCE_S",
    "EvaluationCost",
    "call_cpu_seconds",
    "charge_failure",
    "estimated_usage",
    "failed_call_floor",
    "measured_call",
    "sum_known",
    "usage_fields",
    "usage_of_failure",
]
