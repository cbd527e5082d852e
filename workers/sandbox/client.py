"""Harness code's side of a learner host: start it in its sandbox, send requests, read replies.

:class:`LearnerHost` owns one host process and its pipes; the learner protocol's calls that
harness code makes on top of it (``describe``, ``predict``, the probe pool's
:class:`~workers.sandbox.learner_calls.SandboxedLearner`) are in :mod:`workers.sandbox.learner_calls`.
Everything that comes back is checked here as untrusted data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from services.core.errors import LearnerError
from workers.sandbox import messages, ops, wire
from workers.sandbox.cgroup import CgroupLimits, create_host_cgroup
from workers.sandbox.launch import host_launch
from workers.sandbox.limits import HostLimits
from workers.sandbox.log_ring import LogRing, drain
from workers.sandbox.messages import Limits
from workers.sandbox.metering.usage import tree_cpu_seconds
from workers.sandbox.ops import Op, Reply, op_of
from workers.sandbox.rank_net import RankSlot
from workers.sandbox.replies import BrokenReply, error_of, read_checked

OnMessage = Callable[[dict[str, Any], list[wire.Part]], tuple[dict[str, Any], list[wire.Part]] | None]
"""Answers a host's checked message (its ``op`` a :class:`~workers.sandbox.ops.HostOp`), or None."""
STOP_GRACE_S = 5.0
DECLARATION_OPS = (Op.HELLO, Op.DESCRIBE)


class LearnerHostDied(LearnerError):
    """The learner host process ended in the middle of a request (crash, out of memory, kill)."""


class HostDeadlineError(LearnerHostDied):
    """The learner host kept harness code waiting past a deadline, and was killed for it."""


@dataclass(frozen=True)
class HostSpec:
    """Which learner a host loads and how it is sandboxed (picklable: it crosses Ray)."""

    learner_spec: str
    import_paths: tuple[str, ...] = ()
    sandbox: str = "auto"
    threads: int = 1
    gpu: bool = False
    limits: HostLimits = field(default_factory=HostLimits)
    rank: RankSlot | None = None  # a rank of a multi-worker trial (workers/sandbox/rank_net.py)


class LearnerHost:
    """One learner host process: requests go in one at a time, replies come back in order.

    The host runs in a control group of its own where the machine allows one (memory and
    process caps, CPU time counted by the kernel), under rlimits and sized tmpfs folders
    (:class:`~workers.sandbox.limits.HostLimits`); every request has a deadline, past which
    the host is killed and the call raises :class:`HostDeadlineError`.

    The host's output (the learner's prints, on its stderr) is drained into :attr:`log`, a
    bounded ring (``limits.log_bytes``), as are the tracebacks of the calls that failed, so a
    trial's log is ``host.log_since(mark)``; nothing the learner prints reaches the harness's
    own output.
    """

    def __init__(self, spec: HostSpec, *, warm: bool = False) -> None:
        """Start the host and load the learner; with ``warm``, the host also imports what a
        first training step or a first metered forward pass needs before it answers
        (:func:`~workers.sandbox.host_start.warm_up`), for hosts started ahead of their first call."""
        self.spec = spec
        self.data_key: str | None = None  # the task data the host holds (see trainer.trial)
        self._cgroup = create_host_cgroup(
            CgroupLimits(
                memory_bytes=spec.limits.memory_bytes or None,
                pids=spec.limits.pids or None,
                cpus=spec.limits.cpus or None,
            )
        )
        launch = host_launch(
            sandbox=spec.sandbox,
            import_paths=spec.import_paths,
            threads=spec.threads,
            gpu=spec.gpu,
            limits=spec.limits,
            cgroup=self._cgroup,
            rank=spec.rank,
        )
        self.sandbox = launch.sandbox
        # Unsandboxed, the host's home and TMPDIR is a folder of its own on the machine's disk:
        # removed when the host closes, so nothing it wrote (evaluation images included) outlives it.
        self._scratch = launch.cwd if launch.sandbox == "none" else None
        self._expired: str | None = None
        self.log = LogRing(max(spec.limits.log_bytes, 1024))
        try:
            self._proc = subprocess.Popen(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd,
                pass_fds=launch.pass_fds,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        finally:
            launch.close_fds()  # bwrap holds its own copy of the seccomp program's descriptor
        self._drain = drain(_own_fd(self._proc), self.log)
        self._lock = threading.Lock()
        try:
            with self._watchdog(str(Op.HELLO)):
                try:
                    wire.send(self._proc.stdin, ops.Hello(spec.learner_spec, spec.threads, warm).header())
                except (BrokenPipeError, OSError):
                    raise self._died() from None
                header, parts = self._receive()
            if op_of(header) != Reply.READY:
                loading = f"learner {spec.learner_spec!r} could not be loaded"
                raise self._error(header, parts, Op.HELLO, loading)
            self.device: str = self._checked(lambda: read_checked(messages.READY, header, parts))["device"]
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    def cpu_seconds(self) -> float | None:
        """CPU time the host's processes have used so far, as the kernel counts it (the
        control group's, or the live process tree's from ``/proc``); ``None`` if unknown."""
        if self._cgroup is not None:
            used = self._cgroup.cpu_seconds()
            if used is not None:
                return used
        return tree_cpu_seconds(self._proc.pid) if self._proc.poll() is None else None

    def peak_memory_bytes(self) -> int | None:
        """The host's memory high-water mark, where its control group keeps one."""
        return None if self._cgroup is None else self._cgroup.peak_memory_bytes()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def call(
        self,
        request: ops.Request,
        parts: Sequence[wire.Part] = (),
        *,
        on_message: OnMessage | None = None,
        announce: wire.Announce | None = None,
        limits: Limits = Limits(),
    ) -> tuple[dict[str, Any], list[wire.Part]]:
        """Send a request and return its result, read through its declaration
        (:func:`~workers.sandbox.messages.read_reply`, with ``limits``), and its parts;
        ``on_message`` answers the host's own requests (checkpoints, past train splits) that
        arrive before it, each read through its declaration too (``read_request``);
        ``announce`` refuses a frame over its message's caps before its parts are read.

        Raises:
            LearnerError: the learner raised (its type and message are in the text).
            LearnerHostDied: the host process ended.
            WireError: a frame broke its declaration (the host is killed); the result's is a
                :class:`BrokenReply`.
        """
        with self._lock, self._watchdog(str(request.op)) as kick:
            try:
                wire.send(self._proc.stdin, request.header(), parts)
            except (BrokenPipeError, OSError):
                raise self._died() from None
            while True:
                reply, out = self._receive(announce)
                kick()  # any frame is a sign of life: the silence deadline starts again
                op = op_of(reply)
                if op == Reply.RESULT:
                    return self._checked(lambda: read_checked(request.op, reply, out, limits)), out  # noqa: B023
                if op == Reply.ERROR:
                    raise self._error(reply, out, request.op, f"{request.op} failed")
                message = self._checked(lambda: messages.read_request(reply, out, limits))  # noqa: B023
                if on_message is None:  # the host waits for an answer no one will give: out of step
                    self._distrust()
                    raise LearnerError(f"the learner host sent an unexpected {str(op)!r} frame")
                answer = on_message(message, out)
                if answer is not None:
                    wire.send(self._proc.stdin, *answer)

    def settle_log(self) -> None:
        """Wait (at most a second) until what the host wrote so far is in :attr:`log`: a reply
        can overtake the prints that came before it."""
        self._drain.settle()

    def log_since(self, mark: int) -> bytes:
        """What the host wrote after position ``mark`` of :attr:`log`, its last prints included."""
        self.settle_log()
        return self.log.since(mark)

    def _checked(self, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """What ``read`` makes of a frame through its declaration; a frame that breaks it kills
        the host (a hostile one may be followed by the real one: the pipe is out of step)."""
        try:
            return read()
        except wire.WireError:
            if self._proc.stdout is not None:
                self._proc.stdout.close()  # what follows in the pipe answers nothing (wire.receive's rule)
            self._distrust()
            raise

    def _error(self, header: dict[str, Any], parts: list[wire.Part], op: str, what: str) -> Exception:
        """A failed call's error, checked, and put in the log with its traceback, after the
        prints that came before it."""
        reply = self._checked(lambda: read_checked(messages.ERROR, header, parts))
        self._drain.settle()
        kind, message, trace = reply["error"], reply["message"], reply["traceback"]
        self.log.write(f"\n[nevis] {op[:40]} failed: {kind}: {message}\n{trace}".encode("utf-8", "replace"))
        return error_of(reply, what)

    def close(self) -> None:
        """Ask the host to exit; kill it if it does not; remove its control group and, when
        unsandboxed, its scratch folder."""
        if self._proc.poll() is None:
            try:
                wire.send(self._proc.stdin, ops.Bye().header())
                self._proc.wait(timeout=STOP_GRACE_S)
            except (OSError, wire.WireError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._drain.join(1.0)  # the host's last words, unless a stray child holds the pipe
        if self._cgroup is not None:
            self._cgroup.remove()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    @contextmanager
    def _watchdog(self, op: str) -> Iterator[Callable[[], None]]:
        """Kill the host if it sends nothing for the operation's deadline (start-up and the
        declaration: ``declare_deadline_s``; everything else: ``silence_deadline_s`` between
        frames); yields a function that restarts the clock."""
        limits = self.spec.limits
        seconds = limits.declare_deadline_s if op in DECLARATION_OPS else limits.silence_deadline_s
        which = "declaration" if op in DECLARATION_OPS else "silence"
        timer: list[threading.Timer] = []

        def expire() -> None:
            self._expired = f"{op!r} sent nothing for {seconds:g} s (the {which} deadline)"
            self._proc.kill()

        def kick() -> None:
            if timer:
                timer.pop().cancel()
            armed = threading.Timer(seconds, expire)
            armed.daemon = True
            armed.start()
            timer.append(armed)

        kick()
        try:
            yield kick
        finally:
            if timer:
                timer.pop().cancel()

    def _receive(self, announce: wire.Announce | None = None) -> tuple[dict[str, Any], list[wire.Part]]:
        try:
            return wire.receive(self._proc.stdout, announce=announce)
        except wire.WireError as exc:
            if self._proc.poll() is not None or "closed the pipe" in str(exc):
                raise self._died() from None
            self._distrust()  # a host that breaks the format is not trusted further
            raise

    def _distrust(self) -> None:
        """Kill a host that broke the protocol, and wait (briefly) until it is gone, so that
        :attr:`alive` says so as soon as the call that found it out raises."""
        self._proc.kill()
        try:
            self._proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass  # reaped by close()

    def _died(self) -> LearnerHostDied:
        try:
            code = self._proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        if self._expired is not None:
            return HostDeadlineError(f"the learner host of {self.spec.learner_spec!r} was killed: {self._expired}")
        return LearnerHostDied(f"the learner host of {self.spec.learner_spec!r} ended (exit code {code})")

    def __enter__(self) -> LearnerHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _own_fd(proc: subprocess.Popen) -> int:
    """The host's stderr as a file descriptor of the drain's own (the pipe's file object closed)."""
    assert proc.stderr is not None
    fd = os.dup(proc.stderr.fileno())
    proc.stderr.close()
    proc.stderr = None
    return fd


__all__ = ["BrokenReply", "HostDeadlineError", "HostSpec", "LearnerHost", "LearnerHostDied"]
