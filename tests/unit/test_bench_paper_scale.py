"""bench/paper_scale.py at a tiny setting (3 tasks, 100 steps, a narrow ResNet-34 at 16 px): it
prints its table, and its arithmetic holds: trials divide over GPUs, the causal order is a
floor no GPU count goes below, GPU-hours and cost follow from the wall time."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "scale.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "paper_scale.py"),
            "--tasks",
            "3",
            "--steps",
            "100",
            "--width",
            "8",
            "--image-size",
            "16",
            "--gpus",
            "1,2,8,16,64",
            "--json",
            str(out),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, json.loads(out.read_text())


def test_paper_scale_prints_its_table_and_its_arithmetic_holds(tmp_path):
    text, fig = _run(
        tmp_path,
        "--gpu-images-per-s",
        "50",
        "--launch-delay-s",
        "2",
        "--orchestration-s",
        "3",
        "--worker-max-tasks",
        "1",
        "--price",
        "2",
    )
    assert "| GPUs | waves per task | wall time |" in text and "causal order" in text
    assert "given (--gpu-images-per-s)" in text and "3 of 3 estimated" in text
    rows = {r["gpus"]: r for r in fig["rows"]}
    costs = fig["task_costs"]
    assert len(costs) == 3 and fig["per_task_overhead_s"] == 5
    # the meter's count: a training image is forward + backward, the backward about twice the forward
    fwd, bwd = fig["flops"]["forward"][0], fig["flops"]["backward"][0]
    assert 0 < fwd < bwd < 3 * fwd
    for c in costs:  # the paper's batch rule and steps x batch images per trial
        assert c["batch"] == 16 and c["train_images_per_trial"] == 100 * c["batch"]
    trial = sum(c["trial_s"] for c in costs)
    predict = sum(c["task_gpu_s"] - 16 * c["trial_s"] for c in costs)
    overhead = 5 * 3
    walls = {n: r["wall_h"] * 3600 for n, r in rows.items()}
    for n in (1, 2, 8, 16, 64):
        waves = math.ceil(16 / n)
        assert rows[n]["waves"] == waves
        assert walls[n] == pytest.approx(waves * trial + predict + overhead, rel=1e-9)
        assert rows[n]["gpu_hours_held"] == pytest.approx(n * rows[n]["wall_h"], rel=1e-9)
        assert rows[n]["cost_held"] == pytest.approx(2 * rows[n]["gpu_hours_held"], rel=1e-9)
        assert rows[n]["gpu_hours_busy"] == pytest.approx(rows[1]["gpu_hours_busy"], rel=1e-9)
    # 16 trials divide evenly over 8 GPUs: the GPU time of N = 1 divided by 8
    assert walls[8] - predict - overhead == pytest.approx((walls[1] - predict - overhead) / 8, rel=1e-9)
    # the causal floor: one trial per task after another; 64 GPUs are no faster than 16
    floor = trial + predict + overhead
    assert walls[16] == pytest.approx(floor) and walls[64] == pytest.approx(floor)
    assert all(walls[n] >= floor * (1 - 1e-12) for n in walls)
    assert "48 of 64 GPUs idle" in rows[64]["bound"] and "2 waves of 8" in rows[8]["bound"]


def test_paper_scale_takes_the_gpu_rate_of_bench_gpu_given_sizes_and_a_step_floor(tmp_path):
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({"images_per_s": 1234.5}))
    sizes = tmp_path / "sizes.json"
    sizes.write_text(json.dumps({"magellan_venus_volcanoes": 1_000_000}))
    text, fig = _run(tmp_path, "--gpu-json", str(gpu), "--sizes", str(sizes), "--min-step-ms", "1000")
    assert fig["gpu_images_per_s"] == 1234.5 and fig["gpu_source"].startswith("measured")
    first = fig["task_costs"][0]
    assert first["size_source"] == "given" and first["batch"] == 512  # 0.56 M train images
    assert "2 of 3 estimated" in text
    # a step's floor: 100 steps of at least 1 s each, whatever the FLOP rate says
    assert all(c["trial_s"] >= 100 for c in fig["task_costs"]) and fig["min_step_ms"] == 1000


def test_paper_scale_charges_a_workers_start_once_per_launch(tmp_path):
    # 3 tasks, a worker runs 2 in a row: 2 launches (delay + start each) and 1 continued task
    text, fig = _run(
        tmp_path,
        "--gpu-images-per-s",
        "50",
        "--launch-delay-s",
        "2",
        "--orchestration-s",
        "3",
        "--continued-s",
        "0.5",
        "--worker-max-tasks",
        "2",
    )
    assert fig["per_task_overhead_s"] == pytest.approx((2 * (2 + 3) + 0.5) / 3)
    assert "2 worker launches" in text and "the other 1 tasks continued" in text


def _gpu_run(path: Path, *, batch: int, step_ms: float, device: str = "NVIDIA H200", procs: int = 1) -> Path:
    path.write_text(
        json.dumps(
            {"device": device, "batch": batch, "loop_s_per_step": step_ms / 1000, "images_per_s": 1e12, "procs": procs}
        )
    )  # evaluation ~free: trial time is training's
    return path


def test_paper_scale_takes_each_steps_measured_time_at_its_batch_size(tmp_path):
    small, large = (
        _gpu_run(tmp_path / "b16.json", batch=16, step_ms=10),
        _gpu_run(tmp_path / "b512.json", batch=512, step_ms=40),
    )
    sizes = tmp_path / "sizes.json"
    sizes.write_text(json.dumps({"magellan_venus_volcanoes": 1_000_000}))  # the first task at b = 512
    text, fig = _run(tmp_path, "--gpu-json", str(small), str(large), "--sizes", str(sizes))
    assert fig["step_s_by_batch"] == {"16": 0.01, "512": 0.04}
    assert "b=16: 10.00 ms, b=512: 40.00 ms" in text
    trials = {c["batch"]: c["trial_s"] for c in fig["task_costs"]}
    assert trials[512] == pytest.approx(100 * 0.040, rel=1e-6) and trials[16] == pytest.approx(100 * 0.010, rel=1e-6)


def test_trials_measured_sharing_a_gpu_run_that_many_to_a_gpu(tmp_path):
    """bench_gpu.py --procs 4: each GPU holds 4 trials, each at the step time measured with 4 sharing;
    a task's GPU time is a quarter of its trials' time, and 4 GPUs hold all 16 of its trials."""
    runs = [_gpu_run(tmp_path / f"b{b}.json", batch=b, step_ms=ms, procs=4) for b, ms in ((16, 20), (512, 160))]
    text, fig = _run(
        tmp_path, "--gpu-json", *map(str, runs), "--launch-delay-s", "0", "--orchestration-s", "0", "--continued-s", "0"
    )
    assert fig["trials_per_gpu"] == 4 and "4 per GPU, as measured" in text
    assert "with 4 processes sharing the GPU" in text and "a 1/4 share of a GPU" in text
    costs, rows = fig["task_costs"], {r["gpus"]: r for r in fig["rows"]}
    for c in costs:  # every task at b = 16 here: 100 steps of 20 ms; evaluation ~free
        assert c["batch"] == 16 and c["trials_per_gpu"] == 4
        assert c["trial_s"] == pytest.approx(2.0, rel=1e-6)
        assert c["task_gpu_s"] == pytest.approx(16 * 2.0 / 4, rel=1e-6)
    for n, waves in ((1, 4), (2, 2), (8, 1), (16, 1), (64, 1)):
        assert rows[n]["waves"] == waves
        assert rows[n]["wall_h"] * 3600 == pytest.approx(3 * waves * 2.0, rel=1e-5)
    assert "60 of 64 GPUs idle" in rows[64]["bound"] and "4 trials per GPU" in rows[64]["bound"]
    assert "2 waves of 8" in rows[2]["bound"]


def test_a_measured_steps_time_between_batch_sizes_is_linear_and_never_below_the_smallest():
    sys.path.insert(0, str(ROOT / "bench"))
    import paper_scale

    at = paper_scale.measured_step_s({16: 0.010, 64: 0.012, 512: 0.040})
    assert at(8) == at(16) == 0.010  # no faster than the smallest measured step
    assert at(32) == pytest.approx(0.010 + 0.002 * 16 / 48) and at(64) == 0.012
    assert at(256) == pytest.approx(0.012 + 0.028 * 192 / 448)
    assert at(1024) == pytest.approx(0.080)  # the largest's time per image beyond it


def test_paper_scale_refuses_runs_of_different_devices_sharings_or_one_batch_twice(tmp_path):
    a = _gpu_run(tmp_path / "a.json", batch=16, step_ms=10)
    cases = {
        "different devices": _gpu_run(tmp_path / "b.json", batch=64, step_ms=12, device="NVIDIA A100"),
        "measured batch 16": _gpu_run(tmp_path / "c.json", batch=16, step_ms=11),
        "different numbers of processes per GPU": _gpu_run(tmp_path / "d.json", batch=64, step_ms=12, procs=4),
    }
    for message, other in cases.items():
        done = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "paper_scale.py"), "--tasks", "1", "--gpu-json", str(a), str(other)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 2 and message in done.stderr
