"""Learner hosts under bwrap run with the seccomp filter: a forbidden call fails, and a lock on a
file every host can open carries nothing from one host to another (issue 44, finding 4)."""

from __future__ import annotations

import errno
import fcntl
import os
import pickle
import shutil
import struct
from pathlib import Path

import pytest

from workers.sandbox.client import HostSpec, LearnerHost
from workers.sandbox.launch import host_launch
from workers.sandbox.learner_calls import describe

LEARNER_SOURCE = """
import ctypes, fcntl, os, struct
from workers.learners.protocol import Resources

OFFSET = 4242  # where the sender would put its 64 bits
held = []

def attempt(fn):
    try:
        return 0, fn()
    except OSError as exc:
        return exc.errno, None

class Probe:
    name = "probe"
    def __init__(self, role): self.role = role
    def search_space(self): return {}
    def resources(self): return Resources()
    def init_state(self):
        libc = ctypes.CDLL(None, use_errno=True)
        ctypes.set_errno(0)
        keyctl = libc.syscall(250, 0, ctypes.c_ulong(0xFFFFFFFD), 0)  # KEYCTL_GET_KEYRING_ID, session
        shared = os.open(os.__file__, os.O_RDONLY)
        held.append(shared)  # kept open: a lock taken would outlive this call
        kind = fcntl.F_RDLCK if self.role == "send" else fcntl.F_WRLCK
        lock = struct.pack("hhqqi4x", kind, 0, OFFSET, 8, 0)
        cmd = fcntl.F_OFD_SETLK if self.role == "send" else fcntl.F_OFD_GETLK
        return {"keyctl": ctypes.get_errno() if keyctl == -1 else 0, "file": os.__file__,
                "ofd": attempt(lambda: fcntl.fcntl(shared, cmd, lock)),
                "posix": attempt(lambda: fcntl.lockf(shared, fcntl.LOCK_SH | fcntl.LOCK_NB, 8, OFFSET)),
                "flock": attempt(lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB))[0]}
    def train(self, view, state, config, ctx): raise NotImplementedError
    def predict(self, predictor, images, ctx): raise NotImplementedError
    def features(self, predictor, images, ctx): raise NotImplementedError
    def save_predictor(self, predictor): return b"p"
    def load_predictor(self, data, info, ctx): return data

def sender(): return Probe("send")
def receiver(): return Probe("receive")
"""


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory) -> Path:
    assert shutil.which("bwrap"), "bubblewrap is not installed: apt-get install bubblewrap"
    folder = tmp_path_factory.mktemp("seccomp-probe")
    (folder / "nevis_lock_probe.py").write_text(LEARNER_SOURCE)
    return folder


def _held_here(path: str) -> int:
    """The lock type another process holds at the sender's range, seen from outside any filter."""
    fd = os.open(path, os.O_RDONLY)
    try:
        found = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 4242, 8, 0))
    finally:
        os.close(fd)
    return struct.unpack("hhqqi4x", found)[0]


def test_bwrap_is_given_the_filter_by_descriptor() -> None:
    launch = host_launch(sandbox="bwrap")
    try:
        argv = list(launch.argv)
        assert len(launch.pass_fds) == 1 and argv[argv.index("--seccomp") + 1] == str(launch.pass_fds[0])
        assert argv.index("--seccomp") < len(argv) - argv[::-1].index("--") - 1  # a bwrap option
        assert os.pread(launch.pass_fds[0], 8, 0)  # the program, readable from its start
    finally:
        launch.close_fds()


def test_keyctl_fails_in_a_host_and_a_lock_carries_nothing_to_the_next(probe_dir) -> None:
    spec = HostSpec("nevis_lock_probe:sender", import_paths=(str(probe_dir),), sandbox="bwrap")
    with LearnerHost(spec) as sending:
        sent = pickle.loads(describe(sending).init_state)
        assert sent["keyctl"] == errno.EPERM
        assert sent["ofd"][0] == sent["posix"][0] == errno.ENOLCK and sent["flock"] == errno.ENOSYS
        assert _held_here(sent["file"]) == fcntl.F_UNLCK  # the sender holds no lock on the shared file
        receiver = HostSpec("nevis_lock_probe:receiver", import_paths=(str(probe_dir),), sandbox="bwrap")
        with LearnerHost(receiver) as receiving:
            got = pickle.loads(describe(receiving).init_state)
    assert got["file"] == sent["file"]
    assert got["ofd"] == (errno.ENOLCK, None)  # F_OFD_GETLK reveals nothing, not even "unlocked"
