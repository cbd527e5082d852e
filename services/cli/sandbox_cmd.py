"""``nevis sandbox``: what the nodes that run learner pods need for the bubblewrap sandbox.

``nevis sandbox install-profile`` is the command of the chart's seccomp-installer DaemonSet:
it copies the learner seccomp profile (the chart's ``files/seccomp/learner-v1.json``, mounted
from a ConfigMap) into the kubelet's seccomp folder of its node, where a pod's
``seccompProfile: {type: Localhost}`` finds it. The file is checked first (a profile the
runtime cannot parse would make every learner pod fail to start, far from the cause) and
replaced atomically (a pod starting meanwhile reads the old file or the new one, never half
of one). ``--stay`` then idles, so the DaemonSet's pod stays Running and a changed profile is
rolled out by the DaemonSet's own update.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from pathlib import Path

import typer
from rich.console import Console

from services.core.errors import ConfigError

app = typer.Typer(no_args_is_help=True, help="The learner sandbox's needs on the nodes.")
SECCOMP_ACTIONS = {
    "SCMP_ACT_ALLOW",
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_LOG",
    "SCMP_ACT_TRAP",
    "SCMP_ACT_TRACE",
}


def check_seccomp_profile(text: str, *, source: str) -> dict:
    """The parsed profile, or a :class:`ConfigError` naming what is wrong with it."""
    try:
        profile = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not JSON: {exc}") from exc
    if not isinstance(profile, dict) or profile.get("defaultAction") not in SECCOMP_ACTIONS:
        raise ConfigError(
            f"{source} is not a seccomp profile: 'defaultAction' must be one of {', '.join(sorted(SECCOMP_ACTIONS))}."
        )
    rules = profile.get("syscalls", [])
    if not isinstance(rules, list) or not all(
        isinstance(r, dict) and r.get("action") in SECCOMP_ACTIONS and isinstance(r.get("names"), list) for r in rules
    ):
        raise ConfigError(f"{source}: every entry of 'syscalls' needs 'names' (a list) and a seccomp 'action'.")
    return profile


def install_profile_file(source: Path, target: Path) -> None:
    """Copy a checked profile to ``target`` atomically (readable by all, as the kubelet expects)."""
    try:
        text = source.read_text()
    except OSError as exc:
        raise ConfigError(f"Cannot read the seccomp profile {source}: {exc.strerror}.") from exc
    check_seccomp_profile(text, source=str(source))
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@app.command("install-profile")
def install_profile(
    source: Path = typer.Option(..., "--from", help="The profile file (the chart mounts it from a ConfigMap)."),
    target: Path = typer.Option(
        ..., "--to", help="Where the kubelet looks: <kubelet root>/seccomp/<localhostProfile>."
    ),
    stay: bool = typer.Option(False, "--stay", help="Then idle until stopped (a DaemonSet's pod)."),
) -> None:
    """Install the learner seccomp profile on this node."""
    install_profile_file(source, target)
    Console().print(f"Installed the seccomp profile {source} as {target}.")
    if stay:
        stopped = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stopped.set())
        stopped.wait()


__all__ = ["app", "check_seccomp_profile", "install_profile_file"]
