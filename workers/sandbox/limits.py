"""What one learner host may use, and how long it may keep the harness waiting.

A hostile learner must not take its node down: ``/tmp`` and ``/dev/shm`` are RAM-backed, so
each gets a size (bubblewrap's ``--size``); file size, open files and address space are
rlimits set by ``prlimit`` before bubblewrap starts (inherited by everything the learner
forks); memory, process count and CPU time (a quota of the learner's declared CPUs) are the host's
control group where the machine offers one (:mod:`workers.sandbox.cgroup`). Deadlines are enforced by harness code: a host that keeps it
waiting past one is killed and the failure names the deadline.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from services.core.config import Settings

MIB = 1024 * 1024


@dataclass(frozen=True)
class HostLimits:
    """Caps of one learner host; ``0`` switches a cap off (the address-space cap is off on GPU
    hosts, whose drivers map far more address space than they use)."""

    tmpfs_bytes: int = 2048 * MIB  # each of /tmp and /dev/shm
    file_bytes: int = 4096 * MIB  # largest file the learner may write
    open_files: int = 4096
    address_space_bytes: int = 0  # off by default: PyTorch maps much more than it touches
    memory_bytes: int = 0  # the host's cgroup; 0: the parent group's limit
    pids: int = 512  # processes and threads in the host's cgroup
    declare_deadline_s: float = 120.0  # start-up and describe (search space, resources)
    silence_deadline_s: float = 1800.0  # longest wait for any frame of a trial or prediction
    log_bytes: int = MIB  # the host's output kept (the last bytes: workers.sandbox.log_ring)
    predictor_bytes: int = 1024 * MIB  # a trial's predictor (and each checkpoint), refused unread above
    state_bytes: int = 2048 * MIB  # a trial's new learner state, refused unread above
    proxy_max_dim: int = 2048  # feature width d of a proxy rung report (LiDAR's cost grows as d³)
    cpus: float = 0.0  # CPUs' time the host may use (its cgroup's CFS quota: the learner's declared CPUs); 0: no cap

    def __post_init__(self) -> None:
        for name in (
            "tmpfs_bytes",
            "file_bytes",
            "open_files",
            "address_space_bytes",
            "memory_bytes",
            "pids",
            "log_bytes",
            "predictor_bytes",
            "state_bytes",
            "proxy_max_dim",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"HostLimits.{name} must be a non-negative int; got {value!r}")
        if not isinstance(self.cpus, (int, float)) or isinstance(self.cpus, bool) or not 0 <= self.cpus <= 4096:
            raise ValueError(f"HostLimits.cpus must be a number of CPUs in [0, 4096]; got {self.cpus!r}")
        for name in ("declare_deadline_s", "silence_deadline_s"):
            if not 0 < getattr(self, name) <= 7 * 86400:
                raise ValueError(f"HostLimits.{name} must be in (0, 604800] seconds")

    def prlimit_argv(self, *, gpu: bool) -> tuple[str, ...]:
        """``prlimit`` (util-linux) with this host's rlimits, soft = hard so that the learner
        cannot raise them; nothing where ``prlimit`` is not installed."""
        found = shutil.which("prlimit")
        if found is None:
            return ()
        argv = [found]
        if self.file_bytes:
            argv.append(f"--fsize={self.file_bytes}")
        if self.open_files:
            argv.append(f"--nofile={self.open_files}")
        if self.address_space_bytes and not gpu:
            argv.append(f"--as={self.address_space_bytes}")
        argv.append("--core=0")  # no core dumps of learner memory on the node's disk
        return (*argv, "--")

    @classmethod
    def from_settings(cls, settings: Settings) -> HostLimits:
        """The caps the ``NEVIS_HOST_*`` settings ask for."""
        return cls(
            tmpfs_bytes=settings.host_tmpfs_mb * MIB,
            memory_bytes=settings.host_memory_mb * MIB,
            pids=settings.host_pids,
            declare_deadline_s=settings.host_declare_deadline_s,
            silence_deadline_s=settings.host_silence_deadline_s,
            log_bytes=settings.log_ring_bytes,
            predictor_bytes=settings.host_predictor_mb * MIB,
            state_bytes=settings.host_state_mb * MIB,
            proxy_max_dim=settings.proxy_max_dim,
        )


__all__ = ["MIB", "HostLimits"]
