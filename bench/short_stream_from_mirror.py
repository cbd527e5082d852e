"""The whole SHORT stream, end to end, from a loopback mirror of the fixture archives.

Writes every SHORT source's fixture files (``tests/support/source_fixtures``, each in its
source's exact layout) into a folder laid out as a mirror, with a source catalogue that holds
them to their own checksums (``NEVIS_SOURCE_CATALOGUE``); serves the folder with a static
loopback HTTP server (``NEVIS_DATA_MIRROR``); then, in a fresh data folder, runs the real
CLI as subprocesses:

    nevis data fetch   --stream nevis22-short
    nevis data convert --stream nevis22-short
    nevis data prepare --stream nevis22-short
    nevis run --learner indep_small --trials 1 --steps 5 --stream nevis22-short
    nevis results <run> --json

and prints a summary: sources fetched, datasets prepared, tasks committed, E, cFLOP and the
wall time of each phase. Exits non-zero if a phase fails or a task is not committed.

    .venv/bin/python bench/short_stream_from_mirror.py [--keep] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the repository: its tests' fixture writers
from tests.support.fixture_mirror import serve_folder, write_fixture_mirror  # noqa: E402

STREAM = "nevis22-short"


def nevis_command() -> list[str]:
    """The ``nevis`` entry point beside this interpreter, else ``python -m services.cli``."""
    script = Path(sys.executable).parent / "nevis"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "services.cli"]


def clean_env(work: Path, mirror_url: str, catalogue: Path) -> dict[str, str]:
    """This process's environment without any ``NEVIS_*`` setting but a fresh data folder's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEVIS_")}
    env.update(
        NEVIS_DATA_DIR=str(work / "data"),
        NEVIS_OFFLINE_DATA_DIR=str(work / "offline"),
        NEVIS_DATA_MIRROR=mirror_url,
        NEVIS_SOURCE_CATALOGUE=str(catalogue),
        COLUMNS="200",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
    )
    for name in ("KAGGLE_USERNAME", "KAGGLE_KEY"):
        env.pop(name, None)  # every Kaggle source must come from the mirror
    env["KAGGLE_CONFIG_DIR"] = str(work / "no-kaggle")
    return env


def phase(name: str, args: list[str], env: dict[str, str], log: Path, timings: dict[str, float]) -> str:
    """Run one CLI command; its output goes to ``log`` and is returned. Exits on failure."""
    started = time.perf_counter()
    done = subprocess.run([*nevis_command(), *args], env=env, cwd=REPO, capture_output=True, text=True, check=False)
    timings[name] = time.perf_counter() - started
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    print(f"{name:<8} {timings[name]:7.1f} s  (exit {done.returncode}; output: {log})", flush=True)
    if done.returncode != 0:
        sys.stderr.write((done.stdout + done.stderr)[-4000:])
        raise SystemExit(f"`nevis {' '.join(args)}` failed (exit {done.returncode}); see {log}")
    return done.stdout


def summarise(
    stdout: dict[str, str], summary: dict[str, Any], timings: dict[str, float], mirror_files: int, mirror_bytes: int
) -> dict[str, Any]:
    """The figures worth recording, from the commands' outputs and the stored run."""
    fetched = re.search(r"(\d+) fetched", stdout["fetch"])
    tasks = summary["tasks"]
    return {
        "stream": STREAM,
        "mirror_files": mirror_files,
        "mirror_mb": round(mirror_bytes / 1e6, 2),
        "sources_fetched": int(fetched.group(1)) if fetched else 0,
        "datasets_prepared": len(re.findall(r"│ nevis:\S+\s+│ (?:prepared|present)", stdout["prepare"])),
        "tasks_committed": sum(t["status"] == "committed" for t in tasks),
        "tasks": len(tasks),
        "status": summary["status"],
        "E": summary["mean_error"],
        "headline_tasks": summary["headline_tasks"],
        "cflop": summary["cflop"],
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="Keep the work folder (mirror, data, logs).")
    parser.add_argument("--json-out", type=Path, help="Also write the summary as JSON to this file.")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nevis-short-mirror-"))
    timings: dict[str, float] = {}
    print(f"work folder {work}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    started = time.perf_counter()
    mirror = write_fixture_mirror(work / "mirror")
    timings["fixtures"] = time.perf_counter() - started
    files = mirror.files
    print(
        f"fixtures {timings['fixtures']:7.1f} s  ({len(mirror.keys)} sources, {len(files)} files, "
        f"{mirror.size / 1e6:.1f} MB)",
        flush=True,
    )
    stdout: dict[str, str] = {}
    try:
        with serve_folder(mirror.folder) as url:
            env = clean_env(work, url, mirror.catalogue)
            stdout["fetch"] = phase("fetch", ["data", "fetch", "--stream", STREAM], env, work / "fetch.log", timings)
        # From here on the mirror is gone: nothing after the fetch may need the network.
        # fixtures, not the real sources: their classes and rows differ from the pinned counts
        stdout["convert"] = phase(
            "convert",
            ["data", "convert", "--stream", STREAM, "--accept-count-change"],
            env,
            work / "convert.log",
            timings,
        )
        stdout["prepare"] = phase(
            "prepare",
            ["data", "prepare", "--stream", STREAM, "--accept-count-change"],
            env,
            work / "prepare.log",
            timings,
        )
        stdout["run"] = phase(
            "run",
            [
                "run",
                "--learner",
                "indep_small",
                "--trials",
                str(args.trials),
                "--steps",
                str(args.steps),
                "--stream",
                STREAM,
            ],
            env,
            work / "run.log",
            timings,
        )
        run_id = re.search(r"Run (\d+):", stdout["run"])
        if run_id is None:
            raise SystemExit(f"`nevis run` printed no run id; see {work / 'run.log'}")
        summary = json.loads(
            phase("results", ["results", run_id.group(1), "--json"], env, work / "results.log", timings)
        )
    finally:
        if not args.keep:
            shutil.rmtree(work / "mirror", ignore_errors=True)
            shutil.rmtree(work / "data" / "sources", ignore_errors=True)
    figures = summarise(stdout, summary, timings, len(files), mirror.size)
    print(json.dumps(figures, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    ok = figures["tasks_committed"] == figures["tasks"] == 29 and figures["status"] == "succeeded"
    print(
        f"{figures['tasks_committed']}/{figures['tasks']} tasks committed; E = {figures['E']}; "
        f"cFLOP = {figures['cflop']:.4e}; {'OK' if ok else 'NOT COMPLETE'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
