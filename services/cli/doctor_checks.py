"""What this machine gives the service: one probe per piece, each naming what its absence costs.

Why: the service picks its means quietly (bubblewrap or a plain subprocess, cgroups or rlimits,
a GPU or the CPU) and says so only in logs; ``nevis doctor`` and the start of ``nevis serve``
say it up front. Probes are cheap and change nothing that lasts: a cgroup is made and removed,
``bwrap`` runs ``true``, the database gets ``SELECT 1``; the FLOP rate is read, never measured.
"""

from __future__ import annotations

import ctypes.util
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from services.core.config import Settings, mask_url
from workers.sandbox.cgroup import CgroupLimits, create_host_cgroup
from workers.sandbox.launch import can_disable_userns
from workers.sandbox.metering.calibration import cached_flop_rate

MIN_FREE_GIB = 5.0
"""Below this the data folder is reported low (shards and checkpoints of one stream fill it)."""
REQUIRED_FREE_GIB = 1.0
"""Below this production refuses: a run could not write its first checkpoint."""
SETUP = "./scripts/setup.sh (pip install -e .)"


@dataclass(frozen=True)
class Check:
    """One row: the piece, whether it is there, what was found, and what its absence costs."""

    piece: str
    ok: bool
    found: str
    cost: str = ""
    fix: str = ""
    required_in_production: bool = False


def _run(argv: list[str], timeout_s: float = 20) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_python() -> Check:
    """The interpreter the service runs on."""
    return Check("python", True, f"{sys.version.split()[0]} at {sys.executable}")


def check_torch() -> Check:
    """The torch build, read from its version file (importing torch would cost a second or two)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return Check("torch", False, "not installed", "no learner can train", SETUP, True)
    text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8", errors="replace")
    version = re.search(r"__version__ = '([^']+)'", text)
    cuda = re.search(r"^cuda: .*= '([^']+)'", text, re.MULTILINE)
    build = f"CUDA {cuda[1]} build" if cuda else "CPU build"
    return Check("torch", True, f"{version[1] if version else '?'} ({build})")


def check_bubblewrap() -> Check:
    """bubblewrap, and whether this kernel lets it make the namespaces it needs."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Check(
            "bubblewrap",
            False,
            "not on PATH",
            "learner code runs in a plain subprocess, not a sandbox (NEVIS_SANDBOX=auto); production refuses to start",
            "sudo apt-get install bubblewrap",
            True,
        )
    result = _run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"])
    if result is None or result.returncode != 0:
        why = " ".join((result.stderr if result else "timed out").split())[:160]
        return Check(
            "bubblewrap",
            False,
            f"{bwrap}, but user namespaces fail ({why})",
            "every sandboxed learner host fails to start",
            "sysctl -w kernel.unprivileged_userns_clone=1 (Ubuntu 24.04: "
            "kernel.apparmor_restrict_unprivileged_userns=0), or run in a pod whose seccomp "
            "profile allows them (nevis sandbox install-profile)",
            True,
        )
    nested = "" if can_disable_userns(bwrap) else "; < 0.8.0, so learners may nest namespaces"
    return Check("bubblewrap", True, f"{bwrap}, user namespaces work{nested}")


def check_cgroup() -> Check:
    """A writable cgroup hierarchy: a group is made below ours and removed at once."""
    group = create_host_cgroup(CgroupLimits())
    if group is None:
        return Check(
            "cgroups",
            False,
            "no writable hierarchy",
            "learner hosts get rlimits only: no memory cap over their whole process tree, CPU time read from /proc",
            "run the service as root, or in a delegated cgroup (systemd-run --scope -p Delegate=yes nevis serve)",
        )
    group.remove()
    return Check("cgroups", True, f"v{group.version}, writable")


def check_seccomp() -> Check:
    """libseccomp, which the learner hosts' system-call filter is loaded with."""
    library = ctypes.util.find_library("seccomp")
    if library is None:
        return Check(
            "seccomp",
            False,
            "libseccomp not found",
            "no system-call filter on learner code beyond what bubblewrap blocks",
            "sudo apt-get install libseccomp2",
        )
    return Check("seccomp", True, library)


def check_podman() -> Check:
    """podman and the OCI runtime its configuration names (for the container images)."""
    podman = shutil.which("podman")
    if podman is None:
        return Check(
            "podman",
            False,
            "not on PATH",
            "the container images of docker/ cannot be built or run here (docker/build.sh, -m images)",
            "sudo apt-get install podman runc debootstrap",
        )
    runtime = "crun"
    conf = Path("/etc/containers/containers.conf")
    if conf.exists():
        named = re.search(r'^\s*runtime\s*=\s*"([^"]+)"', conf.read_text(errors="replace"), re.MULTILINE)
        runtime = named[1] if named else runtime
    if shutil.which(runtime) is None:
        return Check(
            "podman",
            False,
            f"{podman}, but its runtime {runtime} is missing",
            "containers cannot start",
            f"sudo apt-get install {runtime}",
        )
    return Check("podman", True, f"{podman}, runtime {runtime}")


def check_ray(settings: Settings) -> Check:
    """Ray's version, where it runs, and its authentication mode."""
    try:
        version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return Check("ray", False, "not installed", "no run can start", SETUP, True)
    where = settings.ray_address or "a local Ray per run"
    auth = os.environ.get("RAY_AUTH_MODE", "")
    auth_text = f"RAY_AUTH_MODE={auth}" if auth else "Ray's default auth"
    return Check("ray", True, f"{version}, {where}, {auth_text}")


def check_database(settings: Settings, environment: str) -> Check:
    """Whether the configured database answers ``SELECT 1`` (SQLite is for development only)."""
    from sqlalchemy import create_engine, text  # noqa: PLC0415 - only this probe needs it
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - imported when the command runs (fast start)
    from sqlalchemy.pool import NullPool  # noqa: PLC0415 - imported when the command runs (fast start)

    url = settings.database_url
    fix = "start it, or set NEVIS_DATABASE_URL to a reachable server (postgresql+psycopg://user@host/db)"
    if url.startswith("sqlite"):
        if environment == "production":
            return Check(
                "database",
                False,
                f"SQLite ({url})",
                "production refuses SQLite",
                "set NEVIS_DATABASE_URL to postgresql+psycopg://user@host/db",
                True,
            )
        return Check("database", True, f"SQLite ({url}), development only")
    args = {"connect_timeout": 3} if url.startswith("postgresql") else {}
    engine = None
    try:
        engine = create_engine(url, poolclass=NullPool, connect_args=args)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, ImportError) as exc:
        why = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
        return Check(
            "database",
            False,
            f"{mask_url(url)} unreachable ({why})",
            "the coordinator cannot start and runs cannot be recorded",
            fix,
            True,
        )
    finally:
        if engine is not None:
            engine.dispose()
    return Check("database", True, f"{mask_url(url)} answers")


def check_store(settings: Settings) -> Check:
    """The object store: a file store's folder must be writable; an S3 store's settings are shown."""
    if settings.store_url.startswith("s3://"):
        endpoint = settings.s3_endpoint_url or "AWS's default endpoint"
        return Check("object store", True, f"{settings.store_url} via {endpoint} (not contacted)")
    folder = Path(unquote(urlsplit(settings.store_url).path))
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK):
        return Check(
            "object store",
            False,
            f"{folder} is not writable (at {existing})",
            "shards, checkpoints and bundles cannot be kept",
            "set NEVIS_STORE_URL to a writable file:// folder or an s3:// bucket",
            True,
        )
    return Check("object store", True, f"{settings.store_url}, writable")


def check_gpus() -> Check:
    """GPUs through NVML (pynvml) where installed, else nvidia-smi."""
    try:
        import pynvml  # noqa: PLC0415 - optional: only GPU machines install it
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            names = [
                str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
                for i in range(pynvml.nvmlDeviceGetCount())
            ]
            pynvml.nvmlShutdown()
            return _gpu_check(names, "NVML")
        except pynvml.NVMLError:
            return _gpu_check([], "NVML has no driver")
    smi = shutil.which("nvidia-smi")
    result = _run([smi, "-L"]) if smi else None
    listed = result.stdout.splitlines() if result is not None and result.returncode == 0 else []
    names = [line.split(" (UUID")[0] for line in listed]
    return _gpu_check(names, "nvidia-smi" if smi else "no NVML (pynvml) and no nvidia-smi")


def _gpu_check(names: list[str], source: str) -> Check:
    if not names:
        return Check(
            "GPUs",
            False,
            f"none ({source})",
            "learners train on the CPU",
            "install the NVIDIA driver and a CUDA build of torch (README, GPU machines)",
        )
    return Check("GPUs", True, f"{len(names)} via {source}: {', '.join(names)}")


def check_disk(settings: Settings) -> Check:
    """Free space where the data folder is (or would be made)."""
    folder = settings.data_dir
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    free_gib = shutil.disk_usage(existing).free / 2**30
    found = f"{free_gib:.1f} GiB free in {folder}"
    if free_gib < MIN_FREE_GIB:
        return Check(
            "disk",
            False,
            found,
            "shards and checkpoints may not fit",
            "free space, or set NEVIS_DATA_DIR to a larger disk",
            required_in_production=free_gib < REQUIRED_FREE_GIB,
        )
    return Check("disk", True, found)


def check_calibration() -> Check:
    """The FLOP-rate calibration of this boot, if a run measured it already (it is not run here)."""
    rate = cached_flop_rate()
    if rate is None:
        return Check("FLOP rate", True, "not measured yet this boot (the first trial measures it, 0.3 s)")
    return Check("FLOP rate", True, f"{rate / 1e9:.1f} GFLOP per CPU-second (measured this boot)")


def check_split_salt(settings: Settings, environment: str) -> Check:
    """Whether split draws are keyed by a deployment secret (never shows the salt itself)."""
    if settings.split_salt:
        return Check("split salt", True, "set: drawn splits are this deployment's own (docs/isolation.md)")
    if environment != "production":
        return Check("split salt", True, "empty: the public, reproducible splits (development, reproducing the paper)")
    return Check(
        "split salt",
        True,
        "empty: this deployment's own, made once and kept in its database "
        "(deployment_secrets); set NEVIS_SPLIT_SALT to choose it",
    )


def run_checks(settings: Settings, environment: str) -> list[Check]:
    """Every probe, in the order the table shows them."""
    probes: list[Callable[[], Check]] = [
        check_python,
        check_torch,
        check_bubblewrap,
        check_cgroup,
        check_seccomp,
        check_podman,
        lambda: check_ray(settings),
        lambda: check_database(settings, environment),
        lambda: check_store(settings),
        check_gpus,
        lambda: check_disk(settings),
        check_calibration,
        lambda: check_split_salt(settings, environment),
    ]
    return [probe() for probe in probes]


__all__ = [
    "Check",
    "check_bubblewrap",
    "check_calibration",
    "check_cgroup",
    "check_database",
    "check_disk",
    "check_gpus",
    "check_podman",
    "check_python",
    "check_ray",
    "check_seccomp",
    "check_split_salt",
    "check_store",
    "check_torch",
    "run_checks",
]
