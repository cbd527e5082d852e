"""Leaderboard and submission-page reads under load, on a database the size of a busy service.

Seeds a fresh PostgreSQL database with synthetic finished submissions (default 1,000 × 106
tasks: 106,000 task results, through :mod:`tests.support.synthetic_results`), starts the real
server (``nevis serve --no-scheduler [--workers N]``) on it, and lets 50 concurrent clients
read, one kind of read at a time: the leaderboard API (pages and sorts mixed, as a busy
leaderboard serves them: from its cache), the Pareto front, and the pages of 20 submissions
(each read once before: a first render is timed apart). Prints latency percentiles, throughput and errors per kind of
read, the cost of a first (uncached) leaderboard read, the load generator that ran and the
machine's load average. Target (issue 11): p99 ≤ 50 ms for the leaderboard API, 0 errors.

``--first-reads`` stops after the first reads (issue 48: the server's start, the first
leaderboard reads and the first submission page), skipping the timed load: the short check.

``--churn`` reads the leaderboard while tasks commit (issue 24): a writer process
(``leaderboard_churn.py`` beside this file) commits meta-test tasks of the same stream version
through the runner's own commit (``--commit-rate`` a minute, default 120) while the 50 clients
read; every commit changes the cache's fingerprint, so the readers keep meeting queries whose
answer must be rendered again. It prints the read latencies and errors, the commits made and
the rate achieved, and first reads timed just after a commit (the summary rows' cold read).
Target: p99 ≤ 50 ms, 0 errors, at ≥ 100 commits a minute.

The load comes from ``wrk`` (Debian's ``wrk`` package: C, one thread, 50 connections, reads
mixed by ``bench_leaderboard.lua`` beside this file) when it is installed: it costs the CPUs the
server shares with it little. Without it (or with ``--load httpx``) 50 Python httpx clients in
one asyncio loop read instead, which on 2 CPUs take much of the CPU from the server. Either
way every response that is not a 2xx and every socket error (and, with wrk, every read slower
than ``--timeout``) counts as an error.

    .venv/bin/python bench/bench_leaderboard.py [--submissions 1000] [--tasks 106]
        [--clients 50] [--seconds 20] [--workers 1] [--load auto|wrk|httpx]
        [--churn [--commit-rate 120]] [--first-reads]
        [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from services.store.db import make_engine, session_factory, transaction, upgrade

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: its tests' seeding
from tests.support.synthetic_results import seed_results

NEVIS = Path(sys.executable).parent / "nevis"
LUA = Path(__file__).with_suffix(".lua")
CHURN = Path(__file__).with_name("leaderboard_churn.py")
SORTS = ("rank", "E", "cflop", "date", "learner", "tasks")
WARM_UP_S = 1.0
"""Each phase's first second (50 connections opening at once) is read but not timed."""
FIRST_READS_NOTE = (
    "offsets 0, 50 and 100 of the default sort: nevis serve renders offset 0 at its start "
    "(services/coordinator/warm_up.py), the others render on their read; the submission "
    "page is the first seeded submission's (the start warms the top-ranked one's)"
)
"""What the first reads are since the server warms at start (issue 48)."""
POPULAR = 20
"""Submission pages the readers look at (the top of a leaderboard, say): each is rendered
once per database change and then served from the cache; a first render is timed apart."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def _client(
    base: str,
    kind: str,
    ids: tuple[int, ...],
    until: float,
    warm: float,
    rng: random.Random,
    out: dict[str, list[float]],
    errors: dict[str, int],
) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.perf_counter() < until:
            if kind == "leaderboard":
                path = (
                    f"/v1/leaderboard?sort={rng.choice(SORTS)}&descending={rng.choice(['true', 'false'])}"
                    f"&limit=50&offset={50 * rng.randrange(5)}"
                )
            elif kind == "front":
                path = "/v1/leaderboard/front"
            else:
                path = f"/submissions/{rng.choice(ids[:POPULAR])}"
            start = time.perf_counter()
            try:
                response = await client.get(path)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if start >= warm:  # connections open and the pool fills in the first second
                out[kind].append(time.perf_counter() - start)
            if not ok:
                errors[kind] += 1


async def _load(base: str, kind: str, ids: tuple[int, ...], clients: int, seconds: float, seed: int):
    """``clients`` concurrent readers of one kind, each reading back to back for ``seconds``."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {kind: []}
    errors = {kind: 0}
    warm = time.perf_counter() + WARM_UP_S
    until = warm + seconds
    await asyncio.gather(
        *(_client(base, kind, ids, until, warm, random.Random(rng.random()), out, errors) for _ in range(clients))
    )
    return out[kind], errors[kind]


def _wrk(
    base: str,
    kind: str,
    ids: tuple[int, ...],
    clients: int,
    seconds: float,
    seed: int,
    timeout: float,
    preexec: object = None,
) -> dict[str, float]:
    """One wrk run of ``kind`` (see bench_leaderboard.lua): its NEVIS_WRK figures."""
    command = [
        "wrk",
        "-t",
        "1",
        "-c",
        str(clients),
        "-d",
        f"{max(1, round(seconds))}s",
        "--timeout",
        f"{max(1, round(timeout))}s",
        "-s",
        str(LUA),
        base,
        "--",
        kind,
        str(seed),
        ",".join(str(i) for i in ids[:POPULAR]),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + timeout + 60, preexec_fn=preexec)  # type: ignore[arg-type]
    line = next((x for x in done.stdout.splitlines() if x.startswith("NEVIS_WRK ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"wrk failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return json.loads(line.removeprefix("NEVIS_WRK "))


def _wrk_load(
    base: str,
    kind: str,
    ids: tuple[int, ...],
    clients: int,
    seconds: float,
    seed: int,
    timeout: float,
    preexec: object = None,
) -> dict[str, float]:
    """``clients`` connections reading ``kind`` back to back: WARM_UP_S untimed, then ``seconds``."""
    _wrk(base, kind, ids, clients, WARM_UP_S, seed + 1, timeout, preexec)  # connections open, caches fill
    figures = _wrk(base, kind, ids, clients, seconds, seed, timeout, preexec)
    errors = sum(int(figures[k]) for k in ("non_2xx", "connect", "read", "write", "timeout"))
    return {
        "requests": figures["requests"],
        "rate": figures["requests"] / (figures["duration_us"] / 1e6),
        "p50": figures["p50_us"] / 1000,
        "p95": figures["p95_us"] / 1000,
        "p99": figures["p99_us"] / 1000,
        "max": figures["max_us"] / 1000,
        "errors": errors,
    }


def _httpx_load(
    base: str, kind: str, ids: tuple[int, ...], clients: int, seconds: float, seed: int
) -> dict[str, float]:
    values, errors = asyncio.run(_load(base, kind, ids, clients, seconds, seed))
    ms = [v * 1000 for v in values] or [float("nan")]
    return {
        "requests": len(values),
        "rate": len(values) / seconds,
        "p50": statistics.median(ms),
        "p95": _percentile(ms, 95),
        "p99": _percentile(ms, 99),
        "max": max(ms),
        "errors": errors,
    }


def _reads_after_commits(url: str, stream: object, base: str, times: int = 3) -> list[float]:
    """The first leaderboard read after each of ``times`` commits, of a query never read before
    (a ``since`` of its own: no earlier answer to send while it renders), so it is rendered
    from the database: the cold read."""
    from leaderboard_churn import Writer  # beside this file

    from services.coordinator.api.answers import FINGERPRINT_TTL_S

    engine = make_engine(url)
    writer = Writer(session_factory(engine), stream.stream, stream.version)  # type: ignore[attr-defined]
    found = []
    for index in range(times):
        writer.commit_next()
        time.sleep(FINGERPRINT_TTL_S + 0.2)
        begin = time.perf_counter()
        httpx.get(f"{base}/v1/leaderboard?limit=50&since=2000-01-01T00:00:{index:02d}Z", timeout=60).raise_for_status()
        found.append(time.perf_counter() - begin)
    engine.dispose()
    return found


def _stop_writer(writer: subprocess.Popen) -> dict[str, float]:
    """Close the churn writer's input (it stops) and read its figures."""
    out, err = writer.communicate(timeout=120)
    line = next((x for x in out.splitlines() if x.startswith("NEVIS_CHURN ")), None)
    if writer.returncode != 0 or line is None:
        raise SystemExit(f"the churn writer failed ({writer.returncode}): {out[-2000:]} {err or ''}")
    return json.loads(line.removeprefix("NEVIS_CHURN "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=106)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="Server processes (nevis serve --workers).")
    parser.add_argument(
        "--load",
        choices=("auto", "wrk", "httpx"),
        default="auto",
        help="The load generator: wrk if installed (auto), or Python httpx clients.",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="Seconds after which wrk counts a read as an error (httpx: the same).",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="Pin the server to CPU 0 and the clients to the others (on 2 CPUs with httpx "
        "clients this starved both: 1,144 req/s, p99 171 ms, against 1,818 and 90 unpinned).",
    )
    parser.add_argument(
        "--churn",
        action="store_true",
        help="Read the leaderboard while a writer commits tasks (--commit-rate a minute).",
    )
    parser.add_argument("--commit-rate", type=float, default=120.0, help="Tasks committed a minute with --churn.")
    parser.add_argument(
        "--first-reads",
        action="store_true",
        help="Only seed, start the server and time the first reads (no timed load).",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("NEVIS_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
    )
    args = parser.parse_args()
    load = ("wrk" if shutil.which("wrk") else "httpx") if args.load == "auto" else args.load
    if load == "wrk" and not shutil.which("wrk"):
        raise SystemExit("--load wrk: wrk is not installed (Debian: apt-get install wrk)")

    name = f"nevis_bench_lb_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.postgres, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    url = make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
    server = writer = None
    try:
        upgrade(url)
        start = time.perf_counter()
        engine = make_engine(url)
        with transaction(session_factory(engine)) as session:
            stream = seed_results(session, submissions=args.submissions, tasks=args.tasks, seed=args.seed)
        with engine.connect() as connection:
            connection.execute(text("ANALYZE"))
        engine.dispose()
        seeded = time.perf_counter() - start
        port = _free_port()
        data = Path(tempfile.mkdtemp(prefix="nevis-bench-lb-"))
        env = {**os.environ, "NEVIS_DATABASE_URL": url, "NEVIS_DATA_DIR": str(data), "NEVIS_PROBE_PRESET": "off"}
        command = [
            str(NEVIS),
            "serve",
            "--no-scheduler",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--workers",
            str(args.workers),
        ]
        pinned = args.pin and (os.cpu_count() or 1) >= 2
        launched = time.perf_counter()
        server = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, {0})) if pinned else None,
        )
        others = set(range(1, os.cpu_count() or 2))
        if pinned:  # the clients on the other CPUs: they do not steal the server's
            os.sched_setaffinity(0, others)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"the server did not start: {server.stderr.read()[-2000:] if server.stderr else ''}")
            time.sleep(0.05)
        ready = time.perf_counter() - launched
        cold = []
        for offset in (0, 50, 100):  # first reads of a query: the SQL aggregate, uncached
            begin = time.perf_counter()
            httpx.get(f"{base}/v1/leaderboard?limit=50&offset={offset}", timeout=60).raise_for_status()
            cold.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        httpx.get(f"{base}/submissions/{stream.submission_ids[0]}", timeout=60).raise_for_status()
        page_cold = time.perf_counter() - begin
        if args.first_reads:
            load_now = os.getloadavg()
            print(
                f"database: {args.submissions} submissions × {args.tasks} tasks on PostgreSQL "
                f"(seeded in {seeded:.1f} s)"
            )
            print(
                f"server answered /healthz {ready:.2f} s after its launch (nevis serve --no-scheduler "
                f"--workers {args.workers}); load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_now)}"
            )
            print(
                f"first leaderboard reads (uncached SQL aggregate): "
                f"{', '.join(f'{c * 1000:.0f}' for c in cold)} ms; first submission page: {page_cold * 1000:.0f} ms"
            )
            print(f"(target ≤ 100 ms for the first, issue 48; {FIRST_READS_NOTE})")
            return 0
        # The queries a busy leaderboard serves, and its popular pages, are in its cache: in every
        # worker's, as far as new connections (handed to any worker) reach them all.
        for _ in range(1 if args.workers == 1 else 6 * args.workers):
            for sort in SORTS:
                for descending in ("true", "false"):
                    for offset in range(0, 250, 50):
                        httpx.get(
                            f"{base}/v1/leaderboard?sort={sort}&descending={descending}&limit=50&offset={offset}",
                            timeout=60,
                        ).raise_for_status()
            httpx.get(f"{base}/v1/leaderboard/front", timeout=60).raise_for_status()
            for submission_id in stream.submission_ids[:POPULAR]:
                httpx.get(f"{base}/submissions/{submission_id}", timeout=60).raise_for_status()
        if load == "wrk":  # one reader: the cost of a cached read
            one = _wrk(base, "one", stream.submission_ids, 1, 3, args.seed, args.timeout)
            sequential = one["duration_us"] / 1e6 / max(1, one["requests"])
        else:
            with httpx.Client(base_url=base, timeout=30) as client:
                begin = time.perf_counter()
                for _ in range(300):
                    client.get("/v1/leaderboard?limit=50").raise_for_status()
                sequential = (time.perf_counter() - begin) / 300
        out, churn, after_commit = {}, None, []
        if args.churn:
            after_commit = _reads_after_commits(url, stream, base)
            writer = subprocess.Popen(
                [sys.executable, str(CHURN), url, stream.stream, stream.version, str(args.commit_rate)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            if writer.stdout is None or writer.stdout.readline().strip() != "NEVIS_CHURN_READY":
                raise SystemExit("the churn writer did not start")
        load_before = os.getloadavg()
        for kind in ("leaderboard",) if args.churn else ("leaderboard", "front", "submission"):
            if load == "wrk":
                out[kind] = _wrk_load(
                    base,
                    kind,
                    stream.submission_ids,
                    args.clients,
                    args.seconds,
                    args.seed,
                    args.timeout,
                    (lambda: os.sched_setaffinity(0, others)) if pinned else None,
                )
            else:
                out[kind] = _httpx_load(base, kind, stream.submission_ids, args.clients, args.seconds, args.seed)
        load_after = os.getloadavg()
        if args.churn:
            churn = _stop_writer(writer)
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()  # a failed run: its figures are not read
            writer.wait(timeout=30)
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()

    print(
        f"database: {args.submissions} submissions × {args.tasks} tasks = "
        f"{args.submissions * args.tasks} task results on PostgreSQL (seeded in {seeded:.1f} s)"
    )
    where = (
        "server pinned to CPU 0, clients to the other CPUs"
        if args.pin and (os.cpu_count() or 1) >= 2
        else f"server and clients sharing {os.cpu_count()} CPUs"
    )
    generator = (
        "wrk (C, 1 thread, bench_leaderboard.lua)" if load == "wrk" else "httpx (Python asyncio clients in one process)"
    )
    print(
        f"load generator: {generator}; {args.clients} concurrent connections reading each kind in turn, "
        f"{args.seconds:.0f} s each timed after {WARM_UP_S:.0f} s of warm-up"
    )
    print(
        f"server: nevis serve --no-scheduler --workers {args.workers} (uvicorn), {where}; "
        f"answered /healthz {ready:.2f} s after its launch"
    )
    print(
        f"load average (1, 5, 15 min) before the timed reads {', '.join(f'{x:.2f}' for x in load_before)}, "
        f"after {', '.join(f'{x:.2f}' for x in load_after)}"
    )
    print(
        f"first leaderboard reads (uncached SQL aggregate): "
        f"{', '.join(f'{c * 1000:.0f}' for c in cold)} ms; first submission page: {page_cold * 1000:.0f} ms"
    )
    print(f"(target ≤ 100 ms for the first, issue 48; {FIRST_READS_NOTE})")
    print(f"one reader, back to back: {sequential * 1000:.2f} ms per cached leaderboard read (round trip, {load})")
    if churn is not None:
        print(
            f"churn: {churn['commits']} tasks committed in {churn['seconds']:.1f} s while the clients read: "
            f"{churn['per_minute']:.0f} a minute (target ≥ 100); a commit's transaction p50 "
            f"{1000 * (churn['commit_p50_s'] or 0):.1f} ms, max {1000 * (churn['commit_max_s'] or 0):.1f} ms; "
            f"commit errors {churn['errors']}"
        )
        print(
            f"first leaderboard reads after a commit (summary rows, uncached): "
            f"{', '.join(f'{c * 1000:.1f}' for c in after_commit)} ms (target ≤ 100 ms)"
        )
    print(
        f"{'read':<12} {'requests':>9} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7}"
    )
    for kind, f in out.items():
        print(
            f"{kind:<12} {int(f['requests']):>9} {f['rate']:>8.0f} {f['p50']:>8.1f} {f['p95']:>8.1f} "
            f"{f['p99']:>8.1f} {f['max']:>8.1f} {int(f['errors']):>7}"
        )
    p99 = out["leaderboard"]["p99"]
    errors = sum(int(f["errors"]) for f in out.values()) + (churn["errors"] if churn else 0)
    print(
        f"leaderboard API p99 {p99:.1f} ms (target ≤ 50 ms): {'met' if p99 <= 50 else 'NOT met'}; "
        f"errors {errors} (target 0)"
    )
    return 0 if errors == 0 else 1


__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
