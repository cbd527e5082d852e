"""The learner hosts' seccomp filter: compiled to BPF with libseccomp, applied by bubblewrap.

bubblewrap loads the program (``--seccomp FD``) after its own set-up, just before it starts
the host, so the filter binds learner code and nothing of bwrap's. Everything is allowed
except the calls below, which fail with an errno (never a kill, so a library that probes a
call sees an ordinary error):

- the calls the chart's pod profile denies (``helm/nevis/files/seccomp/learner-v1.json``:
  keyrings, ptrace, io_uring, bpf, perf, kernel modules, ...) with ``EPERM``; a test holds
  the two lists together;
- what only bwrap's own set-up needs (mounts, namespaces), with ``EPERM``;
- every way one host could signal another through a file both of them can open (issue 44,
  finding 4): ``flock`` fails with ``ENOSYS`` (the ``filelock`` package then falls back to
  lock files, so ``torch.compile``'s cache still works), record and OFD locks through
  ``fcntl``/``fcntl64`` with ``ENOLCK``, leases and directory notices with ``EPERM``, and
  inotify/fanotify (a watch sees another host open a shared file) with ``EPERM``.

The filter covers the native architecture and its compat ABIs (x86_64: i386 and x32;
aarch64: arm), so ``int 0x80`` or an x32 call number reaches the same rules; a call from any
other ABI kills the thread (libseccomp's default for a foreign architecture).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
from collections.abc import Iterable

from services.core.errors import ConfigError

LIBRARY = "libseccomp.so.2"
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
FCNTL_CMD_ARG = 1
LOW_32 = 0xFFFFFFFF  # the kernel reads fcntl's cmd as an unsigned int: high bits must not slip past

# The chart's pod profile, call for call (tests/unit/sandbox/test_seccomp.py compares them).
POD_PROFILE_DENIED = (
    "_sysctl",
    "acct",
    "add_key",
    "afs_syscall",
    "bdflush",
    "bpf",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_settime",
    "clock_settime64",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "migrate_pages",
    "mount_setattr",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "query_module",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "set_mempolicy",
    "setns",
    "settimeofday",
    "stime",
    "swapoff",
    "swapon",
    "sysfs",
    "syslog",
    "uselib",
    "userfaultfd",
    "ustat",
    "vhangup",
    "vm86",
    "vm86old",
)
# Allowed in pods because bwrap itself needs them there; nothing inside a host does.
HOST_ONLY_DENIED = (
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "unshare",
    "chroot",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
)
FLOCK_CALLS = ("flock",)
FCNTL_CALLS = ("fcntl", "fcntl64")
# F_GETLK/F_SETLK/F_SETLKW, their 32-bit "64" forms, and the open-file-description locks.
FCNTL_LOCK_CMDS = (5, 6, 7, 12, 13, 14, 36, 37, 38)
FCNTL_OTHER_CMDS = (1024, 1026)  # F_SETLEASE (a lease break is a signal), F_NOTIFY (dnotify)
COMPAT_ARCHES = {"x86_64": ("x86", "x32"), "aarch64": ("arm",)}
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

log = logging.getLogger(__name__)


class SeccompUnavailable(RuntimeError):
    """libseccomp could not be loaded, or refused to build the filter."""


class _ArgCmp(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``: one comparison of one syscall argument."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _errno_action(code: int) -> int:
    """``SCMP_ACT_ERRNO(code)``: the call returns -1 with ``errno = code``."""
    return 0x00050000 | (code & 0xFFFF)


def _library(name: str) -> ctypes.CDLL:
    """libseccomp's C API, typed (the calls used here are in every release since 2.2)."""
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"cannot load {name}: {exc}") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _check(result: int, what: str) -> None:
    if result < 0:
        raise SeccompUnavailable(f"libseccomp refused {what}: {os.strerror(-result)}")


def _add(
    lib: ctypes.CDLL,
    ctx: int,
    action: int,
    names: Iterable[str],
    conditions: Iterable[tuple[int, int]] = ((0, 0),),
    *,
    arg: int = 0,
) -> None:
    """Deny each call in ``names`` (unknown to this libseccomp: skipped), once per
    ``(mask, value)`` condition on argument ``arg`` (``(0, 0)`` matches every call)."""
    for name in names:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number == -1:  # __NR_SCMP_ERROR: no architecture libseccomp knows has this call
            continue
        for mask, value in conditions:
            cmp = _ArgCmp(arg, SCMP_CMP_MASKED_EQ, mask, value)
            count = 0 if mask == 0 else 1
            _check(
                lib.seccomp_rule_add_array(ctx, action, number, count, ctypes.byref(cmp) if count else None),
                f"a rule for {name}",
            )


def compile_filter(library: str = LIBRARY) -> bytes:
    """The learner filter as a classic BPF program (what ``bwrap --seccomp`` reads).

    Raises:
        SeccompUnavailable: libseccomp is missing, or cannot build the filter for this machine.
    """
    lib = _library(library)
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        native = lib.seccomp_arch_native()
        native_name = os.uname().machine
        for compat in COMPAT_ARCHES.get(native_name, ()):
            token = lib.seccomp_arch_resolve_name(compat.encode())
            if token and token != native:
                _check(lib.seccomp_arch_add(ctx, token), f"the {compat} architecture")
        denied = _errno_action(errno.EPERM)
        _add(lib, ctx, denied, (*POD_PROFILE_DENIED, *HOST_ONLY_DENIED))
        _add(lib, ctx, _errno_action(errno.ENOSYS), FLOCK_CALLS)
        _add(
            lib,
            ctx,
            _errno_action(errno.ENOLCK),
            FCNTL_CALLS,
            [(LOW_32, cmd) for cmd in FCNTL_LOCK_CMDS],
            arg=FCNTL_CMD_ARG,
        )
        _add(lib, ctx, denied, FCNTL_CALLS, [(LOW_32, cmd) for cmd in FCNTL_OTHER_CMDS], arg=FCNTL_CMD_ARG)
        fd = os.memfd_create("nevis-seccomp-export", os.MFD_CLOEXEC)
        try:
            _check(lib.seccomp_export_bpf(ctx, fd), "exporting the filter")
            size = os.lseek(fd, 0, os.SEEK_END)
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


@functools.cache
def _cached_filter() -> bytes | SeccompUnavailable:
    """One compilation per process; the failure is kept too, so it is warned about once."""
    try:
        return compile_filter(LIBRARY)
    except SeccompUnavailable as exc:
        return exc


def host_filter(*, production: bool | None = None) -> bytes | None:
    """The BPF program for a host about to start, or ``None`` where it cannot be built
    outside production (logged once per process).

    Args:
        production: whether missing libseccomp is fatal; default: ``NEVIS_ENVIRONMENT`` is
            ``production`` (a worker knob the backends pass to every worker).

    Raises:
        ConfigError: in production, where the filter cannot be built.
    """
    program = _cached_filter()
    if isinstance(program, bytes):
        return program
    if production is None:
        production = os.environ.get("NEVIS_ENVIRONMENT") == "production"
    if production:
        raise ConfigError(
            f"Learner hosts need a seccomp filter and it cannot be built here ({program}): "
            "install libseccomp (apt-get install libseccomp2)."
        )
    _warn_once(str(program))
    return None


@functools.cache
def _warn_once(reason: str) -> None:
    log.warning(
        "Learner hosts run without a seccomp filter (%s): install libseccomp "
        "(apt-get install libseccomp2); production refuses to start hosts without it.",
        reason,
    )


def forget_compiled_filter() -> None:
    """Compile (and warn) afresh on the next start: for a process whose library setting changed."""
    _cached_filter.cache_clear()
    _warn_once.cache_clear()


class _SockFprog(ctypes.Structure):
    """The kernel's ``struct sock_fprog``: a classic BPF program's length (in instructions) and address."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_to_this_thread(program: bytes) -> None:
    """Load ``program`` into the calling thread for good, as bwrap does before it starts a host
    (threads started afterwards inherit it; ones already running do not): for checks of the
    filter where no bubblewrap runs (its unit test, ``bench/seccomp_check.py`` on a GPU machine).

    Raises:
        OSError: the kernel refused the program.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(code))
    zero = ctypes.c_ulong(0)
    if (
        libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero) != 0
        or libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), zero, zero) != 0
    ):
        raise OSError(ctypes.get_errno(), f"the kernel refused the seccomp program: {os.strerror(ctypes.get_errno())}")


def program_fd(program: bytes) -> int:
    """A private in-memory file holding ``program``, read from its start by bwrap; close-on-exec
    here (a ``Popen`` passes it with ``pass_fds``), to be closed by the caller after the start."""
    fd = os.memfd_create("nevis-seccomp", os.MFD_CLOEXEC)
    try:
        view = memoryview(program)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


__all__ = [
    "FCNTL_LOCK_CMDS",
    "HOST_ONLY_DENIED",
    "POD_PROFILE_DENIED",
    "SeccompUnavailable",
    "apply_to_this_thread",
    "compile_filter",
    "forget_compiled_filter",
    "host_filter",
    "program_fd",
]
