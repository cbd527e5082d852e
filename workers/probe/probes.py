"""The probe kinds and the one call that fits them all on one set of features.

Contract: :func:`fit_probes` prepares the fold layout and per-fold statistics ONCE and
reuses them for every requested kind; each kind fits its k folds together. Kinds are looked
up by name in :data:`PROBES` (an unknown name gets a "did you mean" error); a new kind is a
function with the :class:`ProbeFit` signature added there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Protocol

import numpy as np
import torch

from services.core.errors import UnknownNameError, unknown_name_message
from workers.probe.fit_common import FoldData, FoldScores, prepare
from workers.probe.folds import fold_ids
from workers.probe.linear import fit_linear
from workers.probe.mlp import fit_mlp
from workers.probe.settings import ProbeSettings


class ProbeFit(Protocol):
    """Fit every fold of one probe kind and return its held-out scores."""

    def __call__(self, data: FoldData, settings: ProbeSettings) -> FoldScores: ...


def _linear(data: FoldData, settings: ProbeSettings) -> FoldScores:
    return fit_linear(data, l2=settings.linear_l2, max_iter=settings.linear_max_iter)


def _mlp(depth: int) -> ProbeFit:
    def fit(data: FoldData, settings: ProbeSettings) -> FoldScores:
        return fit_mlp(data, depth=depth, hidden=settings.mlp_hidden, steps=settings.mlp_steps,
                       lr=settings.mlp_lr, weight_decay=settings.mlp_weight_decay,
                       seed=settings.seed)

    return fit


PROBES: Mapping[str, ProbeFit] = MappingProxyType(
    {"linear": _linear, "mlp2": _mlp(2), "mlp3": _mlp(3)}
)


def get_probe(kind: str) -> ProbeFit:
    """The fit function of probe kind ``kind``."""
    try:
        return PROBES[kind]
    except KeyError:
        raise UnknownNameError(unknown_name_message("probe kind", kind, PROBES)) from None


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


def fit_probes(features: np.ndarray, labels: np.ndarray, *, num_classes: int,
               settings: ProbeSettings) -> dict[str, FoldScores]:
    """Held-out scores of every probe kind of ``settings`` on one set of features.

    Args:
        features: (N, d) features of one checkpoint on one target task.
        labels: int labels (N,) or multi-hot (N, C).
        num_classes: C.
        settings: Folds, kinds and probe hyper-parameters.

    Returns:
        ``{kind: FoldScores}`` in the order of ``settings.kinds``.
    """
    ids = fold_ids(labels, settings.folds, seed=settings.seed)
    width = max(num_classes, settings.mlp_hidden if settings.kinds != ("linear",) else 0)
    work = features.shape[0] * features.shape[1] * settings.folds * width
    with _threads_at_most(1 if work < SINGLE_THREAD_WORK else torch.get_num_threads()):
        data = prepare(features, labels, ids, settings.folds, num_classes)
        return {kind: get_probe(kind)(data, settings) for kind in settings.kinds}


__all__ = ["PROBES", "SINGLE_THREAD_WORK", "ProbeFit", "fit_probes", "get_probe"]
