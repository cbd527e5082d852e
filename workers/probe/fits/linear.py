"""The linear probe: k folds of (multinomial or per-label) logistic regression, fitted at once.

Why it is fast:
- the features are computed once and shared by every fold, and the k folds are one batched
  problem (one GEMM per evaluation for all folds, see
  :func:`~workers.probe.fits.fit_common.first_layer`), each fold on its own rows only;
- the convex objective is solved by full-batch L-BFGS with a strong-Wolfe line search, in
  coordinates whitened by each fold's closed-form feature covariance. For softmax
  regression the Hessian is about (feature covariance) ⊗ (class covariance), so whitening the
  feature side removes most of the ill-conditioning (a Kronecker-factored, second-order
  preconditioner); L-BFGS then needs a few dozen iterations instead of hundreds of SGD
  epochs per fold. Reparametrising does not move the optimum: the objective is unchanged.
- The folds' objectives are independent, so minimising their sum minimises each one.
- Features wider than a fold's training rows are first restated in each fold's row space
  (:mod:`~workers.probe.fits.row_space`; exact), so the cost follows the examples, not the width.

Objective of fold f (standardised features, weights V, bias b):
    mean over its training rows of the cross-entropy (single-label) or of the mean binary
    cross-entropy over labels (multi-label)  +  l2 / 2 · ||V||².
"""

from __future__ import annotations

import torch

from workers.probe.fits.fit_common import FoldData, FoldScores, first_layer, fit_rows, held_out_scores, training_loss
from workers.probe.fits.fit_flops import counted, repeated
from workers.probe.fits.row_space import in_row_space

TOLERANCE_CHANGE = 1e-5  # stop when the summed loss (or a step) changes less than this


def fold_covariances(data: FoldData) -> torch.Tensor:
    """Covariance of the standardised features over each member's training rows: (G·k, d, d).

    One Gram matrix of all rows per feature set, minus each fold's held-out rows: about one
    pass over the data.
    """
    xs = data.x.double()
    grams = xs.transpose(1, 2) @ xs
    k = data.folds // data.groups
    out = []
    for f in range(data.folds):
        x, gram_all = xs[f // k], grams[f // k]
        held = x[~data.train[f].bool()]
        mu = data.mu[f].double()
        cov = (gram_all - held.T @ held) / float(data.counts[f]) - torch.outer(mu, mu)
        inv_sd = data.inv_sd[f].double()
        out.append(cov * inv_sd[:, None] * inv_sd[None, :])
    return torch.stack(out)


def whitening(cov: torch.Tensor, ridge: float) -> torch.Tensor:
    """(cov + ridge·I)^{-1/2} of each fold, symmetric: (k, d, d) float32."""
    values, vectors = torch.linalg.eigh(cov)
    scale = (values.clamp_min(0.0) + ridge).rsqrt()
    return ((vectors * scale[:, None, :]) @ vectors.transpose(1, 2)).float().contiguous()


def fit_linear(data: FoldData, *, l2: float, max_iter: int, seed: int = 0) -> FoldScores:
    """Fit the linear probe of every fold and score it on the held-out rows.

    Args:
        data: Features, labels and folds (see :func:`~workers.probe.fits.fit_common.prepare`).
        l2: L2 penalty on the standardised weights.
        max_iter: L-BFGS iterations at most (it also stops when the loss stops changing).
        seed: Unused (the fit is deterministic); kept for a uniform probe signature.

    Returns:
        Held-out :class:`~workers.probe.fits.fit_common.FoldScores`.
    """
    del seed
    with counted():
        narrower = in_row_space(data)
    if narrower is not None:
        return fit_linear(narrower, l2=l2, max_iter=max_iter)
    k, d, c = data.folds, data.dim, data.num_classes
    with counted():
        precondition = whitening(fold_covariances(data), max(l2, 1e-6))
    u = torch.zeros((k, d, c), device=data.x.device, requires_grad=True)  # V = precondition @ u
    b = torch.zeros((k, c), device=data.x.device, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [u, b],
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        tolerance_grad=1e-7,
        tolerance_change=TOLERANCE_CHANGE,
        line_search_fn="strong_wolfe",
    )
    train_rows, held_rows = fit_rows(data, held=False), fit_rows(data, held=True)

    def closure() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        v = precondition @ u
        loss = training_loss(train_rows, first_layer(data, v, b, train_rows)) + 0.5 * l2 * (v * v).sum()
        loss.backward()
        return loss

    optimizer.step(repeated(closure))  # every evaluation has the same shapes (fit_flops)
    with torch.no_grad(), counted():
        logits = first_layer(data, precondition @ u, b, held_rows)
    return held_out_scores(held_rows, logits)


__all__ = ["TOLERANCE_CHANGE", "fit_linear", "fold_covariances", "whitening"]
