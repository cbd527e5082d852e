"""Learners that try to talk to another learner host of the same node (issue 44, finding 4).

- ``lock_signaller``: while predicting (in the run's evaluation host, which sees the test
  images), encodes the images' count and size as an open-file-description lock on the stdlib's
  ``os.py``, a read-only file every host binds, and keeps it; when it next trains (in another
  host) it asks the kernel which lock covers that file, and records what it learned in
  ``state["obtained"]``, with whether ``keyctl`` answered (x86_64 call number).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct

import numpy as np
from nevis_test_learners import NearestMeanLearner

from workers.learners.protocol import TrainOutput

FLOCK = "hhqqi4x"  # struct flock on x86_64: type, whence, start, len, pid


class LockSignaller(NearestMeanLearner):
    """Sends through file locks from the predicting host; reads them back in a training host."""

    name = "lock-signaller"
    held: list[int] = []  # descriptors kept open: a lock lives as long as its open file

    def train(self, view, state, config, ctx):
        shared = os.open(os.__file__, os.O_RDONLY)
        obtained = {}
        try:
            query = struct.pack(FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0)  # the whole file
            seen = struct.unpack(FLOCK, fcntl.fcntl(shared, fcntl.F_OFD_GETLK, query))
            if seen[0] != fcntl.F_UNLCK:
                obtained["lock_from_another_host"] = [seen[2], seen[3]]
        except OSError:
            pass
        finally:
            os.close(shared)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(250, 0, ctypes.c_ulong(0xFFFFFFFD), 0) != -1:  # x86_64 keyctl: the session keyring
            obtained["keyctl"] = "answered"
        out = super().train(view, state, config, ctx)
        return TrainOutput(predictor=out.predictor, state={**out.state, "obtained": obtained})

    def predict(self, predictor, images, ctx):
        shared = os.open(os.__file__, os.O_RDONLY)
        self.held.append(shared)
        try:  # 64 bits per lock: start 4096 + the count of test images, length their pixels per image
            lock = struct.pack(FLOCK, fcntl.F_RDLCK, 0, 4096 + len(images), int(np.prod(images.shape[1:])), 0)
            fcntl.fcntl(shared, fcntl.F_OFD_SETLK, lock)
        except OSError:
            pass
        return super().predict(predictor, images, ctx)


def lock_signaller() -> LockSignaller:
    return LockSignaller()
