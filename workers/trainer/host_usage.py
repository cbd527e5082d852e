"""What a call into a learner host cost, as harness code measures it: the CPU time of the
host's processes (kernel-kept, outside the learner's reach), the wall time, and the FLOP
floor that CPU time implies on this node (:mod:`workers.sandbox.calibration`). The floor is
charged when the learner's own count falls below it, and the trial is marked for it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from services.store.runs.outcomes import FloorCharged
from workers.sandbox.calibration import compute_floor, machine_flop_rate
from workers.sandbox.client import LearnerHost
from workers.sandbox.gpu_calibration import gpu_flop_rate
from workers.sandbox.gpu_usage import GpuUsage, watched
from workers.sandbox.usage import tree_pids

T = TypeVar("T")


def measured_call(host: LearnerHost, call: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """Run ``call`` (which talks to ``host``) and return its result with the usage fields:
    ``cpu_seconds`` (``None`` where the machine cannot say), ``host_wall_s``, ``flop_rate``
    (FLOPs per CPU-second of this node), the GPU fields (:class:`GpuUsage`: ``None`` with
    ``gpu_note`` saying why where not measured) and ``flops_floor``."""
    before, started = host.cpu_seconds(), time.perf_counter()
    with watched(lambda: tree_pids(host.pid), gpu=host.spec.gpu) as gpu:
        try:
            result = call()
        finally:
            after = host.cpu_seconds()
    used = None if before is None or after is None else max(after - before, 0.0)
    return result, usage_fields(used, time.perf_counter() - started, gpu.usage)


def usage_fields(cpu_seconds: float | None, wall_s: float, gpu: GpuUsage) -> dict[str, Any]:
    """The usage fields of a call: CPU and GPU time, the node's rates, and the floor they imply
    (one rule for both: :func:`~workers.sandbox.calibration.compute_floor`)."""
    rate = machine_flop_rate()
    gpu_rate, why = gpu_flop_rate() if gpu.gpu_seconds is not None else (None, "")
    return {"cpu_seconds": cpu_seconds, "host_wall_s": wall_s, "flop_rate": rate, **gpu.fields(),
            "gpu_flop_rate": gpu_rate, "gpu_note": gpu.gpu_note or why or None,
            "flops_floor": compute_floor(cpu_seconds, rate, gpu_seconds=gpu.gpu_seconds, gpu_rate=gpu_rate)}


@dataclass(frozen=True)
class EvaluationCost(FloorCharged):
    """What scoring the chosen predictor cost: FLOPs charged (the floor when the learner's own
    count is below it), the host's CPU time, and whether the floor was charged."""

    counted: int
    flops_floor: int
    cpu_seconds: float | None

    @property
    def counted_flops(self) -> int:
        return self.counted

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> EvaluationCost:
        """From a prediction job's FLOP and usage fields (:func:`measured_call`)."""
        used = fields.get("cpu_seconds")
        return cls(counted=int(fields["flops_measured"] + fields["flops_reported"]),
                   flops_floor=int(fields.get("flops_floor") or 0),
                   cpu_seconds=float(used) if isinstance(used, (int, float)) else None)


def sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the values that were measured; ``None`` when none was."""
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


__all__ = ["EvaluationCost", "measured_call", "sum_known", "usage_fields"]
