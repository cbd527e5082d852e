"""Learners that try to make the harness read or compute more than their task needs (issue 44):

- ``rung_forger``: under ``--scheduler proxy``, writes a rung report of its own claiming
  4096 × 4096 float64 features (128 MiB) and sends none of the bytes: a harness that read
  before checking would wait out its silence deadline, one that computed LiDAR on it would
  spend ~47 s a rung;
- ``state_bloater``: hands back a learner state larger than ``NEVIS_HOST_STATE_MB``.

Both must be refused (their trial fails) before the harness reads what they claim.
"""

from __future__ import annotations

import io
import json
import os
import struct

import numpy as np
from nevis_test_learners import NearestMeanLearner

from workers.learners.protocol import TrainOutput

BLOAT_BYTES = 3 * 2**20
"""The state the bloater hands back: over a 2 MiB ``NEVIS_HOST_STATE_MB``."""


class RungForger(NearestMeanLearner):
    """At its first rung, writes a forged rung frame to its host's pipes, then trains on."""

    name = "rung-forger"

    def train(self, view, state, config, ctx):
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (4096, 4096)})
        npy = header.getvalue()
        step = min(ctx.rung_at, default=1)
        head = json.dumps({"op": "rung", "step": step, "parts": [["a", len(npy) + 4096 * 4096 * 8]]}).encode()
        frame = struct.pack(">Q", len(head)) + head + npy  # and not one byte of the features
        for fd in range(3, 64):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, frame)
            except OSError:
                continue
        return super().train(view, state, config, ctx)


class StateBloater(NearestMeanLearner):
    """Trains honestly and hands back a state of :data:`BLOAT_BYTES` random bytes."""

    name = "state-bloater"

    def train(self, view, state, config, ctx):
        out = super().train(view, state, config, ctx)
        return TrainOutput(predictor=out.predictor, state={"obtained": {}, "blob": os.urandom(BLOAT_BYTES)})


def rung_forger() -> RungForger:
    return RungForger()


def state_bloater() -> StateBloater:
    return StateBloater()
