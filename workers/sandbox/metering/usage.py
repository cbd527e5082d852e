"""What a learner host's process tree used, read by harness code from outside the sandbox.

The host's control group (:mod:`workers.sandbox.cgroup`) counts the CPU time of every
process that ever ran in it; where there is none, ``/proc`` gives the CPU time of the host's
live process tree plus what its reaped children used (``cutime``/``cstime``). Both are
figures the learner cannot change: they are kept by the kernel, outside its reach.
"""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(root_pid: int, *, proc: Path = Path("/proc")) -> float | None:
    """CPU seconds (user + system, children included) of ``root_pid`` and its descendants."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, seconds)
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        fields = _stat_fields(proc / entry / "stat")
        if fields is None:
            continue
        # after the command's closing parenthesis: state ppid ... utime(11) stime(12) cutime(13) cstime(14)
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        stats[int(entry)] = (int(fields[1]), ticks / CLOCK_TICKS)
    if root_pid not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


def tree_pids(root_pid: int, *, proc: Path = Path("/proc")) -> set[int]:
    """``root_pid`` and its live descendants (whose GPU use NVML reports by pid)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return set()
    for entry in entries:
        fields = _stat_fields(proc / entry / "stat")
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    _, _, rest = text.rpartition(")")  # the command name may hold spaces and parentheses
    fields = rest.split()
    return fields if len(fields) > 14 else None


__all__ = ["tree_cpu_seconds", "tree_pids"]
