"""The scale simulation's report, from database timestamps after the run: transitions,
scheduling delay, double launches, over-subscription (bench/scale_sim.py runs it).

What it prints (from database timestamps, after the run): task transitions (lease claimed,
launched, started, ended; task run started, committed) in total and per minute, scheduling
delay p50 / p99 (from the task becoming eligible: the submission created, or the previous
task committed, to its first lease launched) and, apart, of the first task of each user's
first submission (issue 24's target: p99 within 1 s), of the first task of their later
submissions (which the fairness rule queues behind their own earlier ones) and of the tasks
after the first, double launches (two leases of one
submission active at once, a lease launched twice, two workers committing one task, or a
task committed twice: must be 0), slot over-subscription (more leases in flight than
``NEVIS_SCHEDULER_SLOTS`` on a replica, or than ``NEVIS_CLUSTER_SLOTS`` in all: must be 0)
and errors. The exit code is 1 on any double launch, over-subscription or error, 3 if the
run did not finish within ``--max-minutes``, else 0.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from services.store.db.models import Event, StreamTask, Submission, TaskResult, TaskRun
from services.store.db.models_coordinator import ACTIVE_LEASE_STATUSES, ScheduledSubmission, TaskLease

if TYPE_CHECKING:
    from scale_sim import RunState, SimConfig

FIRST_LAUNCH_TARGET_S = 1.0
"""Issue 24's target: a user's first submission launched within 1 s of becoming eligible (p99)."""


# --- analysis (from database timestamps) -------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _sweep(intervals: list[tuple[datetime, datetime | None]], cap: int) -> tuple[int, int]:
    """Peak of overlapping [start, end) intervals, and how many starts pushed it past ``cap``."""
    points = []
    for start, end in intervals:
        points.append((start, 1))
        if end is not None:
            points.append((end, -1))
    points.sort(key=lambda p: (p[0], p[1]))  # an end before a start at the same instant
    level = peak = over = 0
    for _, step in points:
        level += step
        peak = max(peak, level)
        if step > 0 and level > cap:
            over += 1
    return peak, over


def analyse(
    sessions: sessionmaker[Session], *, config: SimConfig, state: RunState, submission_ids: list[int]
) -> dict[str, Any]:
    """The run's figures, read back from the database and the replicas' launch logs."""
    with sessions() as session:
        subs = {
            row.id: row
            for row in session.execute(
                select(Submission.id, Submission.created_at, Submission.status, Submission.error)
            )
        }
        owner_of = dict(session.execute(select(ScheduledSubmission.submission_id, ScheduledSubmission.user_id)).all())
        lease_rows = session.execute(
            select(
                TaskLease.id,
                TaskLease.submission_id,
                TaskLease.task_order,
                TaskLease.attempt,
                TaskLease.status,
                TaskLease.owner,
                TaskLease.created_at,
                TaskLease.started_at,
                TaskLease.finished_at,
                TaskLease.error,
            ).order_by(TaskLease.id)
        ).all()
        launched_at = {
            int(payload["lease_id"]): at
            for payload, at in session.execute(
                select(Event.payload, Event.created_at).where(Event.kind == "lease.launched")
            )
        }
        results = session.execute(
            select(TaskResult.submission_id, StreamTask.order, TaskResult.committed_at).join(
                StreamTask, StreamTask.id == TaskResult.stream_task_id
            )
        ).all()
        succeeded_runs = session.execute(
            select(TaskRun.submission_id, TaskRun.stream_task_id, func.count())
            .where(TaskRun.status == "succeeded")
            .group_by(TaskRun.submission_id, TaskRun.stream_task_id)
            .having(func.count() > 1)
        ).all()
        kinds = Counter(
            dict(
                session.execute(
                    select(Event.kind, func.count())
                    .where(Event.kind.like("lease.%") | Event.kind.like("task.%"))
                    .group_by(Event.kind)
                ).all()
            )
        )
        span = session.execute(
            select(func.min(Event.created_at), func.max(Event.created_at)).where(
                Event.kind.like("lease.%") | Event.kind.like("task.%")
            )
        ).one()
        per_minute: list[tuple[int, int]] = []
        if span[0] is not None:
            bucket = func.floor(func.extract("epoch", Event.created_at - span[0]) / 60)
            per_minute = [
                (int(m), int(n))
                for m, n in session.execute(
                    select(bucket, func.count())
                    .where(Event.kind.like("lease.%") | Event.kind.like("task.%"))
                    .group_by(bucket)
                    .order_by(bucket)
                )
            ]

    # the replicas' own logs: launch() calls and what each worker did
    launch_calls: Counter[int] = Counter()
    worker_outcomes: dict[int, str] = {}
    for figures in state.replica_figures:
        for lease_id, _sub, _order in figures["launch_log"]:
            launch_calls[lease_id] += 1
        worker_outcomes.update({int(k): v for k, v in figures["outcomes"].items()})
    by_task: dict[tuple[int, int], list[Any]] = defaultdict(list)
    by_sub: dict[int, list[Any]] = defaultdict(list)
    for row in lease_rows:
        by_task[(row.submission_id, row.task_order)].append(row)
        by_sub[row.submission_id].append(row)

    # double launches, four ways; a task is counted once however many ways it shows
    flagged: dict[str, set[tuple[int, int]]] = {
        "overlapping_leases": set(),
        "lease_launched_twice": set(),
        "two_workers_committed": set(),
        "task_committed_twice": set(),
    }
    for rows in by_sub.values():
        rows = sorted(rows, key=lambda r: (r.created_at, r.id))
        for before, after in itertools.pairwise(rows):
            if before.finished_at is None or after.created_at < before.finished_at:
                flagged["overlapping_leases"].add((after.submission_id, after.task_order))
    lease_task = {row.id: (row.submission_id, row.task_order) for row in lease_rows}
    for lease_id, calls in launch_calls.items():
        if calls > 1:
            flagged["lease_launched_twice"].add(lease_task.get(lease_id, (0, lease_id)))
    for task, rows in by_task.items():
        if sum(worker_outcomes.get(r.id) == "committed" for r in rows) > 1:
            flagged["two_workers_committed"].add(task)
    result_count = Counter((sub, order) for sub, order, _ in results)
    flagged["task_committed_twice"] |= {task for task, n in result_count.items() if n > 1}
    with sessions() as session:
        orders = dict(session.execute(select(StreamTask.id, StreamTask.order)).all())
    flagged["task_committed_twice"] |= {(sub, orders[task]) for sub, task, _ in succeeded_runs}
    double = set().union(*flagged.values())

    # every task committed exactly once?
    expected = {(sub, order) for sub in submission_ids for order in range(1, config.tasks + 1)}
    committed = set(result_count)
    missing = len(expected - committed)

    # scheduling delay: eligible (created / previous task committed) -> first lease launched;
    # apart: task 1 of each user's first submission (nothing of theirs ahead of it), task 1 of
    # their later ones (waiting behind their own earlier submissions: the fairness rule), and
    # the tasks after the first (eligible when the previous one is committed)
    committed_at = {(sub, order): at for sub, order, at in results}
    first_of_user: dict[int, int] = {}
    for sub in sorted(subs):
        first_of_user.setdefault(owner_of.get(sub, -sub), sub)
    firsts = set(first_of_user.values())
    delays, claim_delays = [], []
    first_sub, later_subs, next_tasks = [], [], []
    for (sub, order), rows in by_task.items():
        first = min(rows, key=lambda r: r.id)
        eligible = subs[sub].created_at if order == 1 else committed_at.get((sub, order - 1))
        if eligible is None:
            continue
        claim_delays.append((first.created_at - eligible).total_seconds())
        if first.id in launched_at:
            delay = (launched_at[first.id] - eligible).total_seconds()
            delays.append(delay)
            (next_tasks if order > 1 else first_sub if sub in firsts else later_subs).append(delay)

    # slots: leases in flight per replica and in all, from their [claimed, ended) intervals
    per_replica: dict[str, list[tuple[datetime, datetime | None]]] = defaultdict(list)
    for row in lease_rows:
        per_replica[row.owner.split(":", 1)[0]].append((row.created_at, row.finished_at))
    slots = config.slots_per_replica
    replica_peaks, over = {}, 0
    for replica, intervals in sorted(per_replica.items()):
        peak, excess = _sweep(intervals, slots)
        replica_peaks[replica] = {"leases": len(intervals), "peak_in_flight": peak}
        over += excess
    cluster_peak, cluster_over = _sweep(
        [iv for ivs in per_replica.values() for iv in ivs], config.cluster_slots or 10**9
    )
    over += cluster_over

    # errors
    statuses = Counter(row.status for row in subs.values())
    lease_statuses = Counter(row.status for row in lease_rows)
    outcome_counts = Counter(worker_outcomes.values())
    tick_errors = sum(f["tick_errors"] for f in state.replica_figures)
    worker_errors = sum(f["worker_errors"] for f in state.replica_figures)
    launch_failures = sum(f["launch_failures"] for f in state.replica_figures)
    expired = Counter()
    for f in state.replica_figures:
        expired.update(f["expired"])
    unexpected_expiries = sum(expired.values()) - (outcome_counts["crashed"] if config.crash_rate else 0)
    failed_subs = {sid: row.error for sid, row in subs.items() if row.status != "succeeded"}
    errors = {
        "problems": state.problems,
        "replica_exit_codes": state.replica_exit_codes,
        "scheduler_tick_errors": tick_errors,
        "worker_errors": worker_errors,
        "launch_failures": launch_failures,
        "submissions_not_succeeded": len(failed_subs),
        "tasks_missing": missing,
        "leases_left_in_flight": sum(lease_statuses[s] for s in ACTIVE_LEASE_STATUSES),
        # launched, but its worker found nothing to run (submission ended, task committed)
        "wasted_launches": outcome_counts["refused"],
        "unexpected_expiries": max(0, unexpected_expiries),
        "samples": (
            [f"submission {sid}: {err}" for sid, err in list(failed_subs.items())[:5]]
            + [s for f in state.replica_figures for s in f["worker_error_samples"]][:5]
            + [s for f in state.replica_figures for s in f["log_samples"]][:5]
        ),
    }
    error_total = (
        len(state.problems)
        + tick_errors
        + worker_errors
        + launch_failures
        + len(failed_subs)
        + missing
        + errors["leases_left_in_flight"]
        + errors["wasted_launches"]
        + errors["unexpected_expiries"]
        + sum(1 for c in state.replica_exit_codes if c not in (0, None))
    )
    transitions = sum(kinds.values())
    active_minutes = ((span[1] - span[0]).total_seconds() / 60) if span[0] is not None else 0.0
    return {
        "size": {
            "submissions": len(submission_ids),
            "tasks": config.tasks,
            "task_total": len(expected),
            "replicas": config.replicas,
            "slots_per_replica": slots,
            "cluster_slots": config.cluster_slots,
            "users": min(config.users, len(submission_ids)),
            "poll_s": config.poll_s,
            "worker_threads_per_replica": config.threads,
            "start_ms": config.start_ms,
            "run_ms": config.run_ms,
            "crash_rate": config.crash_rate,
            "seed": config.seed,
        },
        "finished": state.finished,
        "wall_s": round(state.wall_s, 1),
        "create_submissions_s": round(state.create_s, 1),
        "transitions": {
            "total": transitions,
            "per_minute": round(transitions / active_minutes, 1) if active_minutes else None,
            "by_kind": dict(sorted(kinds.items())),
            "per_minute_series": per_minute,
            "tasks_committed": len(results),
            "tasks_committed_per_minute": (round(len(results) / active_minutes, 1) if active_minutes else None),
        },
        "scheduling_delay_s": {
            "to_launch": {
                "n": len(delays),
                "p50": _percentile(delays, 50),
                "p90": _percentile(delays, 90),
                "p99": _percentile(delays, 99),
                "max": max(delays, default=None),
            },
            "to_claim": {
                "n": len(claim_delays),
                "p50": _percentile(claim_delays, 50),
                "p99": _percentile(claim_delays, 99),
            },
            **{
                name: {
                    "n": len(values),
                    "p50": _percentile(values, 50),
                    "p99": _percentile(values, 99),
                    "max": max(values, default=None),
                }
                for name, values in (
                    ("first_submission", first_sub),
                    ("later_submissions", later_subs),
                    ("next_tasks", next_tasks),
                )
            },
        },
        "double_launches": {
            "total": len(double),
            **{k: len(v) for k, v in flagged.items()},
            "examples": sorted(double)[:10],
        },
        "relaunched_tasks": sum(1 for rows in by_task.values() if len(rows) > 1),
        "over_subscription": {
            "total": over,
            "cluster_over": cluster_over,
            "cluster_peak_in_flight": cluster_peak,
            "replicas": replica_peaks,
        },
        "leases": dict(lease_statuses),
        "worker_outcomes": dict(outcome_counts),
        "expired": dict(expired),
        "submissions": dict(statuses),
        "scheduler": {
            f["replica"]: {
                "ticks": f["ticks"],
                "launches": f["launches"],
                "claims_lost": f["log"].get("claims_lost", 0),
            }
            for f in state.replica_figures
        },
        "errors": {"total": error_total, **errors},
        "verdict": {"ok": not double and not over and not error_total},
    }


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def print_report(report: dict[str, Any]) -> None:
    size, tr = report["size"], report["transitions"]
    delay, dl = report["scheduling_delay_s"]["to_launch"], report["double_launches"]
    claim = report["scheduling_delay_s"]["to_claim"]
    over, errors = report["over_subscription"], report["errors"]
    cluster = size["cluster_slots"] if size["cluster_slots"] is not None else "unset"
    print(
        f"size: {size['submissions']} submissions x {size['tasks']} tasks = "
        f"{size['task_total']} tasks, {size['replicas']} replicas on one PostgreSQL, "
        f"{size['users']} users"
    )
    print(
        f"      slots {size['slots_per_replica']}/replica, cluster slots {cluster}, poll "
        f"{size['poll_s']:g} s, {size['worker_threads_per_replica']} worker threads/replica, "
        f"start {size['start_ms'][0]:g}-{size['start_ms'][1]:g} ms, task "
        f"{size['run_ms'][0]:g}-{size['run_ms'][1]:g} ms, crash rate {size['crash_rate']:g}, "
        f"seed {size['seed']}"
    )
    print(
        f"finished: {'yes' if report['finished'] else 'NO'} in {report['wall_s']:.0f} s "
        f"(submissions created in {report['create_submissions_s']:.0f} s)"
    )
    print(
        f"task transitions: {tr['total']} total, {tr['per_minute']} per minute "
        f"({tr['tasks_committed']} tasks committed, {tr['tasks_committed_per_minute']} per minute)"
    )
    print("  by kind: " + ", ".join(f"{k} {v}" for k, v in tr["by_kind"].items()))
    print("  per minute: " + " ".join(f"[{m}] {n}" for m, n in tr["per_minute_series"]))
    print(
        f"scheduling delay (eligible -> launched, {delay['n']} tasks): p50 {_ms(delay['p50'])}, "
        f"p90 {_ms(delay['p90'])}, p99 {_ms(delay['p99'])}, max {_ms(delay['max'])}; "
        f"to claim: p50 {_ms(claim['p50'])}, p99 {_ms(claim['p99'])}"
    )
    parts = report["scheduling_delay_s"]
    first = parts["first_submission"]
    target = "n/a" if first["p99"] is None else "met" if first["p99"] <= FIRST_LAUNCH_TARGET_S else "MISSED"
    print(
        f"  a user's first submission, task 1 ({first['n']} users): p50 {_ms(first['p50'])}, "
        f"p99 {_ms(first['p99'])}, max {_ms(first['max'])} (target p99 <= "
        f"{FIRST_LAUNCH_TARGET_S:g} s: {target})"
    )
    for name, label in (
        ("later_submissions", "later submissions, task 1 (fairness: behind the user's own earlier ones)"),
        ("next_tasks", "tasks 2.. (eligible at the previous commit)"),
    ):
        part = parts[name]
        print(f"  {label}, {part['n']}: p50 {_ms(part['p50'])}, p99 {_ms(part['p99'])}, max {_ms(part['max'])}")
    print(
        f"double launches: {dl['total']} (overlapping leases {dl['overlapping_leases']}, "
        f"lease launched twice {dl['lease_launched_twice']}, two workers committed "
        f"{dl['two_workers_committed']}, task committed twice {dl['task_committed_twice']})"
        + (f" e.g. {dl['examples']}" if dl["total"] else "")
    )
    peaks = ", ".join(f"{r} {v['leases']} leases peak {v['peak_in_flight']}" for r, v in over["replicas"].items())
    print(f"slot over-subscription: {over['total']} (cluster peak in flight {over['cluster_peak_in_flight']}; {peaks})")
    print(
        f"relaunched tasks: {report['relaunched_tasks']}; leases {report['leases']}; "
        f"workers {report['worker_outcomes']}; expired {report['expired']}"
    )
    print(f"scheduler: {report['scheduler']}")
    print(
        f"errors: {errors['total']} (tick errors {errors['scheduler_tick_errors']}, worker "
        f"errors {errors['worker_errors']}, launch failures {errors['launch_failures']}, "
        f"submissions not succeeded {errors['submissions_not_succeeded']}, tasks missing "
        f"{errors['tasks_missing']}, leases left in flight {errors['leases_left_in_flight']}, "
        f"unexpected expiries {errors['unexpected_expiries']}, wasted launches "
        f"{errors['wasted_launches']}, replica exits "
        f"{errors['replica_exit_codes']})"
    )
    for line in errors["problems"] + (errors["samples"] if errors["total"] else []):
        print(f"  {line}")
    print(f"verdict: {'OK' if report['verdict']['ok'] else 'FAILED'}")
