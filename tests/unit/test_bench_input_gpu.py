"""The input and GPU benchmarks run on CPUs at tiny sizes (as CI runs them) and print sane figures;
bench_gpu.py through bench/gpu_checks.sh, the way a session lent a GPU runs it.

Each runs as a script, the way it is documented, in a subprocess with one intra-op thread."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(script: str, *args: str, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, json.loads(out.read_text())


def test_bench_input_prints_each_ways_rate(tmp_path):
    text, fig = run(
        "bench_input.py", "--images", "64", "--batch", "32", "--repeats", "1", "--seconds", "0.2", tmp_path=tmp_path
    )
    for way in ("per-image", "grid-sample", "batched"):
        assert fig[f"{way}_per_core"] > 0 and fig[f"{way}_wall"] > 0
        assert way in text
    assert fig["size"] == 64 and fig["canvas"] == 96 and fig["batched_over_per_image"] > 0


def test_bench_gpu_knows_the_bf16_peaks_of_common_devices_and_says_when_it_does_not():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_gpu", bench)  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    assert bench.peak_for("NVIDIA H200") == bench.peak_for("NVIDIA H100 80GB HBM3") == 989.0
    assert bench.peak_for("NVIDIA H100 PCIe") == 756.0
    assert bench.peak_for("NVIDIA A100-SXM4-80GB") == 312.0
    assert bench.peak_for("NVIDIA L40S") == 362.0 and bench.peak_for("NVIDIA L4") == 121.0
    assert bench.peak_for("Tesla T4") is None and bench.peak_for("cpu") is None


def test_the_prepared_gpu_checks_run_their_steps_on_a_cpu(tmp_path):
    """bench/gpu_checks.sh is what a session lent a GPU runs in one call: its steps run here too."""
    env = {
        **os.environ,
        "GPU_CHECKS_DEVICE": "cpu",
        "GPU_CHECKS_TINY": "1",
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_checks.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "!! failed" not in done.stdout
    assert "3 passed" in done.stdout  # the device tests, on the CPU
    assert '"filtered": true, "keyctl_refused": true' in done.stdout  # training under the hosts' seccomp filter
    # a hostile learner (meter patched, raw matmuls) and its honest twin, one trial each in a learner host
    check = json.loads((tmp_path / "floor_check.json").read_text())
    honest, hostile = check["honest"], check["hostile"]
    assert check["device"] == "cpu" and honest["status"] == hostile["status"] == "ok"
    assert hostile["own_flops"] == 0 and hostile["steps"] > 0 and hostile["cpu_seconds"] > 2
    assert hostile["charged"] >= hostile["floor"] > 0 and hostile["source"] == "floor"  # the CPU floor caught it
    assert honest["own_flops"] > honest["floor"] > 0 and honest["charged"] == honest["own_flops"]
    assert hostile["floor_gpu_term"] == 0 and hostile["gpu_seconds"] is None and hostile["gpu_note"]
    assert check["ratio_hostile_over_honest"] == hostile["charged"] / honest["charged"]
    assert check["cpu_half"]["caught"] and not check["gpu_half"]["run"]
    assert "GPU half: not run here" in done.stdout and "CPU half: caught" in done.stdout
    fig = json.loads((tmp_path / "gpu_b4.json").read_text())  # bench_gpu.py's figures, sane
    assert fig["device"] == "cpu" and fig["steps"] == 2 and fig["batch"] == 4
    assert fig["batch_rule"] == 64  # the paper's rule for D = 50,000: 2^floor(log2(125))
    assert fig["images_per_s"] > 0 and fig["tflops_per_s"] > 0
    # the meter's count of a step of ResNet-34 (width 8, 64 px, batch 4): forward + backward
    assert 1e9 < fig["flops_per_step"] < 4e9
    assert fig["mfu"] is None and fig["bf16_peak_tflops"] is None
    for key in ("loop_s_per_step", "input_s_per_step", "step_s_per_step"):
        assert 0 < fig[key] < 60
    assert 0 < fig["input_share_of_loop"] < 1 and -1 < fig["meter_overhead"] < 5
    for text in ("images/s", "TFLOP/s", "not computed on CPUs", "FLOP meter overhead"):
        assert text in done.stdout
    scale = json.loads((tmp_path / "paper_scale.json").read_text())  # the stream's cost at that rate
    assert scale["gpu_images_per_s"] == fig["images_per_s"] and scale["gpu_source"].startswith("measured")
    assert scale["trials_per_gpu"] == 1
    # two processes training at once on the device, as two trials sharing a GPU
    shared = json.loads((tmp_path / "gpu_b4_x2.json").read_text())
    assert shared["procs"] == 2 and len(shared["procs_loop_s_per_step"]) == 2
    assert shared["flops_per_step"] == fig["flops_per_step"]  # each process meters the same step
    assert shared["loop_s_per_step"] == max(shared["procs_loop_s_per_step"]) > 0
    assert shared["images_per_s"] == pytest.approx(2 * 4 * 2 / (2 * shared["loop_s_per_step"]))
    assert "2 processes training at once" in done.stdout
    scale = json.loads((tmp_path / "paper_scale_x2.json").read_text())
    assert scale["trials_per_gpu"] == 2 and scale["step_s_by_batch"] == {"4": shared["loop_s_per_step"]}
    # last, every figure as Markdown for the docs: a row per run, a row per sharing and GPU count
    report = done.stdout[done.stdout.rindex("== ") :]
    assert "| batch | processes | compile | images/s |" in report
    assert f"| 4 | 1 | no | {fig['images_per_s']:,.0f} |" in report
    assert f"| 4 | 2 | no | {shared['images_per_s']:,.0f} |" in report
    assert "| 1 | 64 |" in report and "| 2 | 64 |" in report and "56 of 64 GPUs idle" in report
    assert f"| hostile | {hostile['steps']} | 0 |" in report and "GPU half: not run here" in report


def test_the_gpu_checks_skip_what_would_start_past_their_deadline(tmp_path):
    """The device call returns only what ran: past GPU_CHECKS_DEADLINE_S, steps are skipped and named."""
    env = {
        **os.environ,
        "GPU_CHECKS_DEVICE": "cpu",
        "GPU_CHECKS_TINY": "1",
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "GPU_CHECKS_DEADLINE_S": "0",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_checks.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    skipped = [line for line in done.stdout.splitlines() if line.startswith("== skipped, the run's 0 s are spent")]
    assert len(skipped) == 4 and "test_on_devices.py" in skipped[0] and "--procs 2" in skipped[3]
    assert "gpu_floor_check.py" in skipped[1]
    assert not list(tmp_path.glob("*.json"))
    # the report still runs last, and says why it has nothing to show
    assert "no bench_gpu.py runs" in done.stderr + done.stdout and done.returncode == 1
