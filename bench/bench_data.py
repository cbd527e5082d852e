"""Benchmark: ``nevis data prepare`` on a generated mixed-size dataset (throughput and peak memory),
and the streaming train reader against what one GPU consumes (issue 21, items 4 and 7).

For each ``--images`` size N (comma-separated; default 1,000,000):

1. writes a Parquet image dataset (docs/data-format.md) of N JPEG images of small random sizes
   (each side uniform in ``--min-side``..``--max-side``, so about a third are larger than the
   96 px stored side and every aspect ratio between 1:6 and 6:1 occurs), 100 classes, not
   timed;
2. prepares it at 64 px with ``prepare_stream`` (what ``nevis data prepare`` runs) in a child
   process, and reports the child's peak resident memory (``ru_maxrss``) and the CPU and wall
   seconds of ``prepare_stream`` itself: images/s per core = N / its CPU seconds;
3. reads the prepared train split back through :class:`~workers.stream.shard_stream.ShardStream`
   (originals included, batches of 512, as a large task is trained, ``--readers`` threads) for
   ``--read-images`` after its first batch (epochs repeat on a small split) and reports images/s of wall time and per CPU second of the process (the
   cores a GPU's appetite takes), with the stream's own peak of shards and bytes held.

The GPU's appetite is an estimate, not a measurement: the paper's ResNet-34 at 64 px costs
27.8 GFLOP per training image (forward + backward, the service's FLOP meter: 9.28 + 18.5), so an
H200 (989 TFLOP/s dense bf16) at 40 % model FLOPs utilisation trains about 14,200 images/s.

Usage: .venv/bin/python bench/bench_data.py [--images 1000000] [--workdir DIR] [--json out.json]
       .venv/bin/python bench/bench_data.py --images 5000,20000   (minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE, CLASSES, BATCH = 64, 100, 512
TRAIN_FLOPS_PER_IMAGE = 27.8e9  # ResNet-34 at 64 px, forward + backward (FLOP meter)
H200_BF16_PEAK, MFU = 989e12, 0.40
GPU_IMAGES_PER_S = H200_BF16_PEAK * MFU / TRAIN_FLOPS_PER_IMAGE


def _image(rng: np.random.Generator, min_side: int, max_side: int) -> bytes:
    """A JPEG of random size: smooth random content (compresses as photos do), never repeated."""
    height, width = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
    small = rng.integers(0, 256, size=(6, 6, 3), dtype=np.uint8)
    pil = Image.fromarray(small).resize((width, height), Image.Resampling.BILINEAR)
    buffer = io.BytesIO()
    pil.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_dataset(path: Path, n: int, min_side: int, max_side: int, seed: int = 0) -> float:
    """The generated dataset at ``path``; returns its size in MB."""
    from workers.ingest.writers.parquet_writer import ImageRow, write_parquet_dataset

    rng = np.random.default_rng(seed)
    rows = (ImageRow(image=_image(rng, min_side, max_side), label=int(rng.integers(CLASSES))) for _ in range(n))
    write_parquet_dataset(
        rows, path, class_names=[f"c{i}" for i in range(CLASSES)], source={"title": f"bench_data, {n} generated images"}
    )
    return path.stat().st_size / 1e6


def _manifest(name: str):
    from workers.stream.manifest_files import load_stream

    mini = load_stream("mini")
    task = replace(mini.tasks[0], order=1, dataset=f"parquet:{name}", num_classes=CLASSES, title="bench")
    return replace(mini, name="bench-data", tasks=(task,))


def child_prepare(data_dir: Path, store_dir: Path, name: str) -> None:
    """Runs in the child: prepare the dataset into a local store, print the report as JSON."""
    from services.store.objects import LocalObjectStore
    from workers.stream.prepare import prepare_stream

    cpu, wall = time.process_time(), time.perf_counter()
    report = prepare_stream(_manifest(name), LocalObjectStore(store_dir), image_size=SIZE, offline_dir=data_dir)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    item = report.datasets[0]
    print(
        json.dumps(
            {
                "counts": dict(item.counts),
                "shards": item.num_shards,
                "bytes": item.num_bytes,
                "removed": item.duplicates_removed,
                "prepare_cpu_s": cpu,
                "prepare_wall_s": wall,
            }
        )
    )


def prepare_in_child(data_dir: Path, store_dir: Path, name: str) -> dict:
    """Prepare in a child process: its report (with the seconds of ``prepare_stream`` alone),
    peak RSS, and the CPU and wall seconds of the whole child (start-up and imports too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(data_dir), str(store_dir), name],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        **json.loads(done.stdout.strip().splitlines()[-1]),
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": after.ru_maxrss / 1024,
    }  # ru_maxrss: KiB on Linux, the largest child


def read_stream(store_dir: Path, name: str, count: int, readers: int) -> dict:
    """Images/s of the streaming train reader (originals included) by wall time and by CPU
    time of all its threads (a core's worth), and what it held."""
    from services.store.objects import LocalObjectStore
    from workers.stream.shard_stream import store_stream
    from workers.stream.task_data import load_task_index

    store = LocalObjectStore(store_dir)
    index = load_task_index(store, _manifest(name).tasks[0], image_size=SIZE)
    stream = store_stream(store, index, "train", readers=readers, prefetch=max(2, readers))(0)
    batches = stream.batches(BATCH)
    next(batches)  # the first pool's shards read: start-up, not throughput
    start, cpu, images = time.perf_counter(), time.process_time(), 0
    while images < count:
        images += len(next(batches))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    batches.close()
    return {
        "images_per_s": images / elapsed,
        "images_per_cpu_s": images / cpu,
        "images": images,
        "readers": readers,
        "peak_shards": stream.peak_shards,
        "peak_mb": stream.peak_bytes / 1e6,
        "train_rows": len(stream),
    }


def run(n: int, workdir: Path, args: argparse.Namespace) -> dict:
    name = f"bench{n}"
    data_dir, store_dir = workdir / "data", workdir / f"store{n}"
    data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    megabytes = write_dataset(data_dir / f"{name}.parquet", n, args.min_side, args.max_side)
    print(f"[{n}] wrote {megabytes:.0f} MB of Parquet in {time.perf_counter() - start:.0f} s", flush=True)
    prepared = prepare_in_child(data_dir, store_dir, name)
    print(f"[{n}] prepared: {prepared}", flush=True)
    reading = read_stream(store_dir, name, args.read_images, args.readers)
    print(f"[{n}] stream: {reading}", flush=True)
    return {
        "images": n,
        "parquet_mb": megabytes,
        "prepare": prepared,
        "stream": reading,
        "prepare_images_per_s_per_core": n / prepared["prepare_cpu_s"],
        "prepare_images_per_s_wall": n / prepared["prepare_wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child_prepare(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", default="1000000", help="sizes, comma-separated")
    parser.add_argument("--min-side", type=int, default=24)
    parser.add_argument("--max-side", type=int, default=144)
    parser.add_argument(
        "--read-images",
        type=int,
        default=4 * 4096,
        help="images the stream reader is timed over, after its first batch",
    )
    parser.add_argument("--readers", type=int, default=2, help="the stream's reader threads")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.images.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench_data_") as tmp:
        workdir = args.workdir or Path(tmp)
        results = [run(n, workdir, args) for n in sizes]
    print(f"\nGPU estimate (H200, ResNet-34 at 64 px, {MFU:.0%} MFU): {GPU_IMAGES_PER_S:,.0f} images/s")
    print(
        f"{'images':>9} {'prep img/s/core':>16} {'prep img/s wall':>16} {'peak RSS MB':>12} "
        f"{'stream img/s':>13} {'img/CPU-s':>10} {'cores for GPU':>14}"
    )
    for r in results:
        print(
            f"{r['images']:>9,} {r['prepare_images_per_s_per_core']:>16,.0f} "
            f"{r['prepare_images_per_s_wall']:>16,.0f} {r['prepare']['peak_rss_mb']:>12,.0f} "
            f"{r['stream']['images_per_s']:>13,.0f} {r['stream']['images_per_cpu_s']:>10,.0f} "
            f"{GPU_IMAGES_PER_S / r['stream']['images_per_cpu_s']:>14.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"gpu_images_per_s_estimate": GPU_IMAGES_PER_S, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
