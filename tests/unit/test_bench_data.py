"""bench/bench_data.py runs at a tiny size, as documented, and reports sane figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_data_prepares_and_streams_a_tiny_mixed_size_dataset(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_data.py"),
            "--images",
            "240",
            "--read-images",
            "1024",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert 10_000 < figures["gpu_images_per_s_estimate"] < 20_000
    (run,) = figures["runs"]
    assert run["images"] == 240 and sum(run["prepare"]["counts"].values()) == 240
    assert run["prepare"]["removed"] == 0  # generated images never repeat
    assert 0 < run["prepare"]["peak_rss_mb"] < 2048 and run["prepare_images_per_s_per_core"] > 0
    assert run["stream"]["images"] >= 1024 and run["stream"]["images_per_cpu_s"] > 0
    assert run["stream"]["peak_shards"] <= 4
    assert "cores for GPU" in done.stdout
