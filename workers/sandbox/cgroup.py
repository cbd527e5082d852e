"""A control group per learner host: memory, process-count and CPU limits, and the CPU time
of the host's whole process tree measured where the learner cannot reach it.

The CPU limit is a CFS quota (v1 ``cpu.cfs_quota_us``, v2 ``cpu.max``) of the CPUs the host
declared: a learner that asked for one CPU gets one CPU's time per period, however many
threads it starts, so it cannot take the node's other cores from the runs beside it.

The harness creates the group before the host starts and the host joins it before bubblewrap
runs (:func:`join_argv`), so every process the learner forks is counted and capped; the
learner sees no ``/sys`` and cannot leave. cgroup v2 (one unified tree) and v1 (one tree per
controller, e.g. Docker's hybrid hosts) are both read; where no hierarchy is writable (an
unprivileged laptop, a pod without delegation) :func:`create_host_cgroup` returns ``None``
and the host runs with its rlimits alone, its CPU time read from ``/proc`` instead
(:mod:`workers.sandbox.metering.usage`).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpuacct", "cpu")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLimits:
    """What one host's group allows; ``None`` leaves a limit to the parent group."""

    memory_bytes: int | None = None
    pids: int | None = None
    cpus: float | None = None  # CPUs' worth of time per period (the CFS quota)

    def quota_us(self) -> int | None:
        """The CFS quota of one :data:`CPU_PERIOD_US` period (at least 1 ms), or None for no cap."""
        return None if not self.cpus or self.cpus <= 0 else max(1000, round(self.cpus * CPU_PERIOD_US))


@dataclass
class HostCgroup:
    """One host's group: the folders to join, and how to read what the host used."""

    folders: dict[str, Path]  # v2: {"": folder}; v1: one folder per controller
    version: int
    final_cpu_seconds: float | None = None  # the last reading, taken as the group was removed
    removed: bool = False

    def procs_files(self) -> tuple[Path, ...]:
        return tuple(folder / "cgroup.procs" for folder in self.folders.values())

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) of every process that was ever in the group; once the group
        is removed, what it held then (a call the harness ended by closing its host is charged)."""
        if self.removed:
            return self.final_cpu_seconds
        try:
            if self.version == 2:
                for line in (self.folders[""] / "cpu.stat").read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "usage_usec":
                        return int(value) / 1e6
                return None
            folder = self.folders.get("cpuacct")
            return None if folder is None else int((folder / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def peak_memory_bytes(self) -> int | None:
        """The group's memory high-water mark, where the kernel keeps one."""
        folder = self.folders.get("" if self.version == 2 else "memory")
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        if folder is None:
            return None
        try:
            return int((folder / name).read_text())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Delete the group (the kernel refuses while a process is left in it: kill first),
        its CPU time read first: no reading after this comes back empty."""
        if not self.removed:
            self.final_cpu_seconds, self.removed = self.cpu_seconds(), True
        for folder in self.folders.values():
            with contextlib.suppress(OSError):
                folder.rmdir()


def create_host_cgroup(limits: CgroupLimits, *, root: Path = ROOT) -> HostCgroup | None:
    """A new group below this process's own, with ``limits`` set; ``None`` where none can be made."""
    name = f"nevis-host-{uuid.uuid4().hex[:12]}"
    own = _own_groups()
    if (root / "cgroup.controllers").exists() and "" in own:
        return _create_v2(root / own[""].lstrip("/") / name, limits)
    made: dict[str, Path] = {}
    for controller in V1_CONTROLLERS:
        base = root / controller
        if not (base / "cgroup.procs").exists():
            continue
        folder = base / own.get(controller, "/").lstrip("/") / name
        same = next((f for f in made.values() if f.exists() and folder.exists() and f.samefile(folder)), None)
        if same is not None:  # co-mounted controllers (cpu,cpuacct): one folder for both
            made[controller] = folder
            _limit_v1(controller, folder, limits)
            continue
        try:
            folder.mkdir()
        except OSError:
            continue
        made[controller] = folder
        _limit_v1(controller, folder, limits)
    return HostCgroup(made, 1) if made else None


def _limit_v1(controller: str, folder: Path, limits: CgroupLimits) -> None:
    """Write the limits ``controller`` holds into a v1 group (best effort: the caller measures either way)."""
    with contextlib.suppress(OSError):
        if controller == "memory" and limits.memory_bytes:
            (folder / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
        if controller == "pids" and limits.pids:
            (folder / "pids.max").write_text(str(limits.pids))
        if controller == "cpu" and limits.quota_us():
            (folder / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (folder / "cpu.cfs_quota_us").write_text(str(limits.quota_us()))


def _create_v2(folder: Path, limits: CgroupLimits) -> HostCgroup | None:
    try:
        folder.mkdir()
    except OSError:
        return None
    # Controllers work only where the parent delegates them; cpu.stat's usage is always there.
    quota = limits.quota_us()
    for file, value in (
        ("memory.max", limits.memory_bytes),
        ("pids.max", limits.pids),
        ("cpu.max", quota and f"{quota} {CPU_PERIOD_US}"),
    ):
        if value:
            with contextlib.suppress(OSError):
                (folder / file).write_text(str(value))
    return HostCgroup({"": folder}, 2)


def _own_groups() -> dict[str, str]:
    """This process's group per controller (v1) and its unified group under the key ``""``."""
    groups: dict[str, str] = {}
    try:
        lines = Path(f"/proc/{os.getpid()}/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def join_argv(group: HostCgroup | None) -> tuple[str, ...]:
    """A prefix that moves the command into ``group`` before it runs (nothing without one)."""
    if group is None:
        return ()
    writes = " && ".join(f'echo $$ > "{path}"' for path in group.procs_files())
    return ("/bin/sh", "-c", f'{writes} && exec "$@"', "nevis-host")


__all__ = ["CPU_PERIOD_US", "CgroupLimits", "HostCgroup", "create_host_cgroup", "join_argv"]
