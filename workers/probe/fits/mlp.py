"""MLP probes (2 and 3 layers), the k folds trained together as one batched network.

A "2-layer" probe is d → h → C (one hidden ReLU layer), a "3-layer" probe d → h → h → C.
Every weight tensor carries a leading fold axis, so one forward pass trains all k folds
(the first layer is one GEMM with the shared features, later layers are batched matrix
products); each fold computes on its own rows only (:mod:`~workers.probe.fits.fold_blocks`).
Training is full-batch Adam for a fixed number of steps with an L2 penalty on the weights, from
a seeded Kaiming-uniform start: small, deterministic, no early stopping (which would need yet
another split).
"""

from __future__ import annotations

import math

import torch

from workers.probe.fits.fit_common import (
    FoldData,
    FoldScores,
    Rows,
    first_layer,
    fit_rows,
    held_out_scores,
    training_loss,
)
from workers.probe.fits.fit_flops import counted, repeated


def _uniform(shape: tuple[int, ...], fan_in: int, generator: torch.Generator) -> torch.Tensor:
    bound = 1.0 / math.sqrt(fan_in)
    return ((torch.rand(shape, generator=generator) * 2.0 - 1.0) * bound).requires_grad_(True)


def _params(data: FoldData, depth: int, hidden: int, generator: torch.Generator) -> list[torch.Tensor]:
    """[V1, b1, (W2, b2,) Wout, bout] with a leading member axis; every feature set's k folds
    start from the same seeded weights, so a batched fit equals fitting each set alone."""
    g, d, c = data.groups, data.dim, data.num_classes
    k = data.folds // g
    widths = [d] + [hidden] * (depth - 1) + [c]
    params = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        for shape in ((k, fan_in, fan_out), (k, fan_out)):
            start = _uniform(shape, fan_in, generator).detach().to(data.x.device)
            params.append(start.repeat(g, *([1] * (len(shape) - 1))).requires_grad_(True))
    return params


def _forward(data: FoldData, params: list[torch.Tensor], rows: Rows) -> torch.Tensor:
    h = first_layer(data, params[0], params[1], rows)
    for i in range(2, len(params), 2):
        h = torch.baddbmm(params[i + 1][:, None, :], torch.relu(h), params[i])
    return h


def fit_mlp(
    data: FoldData, *, depth: int, hidden: int, steps: int, lr: float, weight_decay: float, seed: int = 0
) -> FoldScores:
    """Train the ``depth``-layer MLP probe of every fold; score it on the held-out rows.

    Args:
        data: Features, labels and folds (see :func:`~workers.probe.fits.fit_common.prepare`).
        depth: 2 or 3 (linear layers, the output layer included).
        hidden: Hidden width.
        steps: Full-batch Adam steps.
        lr: Adam learning rate.
        weight_decay: L2 penalty on the weight matrices (not the biases).
        seed: Seed of the initial weights.

    Returns:
        Held-out :class:`~workers.probe.fits.fit_common.FoldScores`.
    """
    if depth not in (2, 3):
        raise ValueError(f"The 'depth' parameter of fit_mlp must be 2 or 3. Got {depth!r} instead.")
    generator = torch.Generator().manual_seed(seed)
    params = _params(data, depth, hidden, generator)
    optimizer = torch.optim.Adam(params, lr=lr)
    weights = params[0::2]
    train_rows = fit_rows(data, held=False)

    def one_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = training_loss(train_rows, _forward(data, params, train_rows))
        if weight_decay:
            loss = loss + 0.5 * weight_decay * sum((w * w).sum() for w in weights)
        loss.backward()
        optimizer.step()

    step = repeated(one_step)  # every step has the same shapes (fit_flops)
    for _ in range(steps):
        step()
    held_rows = fit_rows(data, held=True)
    with torch.no_grad(), counted():
        logits = _forward(data, params, held_rows)
    return held_out_scores(held_rows, logits)


__all__ = ["fit_mlp"]
