"""Stopping a learner host between calls, so that it computes only while harness code waits
on it: a thread the learner leaves running after a call burns nothing while the host is
idle (issue 44: compute outside a measured call).

Every process of the host's control group gets ``SIGSTOP``, which no process can catch,
ignore or answer; ``SIGCONT`` resumes them before the next request is sent or the host is
closed (:class:`PausingHost`). A stopped process still dies of ``SIGKILL`` (unlike a frozen
v1 cgroup's), so a host whose harness dies (bubblewrap's ``--die-with-parent``) ends as
before. The host's own processes cannot resume each other: none of them runs while it is
paused. Without a control group nothing is stopped (a process tree read from ``/proc`` can
lose a process and name a reused pid): idle compute is then charged to the next call.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.sandbox.cgroup import HostCgroup
from workers.sandbox.client import LearnerHost

ROUNDS = 8
"""How many times the process list is read while stopping it: a process forked just before
its parent stopped appears in the next reading."""


def group_pids(group: HostCgroup | None) -> set[int]:
    """The processes of a host's control group (none without one)."""
    if group is not None and not group.removed:
        for procs in group.procs_files():
            with contextlib.suppress(OSError, ValueError):
                return {int(line) for line in Path(procs).read_text().split()}
    return set()


def stop_host(pids: Callable[[], set[int]]) -> set[int]:
    """Stop every process ``pids`` lists, reading it again until no new one appears; returns
    the processes stopped (what :func:`resume_host` continues)."""
    stopped: set[int] = set()
    for _ in range(ROUNDS):
        fresh = pids() - stopped
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= fresh
    return stopped


def resume_host(stopped: set[int]) -> None:
    """Continue the processes :func:`stop_host` stopped."""
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)


class PausingHost(LearnerHost):
    """A learner host that :meth:`pause` stops until its next request or its close (the
    executors' hosts, which live for a run and wait between trials)."""

    _stopped: frozenset[int] = frozenset()

    def pause(self) -> None:
        """Stop the host's processes until the next request; nothing without a control group."""
        self._stopped = self._stopped | stop_host(lambda: group_pids(self._cgroup))

    @property
    def paused(self) -> bool:
        return bool(self._stopped)

    def resume(self) -> None:
        """Continue the host's processes, if paused."""
        stopped, self._stopped = self._stopped, frozenset()
        resume_host(set(stopped))

    def call(self, *args: Any, **kwargs: Any) -> Any:
        self.resume()
        return super().call(*args, **kwargs)

    def close(self) -> None:
        self.resume()
        super().close()


__all__ = ["PausingHost", "group_pids", "resume_host", "stop_host"]
