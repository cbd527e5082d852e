"""The linear probe's problem restated in each fold's training-row space, when features are
wider than a fold has training rows.

Why it is exact: fold f's objective is its training rows' mean loss of ``z·w + b`` plus
``l2/2·||w||²``, where ``z`` are the rows standardised by the fold's own statistics. Its
gradient in ``w`` is ``Zᵀr + l2·w`` (``Z`` the training rows, ``r`` their residuals), so
every stationary point, and every L-BFGS iterate started from 0, lies in the row space of
``Z``. With ``Q`` an orthonormal basis of that space, ``z·w = (Qᵀz)·(Qᵀw)`` and
``||w|| = ||Qᵀw||`` for every such ``w``: the problem over the ``n_f`` coordinates ``Qᵀz``
has the same optimum, the same penalty and the same held-out predictions.

Why it matters: whitening a fold costs a ``d × d`` eigendecomposition and every loss
evaluation a ``d × d`` product, so a learner whose features are raw pixels (``d`` = 12,288
at 64 px) or any width beyond the probe's examples paid minutes per checkpoint for a
problem of a few hundred unknowns per class.
"""

from __future__ import annotations

import torch

from workers.probe.fits.fit_common import FoldData

RANK_TOLERANCE = 1e-10  # eigenvalues of a fold's Gram matrix below this x its largest are null


def in_row_space(data: FoldData) -> FoldData | None:
    """``data`` with each member's features in its own training-row coordinates, or None when
    the features are no wider than the largest fold's training rows (nothing to gain).

    Each member becomes a group of its own (one fold per feature set), already centred and
    standardised: its statistics are 0 and 1, so the probe's standardisation is the identity.
    """
    width = int(data.counts.max())
    if data.dim <= width:
        return None
    per_group = data.folds // data.groups
    reduced = torch.zeros((data.folds, data.x.shape[1], width), dtype=torch.float64, device=data.x.device)
    for member in range(data.folds):
        z = (data.x[member // per_group].double() - data.mu[member].double()) * data.inv_sd[member].double()
        rows = z[data.train[member].bool()]
        values, vectors = torch.linalg.eigh(rows @ rows.T)
        keep = values > values.max().clamp_min(0.0) * RANK_TOLERANCE
        basis = rows.T @ (vectors[:, keep] * values[keep].rsqrt())  # (d, rank), orthonormal columns
        reduced[member, :, : basis.shape[1]] = z @ basis
    ones = torch.ones((data.folds, width), dtype=torch.float32, device=data.x.device)
    return FoldData(
        x=reduced.float(),
        y=data.y,
        train=data.train,
        counts=data.counts,
        mu=torch.zeros_like(ones),
        inv_sd=ones,
        num_classes=data.num_classes,
        multi_label=data.multi_label,
    )


__all__ = ["RANK_TOLERANCE", "in_row_space"]
