"""The private network a multi-worker trial's ranks share: loopback only, one ``/dev/shm``.

A trial with ``num_workers > 1`` runs each rank in a learner host of its own
(:mod:`workers.trainer.rank_trial`); the ranks have to reach each other for
``torch.distributed`` and must reach nothing else. A *namespace holder* (a bubblewrap
process with a new user and network namespace, whose only device is the loopback bwrap
brings up, running nothing but ``sleep``) owns the namespace; every rank's bwrap is started
inside it with ``nsenter --user --net --preserve-credentials`` and ``--share-net``, so the ranks
rendezvous on ``127.0.0.1`` at a fixed port, on a loopback no other process of the machine is
on. Joining a user namespace one's own user made takes no privilege, so this works for the
unprivileged user of the chart's learner pods as for root (both checked here). One folder on the machine's
``/dev/shm`` is bound as every rank's ``/dev/shm`` (NCCL's shared-memory transport), removed
with the holder.

Under ``NEVIS_SANDBOX=none`` (a researcher's own code) there is no
namespace: the ranks rendezvous on the machine's loopback at a free port.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

from services.core.errors import ConfigError

MASTER_PORT = 29500  # any port is free on a loopback of the trial's own
HOLDER_START_S = 10.0
HOLDER_DIRS = ("/usr", "/lib", "/lib64", "/bin")


@dataclass(frozen=True)
class RankSlot:
    """One rank's place in its trial's group (picklable: it travels in a host's spec)."""

    rank: int
    world_size: int
    port: int = MASTER_PORT
    holder_pid: int | None = None  # the holder's sandboxed process; None without a namespace
    shm_dir: str | None = None  # the machine folder every rank sees as /dev/shm

    def __post_init__(self) -> None:
        if not (0 <= self.rank < self.world_size):
            raise ValueError(f"rank {self.rank} is not in a group of {self.world_size}")

    def env(self) -> dict[str, str]:
        """What ``torch.distributed``'s ``env://`` rendezvous reads, and the host's context too."""
        return {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(self.port),
            "GLOO_SOCKET_IFNAME": "lo",
            "NCCL_SOCKET_IFNAME": "lo",
        }

    def own_gpus(self, visible: str) -> str:
        """This rank's share of the trial's GPUs (``CUDA_VISIBLE_DEVICES``): its own card where
        the trial holds one per rank (NCCL refuses two ranks on one device), else all of them
        (ranks sharing cards by fractions)."""
        cards = [c.strip() for c in visible.split(",") if c.strip()]
        return cards[self.rank] if len(cards) == self.world_size else visible

    def nsenter_argv(self) -> tuple[str, ...]:
        """The prefix that starts a rank's bwrap inside the trial's namespace (none without one)."""
        if self.holder_pid is None:
            return ()
        ns = f"/proc/{self.holder_pid}/ns"
        return (
            shutil.which("nsenter") or "/usr/bin/nsenter",
            f"--user={ns}/user",
            f"--net={ns}/net",
            "--preserve-credentials",
        )


class RankNet:
    """The namespace holder and shared ``/dev/shm`` of one trial's ranks; :meth:`close` ends both."""

    def __init__(self, *, sandbox: str, world_size: int) -> None:
        self.sandbox, self.world_size = sandbox, world_size
        self._holder: subprocess.Popen[bytes] | None = None
        self.holder_pid: int | None = None
        self.shm_dir: str | None = None
        self.port = MASTER_PORT

    def open(self) -> RankNet:
        """Start the holder (bwrap) or, unsandboxed, pick a free loopback port.

        Raises:
            ConfigError: the namespace cannot be made or joined here (naming why).
        """
        if self.sandbox != "bwrap":
            self.port = _free_port()
            return self
        self.shm_dir = tempfile.mkdtemp(prefix="nevis-ranks-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)  # noqa: S108
        read, write = os.pipe()
        argv = [
            shutil.which("bwrap") or "bwrap",
            "--unshare-user",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--info-fd",
            str(write),
        ]
        for folder in HOLDER_DIRS:
            argv += ["--ro-bind-try", folder, folder]
        argv += ["--", "sleep", "infinity"]
        try:
            self._holder = subprocess.Popen(
                argv,
                pass_fds=(write,),
                env={"PATH": "/usr/bin:/bin"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        finally:
            os.close(write)
        try:
            self.holder_pid = _child_pid(read, self._holder)
        except Exception:
            self.close()
            raise
        finally:
            os.close(read)
        return self

    def slot(self, rank: int) -> RankSlot:
        return RankSlot(rank, self.world_size, self.port, self.holder_pid, self.shm_dir)

    def close(self) -> None:
        if self._holder is not None and self._holder.poll() is None:
            self._holder.kill()
            self._holder.wait()
        if self._holder is not None and self._holder.stderr is not None:
            self._holder.stderr.close()
        self._holder = None
        if self.shm_dir is not None:
            shutil.rmtree(self.shm_dir, ignore_errors=True)
            self.shm_dir = None

    def __enter__(self) -> RankNet:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _child_pid(read: int, holder: subprocess.Popen[bytes]) -> int:
    """The pid of the holder's sandboxed child, from bwrap's ``--info-fd`` JSON, within a deadline."""
    deadline, data = time.monotonic() + HOLDER_START_S, b""
    os.set_blocking(read, False)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(read, 4096)
        except BlockingIOError:
            chunk = None
        if chunk:
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                continue
        if chunk == b"" or holder.poll() is not None:
            break
        time.sleep(0.02)
    error = holder.stderr.read().decode(errors="replace")[-2000:] if holder.poll() is not None and holder.stderr else ""
    raise ConfigError(f"the ranks' network namespace could not be made with bubblewrap: {error or 'no answer'}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["MASTER_PORT", "RankNet", "RankSlot"]
