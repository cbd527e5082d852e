"""The probe examples regrouped by fold, so that each fold's probe computes on its own rows only.

Why: the k folds of a probe share one feature matrix. Computing every fold's layers on all N
rows and masking the held-out rows out of its loss spends 1/k of every matrix product (a fifth
at k = 5) on rows whose gradient is zero. Sorted by fold into k blocks of equal length (padded
by at most one row), block j is a training block of the k - 1 folds that do not hold it out, so
ONE product with their weights side by side, (G·k, n_b, d) @ (G·k, d, (k-1)·h), gives every
fold's first layer on exactly its training rows: one batched GEMM, as before, of (k-1)/k the
size. A fold's held-out rows are its own block, so scoring is the block-diagonal product.

The layout holds when every feature set's k batch members are the k folds of one partition of
the rows (what :func:`~workers.probe.fits.fit_common.prepare` builds); other layouts (a fold
fitted alone, the linear probe's row-space restatement) compute on all rows with the mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class FoldBlocks:
    """Feature sets cut into fold blocks, and where each fold finds its training rows.

    Attributes:
        x: (G·k, n_b, d): block j of feature set g at index g·k + j; padding rows are 0.
        order: (k, n_b) int64: the example in each slot of each block (padding: example 0).
        valid: (k, n_b) float32: 1 for an example, 0 for padding.
        others: (k, k-1) int64: row f lists the blocks fold f trains on (every block but f).
        pairs: (k·(k-1),) int64: for fold f and its i-th block j = others[f, i], the index
            j·(k-1) + s of (block j, fold f's column group s in block j's product).
    """

    x: torch.Tensor
    order: torch.Tensor
    valid: torch.Tensor
    others: torch.Tensor
    pairs: torch.Tensor

    @property
    def folds(self) -> int:
        return int(self.order.shape[0])

    @property
    def members(self) -> int:
        return int(self.x.shape[0])

    def train_order(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per fold, the examples of its training rows and their validity: two (k, (k-1)·n_b)."""
        k = self.folds
        return self.order[self.others].reshape(k, -1), self.valid[self.others].reshape(k, -1)

    def train_layer(self, w: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """``x @ w[m] + shift[m]`` on member m's training rows: (G·k, (k-1)·n_b, out)."""
        members, d, out = w.shape
        k = self.folds
        g, n_b = members // k, self.x.shape[1]
        # block j's columns: the weights of the folds that train on it, in the order others[j]
        columns = w.reshape(g, k, d, out).index_select(1, self.others.reshape(-1))
        columns = columns.reshape(g, k, k - 1, d, out).permute(0, 1, 3, 2, 4)
        shifts = shift.reshape(g, k, out).index_select(1, self.others.reshape(-1))
        product = torch.baddbmm(
            shifts.reshape(members, 1, (k - 1) * out), self.x, columns.reshape(members, d, (k - 1) * out)
        )
        # (G, block, column group, n_b, out) → each fold's own column group of its blocks
        product = product.reshape(g, k, n_b, k - 1, out).permute(0, 1, 3, 2, 4)
        mine = product.reshape(g, k * (k - 1), n_b, out).index_select(1, self.pairs)
        return mine.reshape(members, (k - 1) * n_b, out)

    def held_layer(self, w: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """``x @ w[m] + shift[m]`` on member m's held-out rows (its own block): (G·k, n_b, out)."""
        return torch.baddbmm(shift[:, None, :], self.x, w)


def fold_blocks(x: torch.Tensor, ids: np.ndarray, folds: int) -> FoldBlocks:
    """The fold-block layout of feature sets ``x`` (G, N, d) under fold ids ``ids`` (N,)."""
    rows_of = [np.flatnonzero(ids == f) for f in range(folds)]
    n_b = max(len(rows) for rows in rows_of)
    order = np.zeros((folds, n_b), dtype=np.int64)
    valid = np.zeros((folds, n_b), dtype=np.float32)
    for f, rows in enumerate(rows_of):
        order[f, : len(rows)] = rows
        valid[f, : len(rows)] = 1.0
    order_t = torch.as_tensor(order, device=x.device)
    valid_t = torch.as_tensor(valid, device=x.device)
    g, _, d = x.shape
    blocks = x[:, order_t.reshape(-1)] * valid_t.reshape(1, -1, 1)
    others = np.array([[j for j in range(folds) if j != f] for f in range(folds)], dtype=np.int64)
    fold = np.arange(folds)[:, None]
    slots = np.where(fold < others, fold, fold - 1)  # fold f's place among others[j]
    return FoldBlocks(
        x=blocks.reshape(g * folds, n_b, d).contiguous(),
        order=order_t,
        valid=valid_t,
        others=torch.as_tensor(others, device=x.device),
        pairs=torch.as_tensor((others * (folds - 1) + slots).reshape(-1), device=x.device),
    )


__all__ = ["FoldBlocks", "fold_blocks"]
