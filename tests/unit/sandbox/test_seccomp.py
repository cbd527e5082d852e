"""The learner filter itself: it compiles here, keeps the chart's profile, and denies what it says.

The program is loaded into a child Python (``apply_to_this_thread``: what bwrap does before it
starts a host), which then tries each call: the same interpreter without the filter is the control.
Call numbers are x86_64's, this project's machines' and CI's.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.core.errors import ConfigError
from workers.sandbox import seccomp
from workers.sandbox.seccomp import POD_PROFILE_DENIED, compile_filter, host_filter

CHART_PROFILE = Path(__file__).resolve().parents[3] / "helm" / "nevis" / "files" / "seccomp" / "learner-v1.json"

PROBE = r"""
import ctypes, fcntl, json, mmap, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
if len(sys.argv) > 1:
    from workers.sandbox.seccomp import apply_to_this_thread
    apply_to_this_thread(open(sys.argv[1], "rb").read())

def raw(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) for a in args])
    return ctypes.get_errno() if result == -1 else 0

def py(fn):
    try:
        fn()
        return 0
    except OSError as exc:
        return exc.errno

def i386_keyctl():  # int 0x80 from this 64-bit process: the i386 table, keyctl = 288
    code = bytes.fromhex("53" "b820010000" "bb00000000" "b9fdffffff" "31d2" "cd80" "5b" "c3")
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    result = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    return -result if result < 0 else 0

shared = os.open(os.__file__, os.O_RDONLY)
lock = struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0)
query = ctypes.create_string_buffer(lock, len(lock))
print(json.dumps({
    "keyctl": raw(250, 0, 0xFFFFFFFD, 0),
    "io_uring_setup": raw(425, 1, 0),
    "ptrace": raw(101, 0x4206, os.getppid(), 0, 0),
    "unshare": raw(272, 0x20000000),
    "inotify_init1": raw(294, 0),
    "keyctl_i386": i386_keyctl(),
    "keyctl_x32": raw((1 << 30) | 250, 0, 0xFFFFFFFD, 0),  # x32's call numbers (this kernel may lack the ABI)
    "flock": py(lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    "ofd_setlk": py(lambda: fcntl.fcntl(shared, fcntl.F_OFD_SETLK, lock)),
    "ofd_getlk": py(lambda: fcntl.fcntl(shared, fcntl.F_OFD_GETLK, lock)),
    "setlk": py(lambda: fcntl.lockf(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
    "ofd_getlk_high_bits": raw(72, shared, (1 << 32) | fcntl.F_OFD_GETLK, ctypes.addressof(query)),
    "getfl": py(lambda: fcntl.fcntl(shared, fcntl.F_GETFL)),
    "read": py(lambda: os.pread(shared, 16, 0)),
}))
"""


@pytest.fixture(scope="module")
def program() -> bytes:
    return compile_filter()


def _probe(program_file: Path | None) -> dict[str, int]:
    argv = [sys.executable, "-c", PROBE, *([str(program_file)] if program_file else [])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_the_filter_denies_with_errnos_and_lets_the_rest_through(program, tmp_path) -> None:
    (tmp_path / "filter.bpf").write_bytes(program)
    outside, inside = _probe(None), _probe(tmp_path / "filter.bpf")
    assert outside["keyctl"] == 0 and outside["keyctl_i386"] == 0 and outside["ofd_getlk_high_bits"] == 0
    assert outside["flock"] == outside["ofd_setlk"] == 0  # the control: each call works without it
    eperm = {
        name: inside[name]
        for name in ("keyctl", "io_uring_setup", "ptrace", "unshare", "inotify_init1", "keyctl_i386", "keyctl_x32")
    }
    assert eperm == dict.fromkeys(eperm, errno.EPERM)
    assert inside["flock"] == errno.ENOSYS  # filelock then falls back to lock files
    locks = {name: inside[name] for name in ("ofd_setlk", "ofd_getlk", "setlk", "ofd_getlk_high_bits")}
    assert locks == dict.fromkeys(locks, errno.ENOLCK)
    assert inside["getfl"] == 0 and inside["read"] == 0


def test_the_host_filter_keeps_every_call_the_pods_profile_denies() -> None:
    profile = json.loads(CHART_PROFILE.read_text())
    charted = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for name in rule["names"]}
    assert charted == set(POD_PROFILE_DENIED)
    assert {"SCMP_ARCH_X86", "SCMP_ARCH_X32"} <= set(profile["architectures"])


def test_without_libseccomp_production_refuses_and_development_warns_once(monkeypatch, caplog) -> None:
    monkeypatch.setattr(seccomp, "LIBRARY", "libseccomp-missing.so.0")
    seccomp.forget_compiled_filter()
    try:
        with pytest.raises(ConfigError, match=r"apt-get install libseccomp2"):
            host_filter(production=True)
        monkeypatch.setenv("NEVIS_ENVIRONMENT", "production")
        with pytest.raises(ConfigError, match="seccomp filter"):
            host_filter()
        monkeypatch.setenv("NEVIS_ENVIRONMENT", "development")
        with caplog.at_level("WARNING", logger=seccomp.__name__):
            assert host_filter() is None and host_filter() is None
        assert [r.message.count("without a seccomp filter") for r in caplog.records] == [1]
    finally:
        seccomp.forget_compiled_filter()
