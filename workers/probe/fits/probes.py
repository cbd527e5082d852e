"""The probe kinds and the one call that fits them all on one set of features.

Contract: :func:`fit_probes` prepares the fold layout and per-fold statistics ONCE and
reuses them for every requested kind; each kind fits its k folds together. Kinds are looked
up by name in :data:`PROBES` (an unknown name gets a "did you mean" error); a new kind is a
function with the :class:`ProbeFit` signature added there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import numpy as np
import torch

from services.core.registry import Registry
from services.store.probes.settings import ProbeSettings
from workers.probe.fits.fit_common import FoldData, FoldScores, fit_device, prepare, split_groups
from workers.probe.fits.fit_flops import counted
from workers.probe.fits.folds import fold_ids
from workers.probe.fits.linear import fit_linear
from workers.probe.fits.mlp import fit_mlp


class ProbeFit(Protocol):
    """Fit every fold of one probe kind and return its held-out scores."""

    def __call__(self, data: FoldData, settings: ProbeSettings) -> FoldScores: ...


def _linear(data: FoldData, settings: ProbeSettings) -> FoldScores:
    return fit_linear(data, l2=settings.linear_l2, max_iter=settings.linear_max_iter)


def _mlp(depth: int) -> ProbeFit:
    def fit(data: FoldData, settings: ProbeSettings) -> FoldScores:
        return fit_mlp(
            data,
            depth=depth,
            hidden=settings.mlp_hidden,
            steps=settings.mlp_steps,
            lr=settings.mlp_lr,
            weight_decay=settings.mlp_weight_decay,
            seed=settings.seed,
        )

    return fit


PROBES: Registry[ProbeFit] = Registry("probe kind")
"""Probe kind → fit; each name is also in ``PROBE_KIND_NAMES`` of the store's probe tables
(their CHECK reads it; a unit test keeps the two equal)."""
PROBES.register("linear", _linear)
PROBES.register("mlp2", _mlp(2))
PROBES.register("mlp3", _mlp(3))


def get_probe(kind: str) -> ProbeFit:
    """The fit function of probe kind ``kind`` (an unknown kind: UnknownNameError, did you mean)."""
    return PROBES.get(kind)


# Below this much work (examples × features × folds × width) a fit runs on one thread: the
# tensors are small, and waiting on busy cores costs far more than the parallelism gains
# (measured: a 400 × 2 MLP probe took 60× longer on two threads of a loaded machine).
SINGLE_THREAD_WORK = 5e7


@contextmanager
def _threads_at_most(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    if n < before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n < before:
            torch.set_num_threads(before)


def fit_probes(
    features: np.ndarray, labels: np.ndarray, *, num_classes: int, settings: ProbeSettings
) -> dict[str, FoldScores]:
    """Held-out scores of every probe kind of ``settings`` on one set of features.

    Args:
        features: (N, d) features of one checkpoint on one target task.
        labels: int labels (N,) or multi-hot (N, C).
        num_classes: C.
        settings: Folds, kinds and probe hyper-parameters.

    Returns:
        ``{kind: FoldScores}`` in the order of ``settings.kinds``.
    """
    return fit_probes_batched(features[None], labels, num_classes=num_classes, settings=settings)[0]


def fit_probes_batched(
    features: np.ndarray, labels: np.ndarray, *, num_classes: int, settings: ProbeSettings
) -> list[dict[str, FoldScores]]:
    """:func:`fit_probes` for G feature sets of the same examples (G checkpoints of a trial),
    fitted as one batch: (G, N, d) in, one ``{kind: FoldScores}`` per set out. Every set
    gets the same folds and start, so its scores do not depend on the others (up to the
    shared stopping rule of the linear probe's L-BFGS, which reaches the same optimum)."""
    ids = fold_ids(labels, settings.folds, seed=settings.seed)
    width = max(num_classes, settings.mlp_hidden if settings.kinds != ("linear",) else 0)
    # Per feature set, as for one checkpoint: a batch of G sets on two threads of a loaded
    # machine was measured 3x slower than on one (6 checkpoints, 400 × 128, 10 classes).
    work = features.shape[1] * features.shape[2] * settings.folds * width
    with _threads_at_most(1 if work < SINGLE_THREAD_WORK else torch.get_num_threads()):
        with counted():
            data = prepare(features, labels, ids, settings.folds, num_classes, device=fit_device())
        fits = {kind: split_groups(get_probe(kind)(data, settings), data.groups) for kind in settings.kinds}
    return [{kind: fits[kind][g] for kind in settings.kinds} for g in range(data.groups)]


__all__ = ["PROBES", "SINGLE_THREAD_WORK", "ProbeFit", "fit_probes", "fit_probes_batched", "get_probe"]
