"""Benchmark: the FLOP rate a built-in learner achieves per CPU-second of its host, against
the node's calibrated rate (:mod:`workers.sandbox.metering.calibration`), which the floor's fraction
is set from (issue 44: a floor that means something).

Runs ``indep_small`` trials in a real learner host (the sandbox the machine offers, its
control group measuring CPU time) on random 32x32 images, and prints per trial its own
counted FLOPs, the call's CPU seconds (host start and time outside calls excluded), the
implied FLOP per CPU-second and its share of the calibrated rate.

Usage: .venv/bin/python bench/bench_floor_rate.py [--steps 300] [--trials 2]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.learners.protocol import LabelledData, TaskInfo
from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.metering.calibration import machine_flop_rate
from workers.trainer.host_usage import measured_call
from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, run_trial_in_host


class _Remote:
    def __init__(self, method: Any) -> None:
        self.remote = method


class _Harness:
    """The task harness actor's methods a trial calls, keeping nothing."""

    def __init__(self) -> None:
        self.put = _Remote(lambda key, data: {"key": key, "size": len(data), "sha256": "0" * 64})
        self.rung_report = _Remote(lambda *args: True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    import ray

    ray.get = lambda answer: answer  # the harness above answers at once: no cluster needed
    rng = np.random.default_rng(0)
    info = TaskInfo(
        order=1,
        key="bench",
        dataset="bench",
        title="bench",
        year=2000,
        domain=None,
        kind="single",
        num_classes=10,
        class_names=tuple(str(i) for i in range(10)),
        image_size=32,
        num_train=1024,
        num_dev=256,
    )
    train = LabelledData(rng.integers(0, 255, (1024, 32, 32, 3), np.uint8), rng.integers(0, 10, 1024))
    dev = LabelledData(rng.integers(0, 255, (256, 32, 32, 3), np.uint8), rng.integers(0, 10, 256))
    host_spec = HostSpec("indep_small")
    spec = TrialSpec(
        host=host_spec,
        info=info,
        past=(),
        stream_length=1,
        steps=args.steps,
        checkpoint_fractions=(1.0,),
        state=pickle.dumps(None),
        train=train,
        dev=dev,
        key_prefix="bench/t1/a1",
        harness=_Harness(),
    )
    rate = machine_flop_rate()
    print(f"calibrated rate: {rate:.3e} FLOP per CPU-second")
    with LearnerHost(host_spec, warm=True) as host:
        for index in range(args.trials):
            config = {TRIAL_INDEX: index, TRIAL_SEED: index, "learning_rate": 0.01, "label_smoothing": 0.1}
            metrics, usage = measured_call(host, lambda c=config: run_trial_in_host(host, c, spec))
            counted = metrics["flops_measured"] + metrics["flops_reported"]
            own_cpu = usage["cpu_seconds"] - usage["cpu_outside_calls_s"]
            achieved = counted / max(own_cpu, 1e-9)
            print(
                f"trial {index}: {metrics['status']}  counted {counted:.3e} FLOPs  call CPU {own_cpu:.2f} s  "
                f"outside calls {usage['cpu_outside_calls_s']:.2f} s  achieved {achieved:.3e} FLOP/CPU-s "
                f"= {achieved / rate:.3f} of calibrated"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
