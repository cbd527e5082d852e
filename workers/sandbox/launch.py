"""How a learner host process is started: inside bubblewrap, or (trusted use only) plainly.

``bwrap`` (Debian's ``bubblewrap``): new user, PID, network, IPC and UTS namespaces; the
process sees a read-only view of the system libraries, this installation's Python and
packages, and the learner's own import paths (its unpacked bundle or image), plus a private
``/tmp``; they go last on ``sys.path`` (:mod:`workers.sandbox.host_boot`);
no network but loopback, no other process, no data folder, no database file, no credential
(the environment is cleared, and bwrap itself is started with an empty environment so its
own ``/proc/1/environ`` holds nothing either); bwrap loads the learner seccomp filter
(:mod:`workers.sandbox.seccomp`) before it starts the host. ``none`` runs the host as a plain subprocess
with a clean environment: no credential in reach by environment, but the same view of the
machine as the caller; for a researcher running their own code with ``nevis run``.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import ConfigError
from workers.sandbox.cgroup import HostCgroup, join_argv
from workers.sandbox.images.mounted import usable_import_path
from workers.sandbox.limits import HostLimits
from workers.sandbox.rank_net import RankSlot
from workers.sandbox.seccomp import host_filter, program_fd

SANDBOXES = ("auto", "bwrap", "none")
NOBODY = 65534
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/alternatives")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
GPU_CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


@dataclass(frozen=True)
class HostLaunch:
    """The command and environment of one learner host, and where it runs."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    sandbox: str  # the sandbox actually used: bwrap or none
    pass_fds: tuple[int, ...] = ()  # the seccomp program's descriptor, which bwrap reads

    def close_fds(self) -> None:
        """Close this side's copies of :attr:`pass_fds`, once the host has started (or failed to)."""
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass


def resolve_sandbox(requested: str) -> str:
    """``auto`` → ``bwrap`` when installed, else ``none``; an explicit ``bwrap`` must exist.

    Raises:
        ConfigError: ``bwrap`` was asked for and is not installed, or the value is unknown.
    """
    if requested not in SANDBOXES:
        raise ConfigError(f"NEVIS_SANDBOX must be one of {', '.join(SANDBOXES)}; got {requested!r}.")
    found = shutil.which("bwrap")
    if requested == "bwrap" and found is None:
        raise ConfigError(
            "NEVIS_SANDBOX=bwrap but bubblewrap is not installed: install the "
            "'bubblewrap' package (apt-get install bubblewrap)."
        )
    if requested == "auto":
        return "bwrap" if found else "none"
    return requested


@functools.cache
def bwrap_options(bwrap: str) -> str:
    """This bubblewrap's ``--help`` text: which options it has (``--disable-userns`` came in
    0.8.0, ``--size`` in 0.6.0)."""
    try:
        found = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return found.stdout + found.stderr


def can_disable_userns(bwrap: str) -> bool:
    """Whether this bubblewrap has ``--disable-userns`` (0.8.0 and later)."""
    return "--disable-userns" in bwrap_options(bwrap)


def gpu_devices(visible: str | None) -> list[str]:
    """The device nodes of the GPUs this host was given (``CUDA_VISIBLE_DEVICES``, as indices)
    and the driver's control nodes; every GPU when the allocation names none by index."""
    indices = [v.strip() for v in (visible or "").split(",") if v.strip()]
    if indices and all(v.isdigit() for v in indices):
        cards = [f"/dev/nvidia{v}" for v in indices]
    else:
        cards = sorted(p for p in glob.glob("/dev/nvidia[0-9]*"))
    return [d for d in (*cards, *GPU_CONTROL_DEVICES) if os.path.exists(d)]


def project_dirs() -> tuple[str, ...]:
    """The folders of this installation's own packages (``services``, ``workers``)."""
    here = Path(__file__).resolve().parents[1]  # .../workers
    return (str(here), str(here.parent / "services"))


def python_dirs() -> tuple[str, ...]:
    """The interpreter's prefixes: the virtual environment and the base installation."""
    dirs = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parents[1])}
    return tuple(sorted(d for d in dirs if d and not d.startswith(("/usr", "/bin", "/lib"))))


def host_launch(
    *,
    sandbox: str,
    import_paths: Sequence[str] = (),
    threads: int = 1,
    gpu: bool = False,
    limits: HostLimits = HostLimits(),
    cgroup: HostCgroup | None = None,
    rank: RankSlot | None = None,
) -> HostLaunch:
    """The command that starts ``python -m workers.sandbox.host`` in the requested sandbox,
    inside its control group (when given) and under ``limits``' rlimits; a ``rank`` of a
    multi-worker trial joins its group's network namespace and ``/dev/shm``
    (:mod:`workers.sandbox.rank_net`) and gets the rendezvous's variables."""
    kind = resolve_sandbox(sandbox)
    prefix = (*join_argv(cgroup), *limits.prlimit_argv(gpu=gpu), *(rank.nsenter_argv() if rank else ()))
    # (a mounted learner image's folders only where no link of the image leads elsewhere)
    paths = [str(Path(p).resolve()) for p in import_paths if p and Path(p).is_dir() and usable_import_path(p)]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LEARNER_IMPORT_PATH": os.pathsep.join(paths),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "LANG": "C.UTF-8",
        **(rank.env() if rank else {}),
    }
    if gpu and "CUDA_VISIBLE_DEVICES" in os.environ:
        visible = os.environ["CUDA_VISIBLE_DEVICES"]
        env["CUDA_VISIBLE_DEVICES"] = rank.own_gpus(visible) if rank else visible
    # Isolated (-I: no PYTHONPATH, user site or working folder while site runs) and without
    # bytecode writes (-B); the learner's folders go last on sys.path (workers/sandbox/host_boot.py).
    command = [sys.executable, "-I", "-B", "-m", "workers.sandbox.host_boot"]
    if kind == "none":
        cwd = tempfile.mkdtemp(prefix="nevis-learner-")
        return HostLaunch((*prefix, *command), {**env, "HOME": cwd, "TMPDIR": cwd}, cwd, "none")
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--cap-drop",
        "ALL",
    ]
    if can_disable_userns(bwrap):
        # No user namespace inside the sandbox: learner code cannot reach the kernel's
        # namespace code paths (the pods' seccomp profile has to allow them for bwrap itself).
        argv += ["--unshare-user", "--disable-userns"]
    # The private /tmp first: a folder bound below it afterwards stays visible. Both are
    # RAM: sized, so that filling them stops at the cap instead of at the node's memory.
    sized = ["--size", str(limits.tmpfs_bytes)] if limits.tmpfs_bytes and "--size" in bwrap_options(bwrap) else []
    if rank is not None and rank.holder_pid is not None:
        argv += ["--share-net"]  # the namespace nsenter joined: the group's loopback, nothing else
    shm = ["--bind", rank.shm_dir, "/dev/shm"] if rank is not None and rank.shm_dir else [*sized, "--tmpfs", "/dev/shm"]  # noqa: S108
    argv += ["--proc", "/proc", "--dev", "/dev", *sized, "--tmpfs", "/tmp", *shm]  # noqa: S108
    for folder in SYSTEM_DIRS:
        argv += ["--ro-bind-try", folder, folder]
    for file in SYSTEM_FILES:
        argv += ["--ro-bind-try", file, file]
    for folder in (*python_dirs(), *project_dirs(), *paths):
        argv += ["--ro-bind", folder, folder]
    if gpu:  # only the allocated GPUs' nodes, not every card of the machine
        for device in gpu_devices(env.get("CUDA_VISIBLE_DEVICES")):
            argv += ["--dev-bind-try", device, device]
    for name, value in {**env, "HOME": "/tmp", "TMPDIR": "/tmp"}.items():  # noqa: S108
        argv += ["--setenv", name, value]
    argv += ["--chdir", "/tmp"]  # noqa: S108
    program = host_filter()  # production: raises where it cannot be built
    fds = () if program is None else (program_fd(program),)
    for fd in fds:  # loaded by bwrap after its own set-up, so it binds the host and not bwrap
        argv += ["--seccomp", str(fd)]
    argv += ["--", *command]
    # bwrap itself starts with an empty environment: its /proc/1/environ is visible inside.
    return HostLaunch((*prefix, *argv), {"PATH": "/usr/bin:/bin"}, "/", "bwrap", fds)


__all__ = [
    "HostLaunch",
    "SANDBOXES",
    "bwrap_options",
    "can_disable_userns",
    "gpu_devices",
    "host_launch",
    "project_dirs",
    "python_dirs",
    "resolve_sandbox",
]
