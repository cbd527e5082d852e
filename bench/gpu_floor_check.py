"""Whether a learner that hides its compute from its own FLOP meter is still charged for it: a
hostile learner (meter patched, raw ``torch.matmul`` on the device) against its honest twin (a
tracked MLP), each trained for the same time through the harness's own path.

Each learner runs one trial in a real learner host (the sandbox the machine offers, its
control group counting CPU time; NVML, where the node has it, its GPU time) through
:func:`~workers.trainer.host_usage.measured_call` and
:func:`~workers.trainer.trial.run_trial_in_host`, as an executor runs one, and the trial is
charged as the runner charges it (:class:`~services.store.runs.outcomes.TrialOutcome`): the
larger of the learner's own count and the floor of the host's measured usage
(:func:`~workers.sandbox.metering.calibration.compute_floor`: CPU-seconds at the node's calibrated
rate, and GPU-seconds at the device's calibrated bf16 rate, each over its stated factor). The
task's harness actor is a plain object answering at once, and ``ray.get`` hands that back
(no cluster; the GPU image has no Ray).

Prints, per learner: its own FLOP count, the harness-measured CPU-seconds and GPU-seconds (or
why there are none), the floor (its CPU and GPU terms) and the charge; then the hostile
charge over the honest one, and a verdict. On a CPU the CPU term is what must catch the
hostile learner (its charge at least its floor, marked ``floor``); on CUDA the GPU term is,
and the other half is said not to have run, never estimated. Exit 1 when the half that ran did
not catch it.

Usage: python bench/gpu_floor_check.py --device cuda [--seconds 15] [--json out.json]
       (``bench/gpu_checks.sh`` runs it; ``--device cpu --tiny`` runs in seconds, the CI test)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The trial asks its harness actor through ray.get (workers/trainer/trial_answers.py): a stand-in
# module hands the plain answers back, so neither Ray nor a cluster is needed.
sys.modules["ray"] = types.SimpleNamespace(get=lambda answer: answer)  # type: ignore[assignment]

try:
    from services.store.runs.outcomes import TrialOutcome
    from workers.learners.protocol import LabelledData, TaskInfo
    from workers.sandbox.client import HostSpec, LearnerHost
    from workers.sandbox.metering import calibration
    from workers.sandbox.metering.gpu_calibration import gpu_flop_rate
    from workers.sandbox.metering.gpu_usage import open_source
    from workers.sandbox.metering.usage import tree_pids
    from workers.trainer.host_usage import START_ALLOWANCE_S, measured_call
    from workers.trainer.trial import TRIAL_INDEX, TRIAL_SEED, TrialSpec, run_trial_in_host
except ModuleNotFoundError as missing:  # the GPU image lacks pydantic & co.: bench/gpu_checks.sh's header
    raise SystemExit(
        f"the harness needs {missing.name!r}, not installed here: carry the project's wheels (.whl, "
        "bench/gpu_checks.sh's header says how)"
    ) from None

IMAGE_SIZE, CLASSES, TRAIN, DEV = 32, 10, 1024, 64
SHAPES = {  # (hidden, batch) of the honest twin and of the hostile learner
    "cuda": {"honest": (4096, 4096), "hostile": (8192, 8192)},
    "cpu": {"honest": (512, 128), "hostile": (1024, 256)},
    "tiny": {"honest": (256, 64), "hostile": (256, 64)},
}


class _Remote:
    def __init__(self, method: Any) -> None:
        self.remote = method


class _Harness:
    """The task harness actor's methods a trial calls, keeping nothing."""

    def __init__(self) -> None:
        self.put = _Remote(lambda key, data: {"key": key, "size": len(data), "sha256": "0" * 64})
        self.rung_report = _Remote(lambda *args: True)
        self.budget_report = _Remote(lambda *args: (True, 0))


def task() -> tuple[TaskInfo, LabelledData, LabelledData]:
    rng = np.random.default_rng(0)
    info = TaskInfo(
        order=1,
        key="gpu-floor",
        dataset="gpu-floor",
        title="gpu-floor",
        year=2000,
        domain=None,
        kind="single",
        num_classes=CLASSES,
        class_names=tuple(str(i) for i in range(CLASSES)),
        image_size=IMAGE_SIZE,
        num_train=TRAIN,
        num_dev=DEV,
    )
    shape = (IMAGE_SIZE, IMAGE_SIZE, 3)
    train = LabelledData(rng.integers(0, 255, (TRAIN, *shape), np.uint8), rng.integers(0, CLASSES, TRAIN))
    dev = LabelledData(rng.integers(0, 255, (DEV, *shape), np.uint8), rng.integers(0, CLASSES, DEV))
    return info, train, dev


class NvmlSeen:
    """A look of our own at NVML while a trial runs (CUDA only): which processes its samples
    name, beside the host's tree. Where the harness measures no GPU time although the device was
    busy, this tells a container's foreign PID namespace from a device that was idle."""

    def __init__(self, host_pid: int) -> None:
        self.host_pid, self.pids, self.tree, self.busiest = host_pid, set(), set(), 0.0
        self.note: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> NvmlSeen:
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._nvml, self._device = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as exc:  # noqa: BLE001 - no NVML: said, not guessed
            self.note = f"NVML not readable here: {exc}"
            return self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        since = 0
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                self.tree |= tree_pids(self.host_pid)
                self.busiest = max(self.busiest, float(self._nvml.nvmlDeviceGetUtilizationRates(self._device).gpu))
                for sample in self._nvml.nvmlDeviceGetProcessUtilization(self._device, since):
                    since = max(since, int(sample.timeStamp))
                    self.pids.add(int(sample.pid))
            with contextlib.suppress(Exception):
                self.pids |= {int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._device)}

    def fields(self) -> dict[str, Any]:
        return {
            "nvml_pids_seen": sorted(self.pids),
            "host_tree_pids": sorted(self.tree),
            "device_busiest_percent": self.busiest,
            "nvml_note": self.note,
        }


def run_learner(name: str, device: str, seconds: float, shapes: tuple[int, int], sandbox: str) -> dict[str, Any]:
    """One trial of ``gpu_floor_learners:<name>`` in a learner host of its own, charged as the
    runner charges it; returns what it printed and stored."""
    info, train, dev = task()
    host_spec = HostSpec(
        f"gpu_floor_learners:{name}", import_paths=(str(ROOT / "bench"),), sandbox=sandbox, gpu=device == "cuda"
    )
    spec = TrialSpec(
        host=host_spec,
        info=info,
        past=(),
        stream_length=1,
        steps=10**7,  # the learner stops at its time, far before
        checkpoint_fractions=(),
        state=pickle.dumps(None),
        train=train,
        dev=dev,
        key_prefix=f"bench/gpu-floor/{name}",
        harness=_Harness(),
    )
    hidden, batch = shapes
    config = {TRIAL_INDEX: 0, TRIAL_SEED: 0, "seconds": seconds, "hidden": hidden, "batch": batch}
    started = time.perf_counter()
    with LearnerHost(host_spec) as host:
        seen = NvmlSeen(host.pid) if device == "cuda" else None
        with seen or contextlib.nullcontext():
            metrics, usage = measured_call(host, lambda: run_trial_in_host(host, config, spec))
        used_device, used_sandbox = host.device, host.sandbox
    outcome = TrialOutcome.from_metrics({**metrics, **usage})
    steps = int(outcome.curve[-1][0]) if outcome.curve else 0
    gpu_term = calibration.compute_floor(
        None, usage["flop_rate"], gpu_seconds=usage["gpu_seconds"], gpu_rate=usage["gpu_flop_rate"]
    )
    width = IMAGE_SIZE * IMAGE_SIZE * 3
    return {
        "learner": name,
        "status": outcome.status,
        "error": outcome.error,
        "device": used_device,
        "sandbox": used_sandbox,
        "hidden": hidden,
        "batch": batch,
        "steps": steps,
        # as the meter counts the honest MLP: forward and weight gradients (the pixels need none)
        "work_flops": batch * (4 * width * hidden + 6 * hidden * CLASSES) * steps,
        "own_flops": outcome.counted_flops,
        "cpu_seconds": usage["cpu_seconds"],
        "cpu_outside_calls_s": usage["cpu_outside_calls_s"],
        "cpu_estimated": usage["cpu_estimated"],
        "gpu_seconds": usage["gpu_seconds"],
        "gpu_note": usage["gpu_note"],
        "flop_rate": usage["flop_rate"],
        "gpu_flop_rate": usage["gpu_flop_rate"],
        "floor": outcome.flops_floor,
        "floor_gpu_term": gpu_term,
        "floor_cpu_term": outcome.flops_floor - gpu_term,
        "charged": outcome.flops,
        "source": outcome.flops_source,
        "wall_s": round(time.perf_counter() - started, 2),
        **(seen.fields() if seen else {}),
    }


def verdict(device: str, honest: dict[str, Any], hostile: dict[str, Any], nvml_why: str) -> dict[str, Any]:
    """Which half ran, and whether its term caught the hostile learner."""
    charged_floor = hostile["floor"] > 0 and hostile["charged"] >= hostile["floor"] and hostile["source"] == "floor"
    ran = {"run": True, "caught": charged_floor}
    if device == "cpu":
        why = "no CUDA device on this machine" if not _cuda() else "run with --device cpu"
        return {
            "cpu_half": {**ran, "by": "the CPU term: CPU-seconds x the node's rate / 16"},
            "gpu_half": {"run": False, "why": f"not run here: {why} ({nvml_why or 'NVML loads'})"},
        }
    caught = charged_floor and hostile["gpu_seconds"] is not None and hostile["floor_gpu_term"] > 0
    why = None
    if not str(hostile["device"]).startswith("cuda"):
        caught = False
        why = (
            "the learner host saw no CUDA device (torch.cuda.is_available() false inside it: its environment is "
            "cleared, so a driver found through LD_LIBRARY_PATH is not; see cuda_env)"
        )
    elif hostile["gpu_seconds"] is None:
        why = str(hostile["gpu_note"])
    elif hostile["floor_gpu_term"] == 0:
        why = "the GPU term is 0: NVML's samples gave the host's processes no GPU time past the allowance"
    return {
        "gpu_half": {
            **ran,
            "caught": caught,
            "by": "the GPU term: GPU-seconds x the device's bf16 rate / 64",
            "why": why,
        },
        "cpu_half": {"run": False, "why": "not this call's check (its CPU term is in the table): run --device cpu"},
    }


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _ld_cached() -> bool | None:
    try:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10, check=False).stdout
    except OSError:
        return None
    return "libcuda.so" in listed


def _num(value: Any, fmt: str = ".3e") -> str:
    return "-" if value is None else format(value, fmt)


def report(figures: dict[str, Any]) -> None:
    honest, hostile = figures["honest"], figures["hostile"]
    clock = "wall" if figures["device"] == "cuda" else "CPU"
    print(
        f"device {figures['device']} (sandbox {hostile['sandbox']}); each learner trains {figures['seconds']} "
        f"{clock}-s; CPU rate {figures['flop_rate']:.3e} FLOP per CPU-s (floor 1/{round(1 / calibration.FLOOR_FRACTION)}), "
        f"GPU rate {_num(figures['gpu_flop_rate'])} FLOP per GPU-s (floor 1/{round(1 / calibration.GPU_FLOOR_FRACTION)})"
        f"{'' if figures['gpu_flop_rate'] else ' - ' + figures['gpu_rate_note']}"
    )
    print(
        f"{'learner':<8} {'steps':>6} {'own FLOPs':>10} {'CPU-s':>6} {'GPU-s':>6} {'floor':>10} "
        f"{'CPU term':>10} {'GPU term':>10} {'charged':>10} source"
    )
    for row in (honest, hostile):
        print(
            f"{row['learner']:<8} {row['steps']:>6} {row['own_flops']:>10.3e} {_num(row['cpu_seconds'], '6.1f'):>6} "
            f"{_num(row['gpu_seconds'], '6.1f'):>6} {row['floor']:>10.3e} {row['floor_cpu_term']:>10.3e} "
            f"{row['floor_gpu_term']:>10.3e} {row['charged']:>10.3e} {row['source']}"
            f"{'  FAILED: ' + str(row['error']) if row['status'] != 'ok' else ''}"
        )
    if figures["device"] == "cuda":
        print(f"learner hosts' devices: honest {honest['device']}, hostile {hostile['device']}; {figures['cuda_env']}")
    for row in (honest, hostile):
        if row["gpu_seconds"] is None:
            print(f"{row['learner']}: no GPU-seconds: {row['gpu_note']}")
    ratio = figures["ratio_hostile_over_honest"]
    print(
        f"hostile charged {_num(ratio, '.3f')} x its honest twin's charge; its own count {hostile['own_flops']}, "
        f"its work about {hostile['work_flops']:.3e} FLOPs (as a meter would count it), of which it was charged "
        f"{_num(figures['hostile_charged_share_of_work'], '.3f')}"
    )
    for half in ("cpu_half", "gpu_half"):
        got = figures[half]
        name = "CPU half" if half == "cpu_half" else "GPU half"
        if not got["run"]:
            print(f"{name}: {got['why']}")
        else:
            said = "caught" if got["caught"] else "NOT caught"
            print(f"{name}: {said} by {got['by']} (charge {hostile['charged']:.3e}, floor {hostile['floor']:.3e})")
            if got.get("why"):
                print(f"  why: {got['why']}")
    if figures["device"] == "cuda" and "nvml_pids_seen" in hostile:
        print(
            f"NVML's own look during the hostile trial: pids {hostile['nvml_pids_seen'][:8]} vs the host's tree "
            f"{hostile['host_tree_pids'][:8]}, device busiest {hostile['device_busiest_percent']:.0f} %"
            f"{' - ' + hostile['nvml_note'] if hostile['nvml_note'] else ''}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--seconds", type=float, default=None, help="each learner's training time (default 15; 3 tiny)")
    parser.add_argument("--tiny", action="store_true", help="small shapes and 3 s each: the CI test on a CPU")
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "none"))
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if args.device == "cuda" and not _cuda():
        print("no CUDA device here: run with --device cpu", file=sys.stderr)
        return 2
    seconds = args.seconds or (3.0 if args.tiny else 15.0)
    shapes = SHAPES["tiny" if args.tiny else args.device]
    source, nvml_why = open_source()
    if source is not None:
        nvml_why = ""
    rate = calibration.machine_flop_rate()
    gpu_rate, gpu_rate_note = gpu_flop_rate()
    honest = run_learner("honest", args.device, seconds, shapes["honest"], args.sandbox)
    hostile = run_learner("hostile", args.device, seconds, shapes["hostile"], args.sandbox)
    figures: dict[str, Any] = {
        "device": args.device,
        "tiny": args.tiny,
        "seconds": seconds,
        "flop_rate": rate,
        "gpu_flop_rate": gpu_rate,
        "gpu_rate_note": gpu_rate_note,
        "nvml": nvml_why or "NVML loads",
        "start_allowance_s": START_ALLOWANCE_S,
        "honest": honest,
        "hostile": hostile,
        "ratio_hostile_over_honest": hostile["charged"] / honest["charged"] if honest["charged"] else None,
        "hostile_charged_share_of_work": hostile["charged"] / hostile["work_flops"] if hostile["work_flops"] else None,
        **verdict(args.device, honest, hostile, nvml_why),
    }
    if args.device == "cuda":  # where the driver comes from, for a host that sees none
        figures["cuda_env"] = {
            "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH"),
            "libcuda_in_ld_cache": _ld_cached(),
        }
    ran = figures["cpu_half"] if args.device == "cpu" else figures["gpu_half"]
    figures["ok"] = honest["status"] == hostile["status"] == "ok" and ran["caught"]
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
