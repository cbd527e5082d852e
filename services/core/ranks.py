"""LiDAR and RankMe: effective ranks of a representation, without labels (METRICS.md §3).

Contract: inputs are finite float arrays (LiDAR: n clean samples × q augmentations × d
features, n >= 2 and q >= 2; RankMe: N × d); computation is float64 throughout; the result
is a Python float in [1, min(shape)] up to the ε terms; an all-zero spectrum gives exactly
1.0. Invalid input raises :class:`~services.core.metric_checks.MetricInputError` (a
``ValueError``). Both are "higher is better" scores. Inputs are never modified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from services.core.metric_checks import as_float_array, as_number, fail

# RankMe takes its singular values from the Gram matrix (about 6x faster than an SVD for
# tall matrices) only when the smallest Gram eigenvalue is at least this fraction of the
# largest (singular values within a factor 1000): then sqrt(eigenvalue) matches the SVD to
# about 1e-11 relative and RankMe to about 1e-13. Otherwise (collapsed, low-rank embeddings,
# where the small singular values matter) it runs the exact SVD.
GRAM_MIN_RATIO = 1e-6

_GRAM_MIN_SCALE = 1e-250
_BLOCK_BYTES = 32 * 2**20
_EMBEDDINGS = "a 3-D array (n samples, q augmentations, d features) of finite numbers"


def spectral_rank(values: np.ndarray, eps: float) -> float:
    """exp(entropy) of p_k = v_k / ||v||_1 + eps (eps after normalising, no renormalising).

    ``values`` are non-negative; all zeros give 1.0. Terms with p_k = 0 (only possible with
    eps = 0) contribute 0, the limit of p log p.
    """
    total = float(values.sum())
    if total == 0.0:
        return 1.0
    p = values / total + eps
    p = p[p > 0]
    return float(np.exp(-np.dot(p, np.log(p))))


def within_scatter(e: np.ndarray, class_means: np.ndarray, block_bytes: int = _BLOCK_BYTES) -> np.ndarray:
    """Σ_i Σ_j (e_ij − μ_i)(e_ij − μ_i)ᵀ, centred and summed in blocks of samples.

    Blocks of about ``block_bytes`` bound the centred copy (32 MiB instead of one array as
    large as the input, 200 MB at n=1000, q=50, d=512) and keep memory traffic low; each
    block's product is a BLAS syrk.
    """
    n, q, d = e.shape
    per_block = max(1, min(n, block_bytes // (8 * q * d)))
    buffer = np.empty((per_block, q, d))
    scatter = np.zeros((d, d))
    for start in range(0, n, per_block):
        stop = min(n, start + per_block)
        block = buffer[: stop - start]
        np.subtract(e[start:stop], class_means[start:stop, None, :], out=block)
        rows = block.reshape(-1, d)
        scatter += rows.T @ rows
    return scatter


def lidar_eigenvalues(embeddings: Any, delta: float = 1e-4) -> np.ndarray:
    """The eigenvalues λ of Σ_w^{-1/2} Σ_b Σ_w^{-1/2}, ascending, negatives clipped to 0.

    Σ_w^{-1/2} is the symmetric inverse square root from the eigendecomposition of
    Σ_w (with δ·I added); the result equals the generalised eigenvalues of (Σ_b, Σ_w).

    Args:
        embeddings: Array of shape (n, q, d): n clean samples, q augmentations each.
        delta: Ridge δ added to the within-class covariance (>= 0; 0 needs Σ_w positive
            definite).

    Returns:
        The d eigenvalues, float64, ascending.

    Raises:
        ValueError: Not a finite 3-D array, n < 2, q < 2, delta < 0, or Σ_w + δ·I not
            positive definite (with δ = 0: Σ_w numerically singular).

    Examples:
        >>> e = np.array([[[0.0], [2.0]], [[4.0], [6.0]]])  # Σ_b = 8, Σ_w = 2 (+δ)
        >>> lidar_eigenvalues(e, delta=1e-12).round(9).tolist()
        [4.0]
    """
    return _lidar_eigenvalues(embeddings, delta, "lidar_eigenvalues")


def lidar_covariances(embeddings: Any, func: str = "lidar_covariances") -> tuple[np.ndarray, np.ndarray]:
    """(Σ_b, Σ_w) of METRICS.md §3, Σ_w without its δ·I: computed once for several δ."""
    return _covariances(_views(embeddings, func))


def _views(embeddings: Any, func: str) -> np.ndarray:
    e = as_float_array(embeddings, param="embeddings", func=func, what=_EMBEDDINGS, ndims=(3,))
    n, q, _ = e.shape
    if n < 2 or q < 2:
        raise fail("embeddings", func, _EMBEDDINGS + " with n >= 2 and q >= 2", f"shape {e.shape}")
    return e


def in_sample_span(e: np.ndarray) -> tuple[np.ndarray, int]:
    """``e`` (n, q, d) in coordinates of the span of its centred vectors, and how many
    dimensions that drops (0, and ``e`` itself, when the vectors span every dimension).

    Why it is exact for δ > 0: Σ_b and Σ_w are sums of outer products of differences of
    the vectors (class means less their mean, views less their class mean), so both vanish
    outside that span, and Σ_w + δ·I maps the span and its complement each to itself. The
    LDA matrix is then the restated one's, plus one eigenvalue 0 per dropped dimension.
    Why: wide features (d ≥ n·q, raw pixels say) cost (n·q)³ instead of d³.
    """
    n, q, d = e.shape
    if n * q > d:
        return e, 0
    rows = (e - e.mean(axis=(0, 1))).reshape(n * q, d)
    values, vectors = np.linalg.eigh(rows @ rows.T)
    keep = values > _singular_below(values)
    if not keep.any():
        return e, 0
    basis = rows.T @ (vectors[:, keep] / np.sqrt(values[keep]))  # (d, rank), orthonormal columns
    return (rows @ basis).reshape(n, q, -1), d - basis.shape[1]


def _covariances_at(e: np.ndarray, deltas: list[float]) -> tuple[np.ndarray, np.ndarray, int]:
    """(Σ_b, Σ_w) for LiDAR at ``deltas``, in the views' span when every δ > 0 (δ = 0 needs
    Σ_w itself positive definite, checked on every dimension), and the dimensions dropped."""
    narrow, dropped = in_sample_span(e) if all(delta > 0.0 for delta in deltas) else (e, 0)
    return (*_covariances(narrow), dropped)


def _covariances(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, q, _ = e.shape
    class_means = e.mean(axis=1)  # μ_i, (n, d)
    between = class_means - class_means.mean(axis=0)
    return (between.T @ between) / (n - 1), within_scatter(e, class_means) / (n * (q - 1))


def within_scale(sigma_w: np.ndarray, dim: int | None = None) -> float:
    """The features' scale a relative δ multiplies: tr(Σ_w) / d, the mean eigenvalue of the
    within-class covariance (so δ·scale·I shrinks with the features, and LiDAR does not move
    when every feature is multiplied by one constant). ``dim``: the features' own d, when
    ``sigma_w`` is restated in fewer (:func:`in_sample_span` keeps the trace)."""
    return float(np.trace(sigma_w)) / (dim or sigma_w.shape[0])


def _lidar_eigenvalues(embeddings: Any, delta: float, func: str) -> np.ndarray:
    e = _views(embeddings, func)
    delta = as_number(delta, param="delta", func=func, low=0.0)
    sigma_b, sigma_w, dropped = _covariances_at(e, [delta])
    return _ridged_eigenvalues(sigma_b, sigma_w, delta, func, dropped)


def _ridged_eigenvalues(
    sigma_b: np.ndarray, sigma_w: np.ndarray, delta: float, func: str, dropped: int = 0
) -> np.ndarray:
    """The LDA matrix's eigenvalues, ascending, with ``dropped`` zeros for the dimensions
    :func:`in_sample_span` left out."""
    d = sigma_w.shape[0]
    sigma_w = sigma_w.copy()
    sigma_w[np.diag_indices(d)] += delta
    w_vals, w_vecs = np.linalg.eigh(sigma_w)
    if delta == 0.0 and w_vals[0] <= _singular_below(w_vals):
        raise fail(
            "delta",
            func,
            "> 0 here: the within-class covariance is singular, so with delta = 0 it is not positive definite",
            f"0.0 (smallest eigenvalue {float(w_vals[0])!r}, largest {float(w_vals[-1])!r})",
        )
    if w_vals[0] <= 0.0:
        raise fail(
            "delta",
            func,
            "large enough to make the within-class covariance positive definite",
            f"{delta!r} (smallest eigenvalue {float(w_vals[0])!r})",
        )
    inv_sqrt = (w_vecs / np.sqrt(w_vals)) @ w_vecs.T
    inv_sqrt = (inv_sqrt + inv_sqrt.T) * 0.5
    lidar_matrix = inv_sqrt @ sigma_b @ inv_sqrt
    lidar_matrix = (lidar_matrix + lidar_matrix.T) * 0.5
    return np.concatenate([np.zeros(dropped), np.clip(np.linalg.eigvalsh(lidar_matrix), 0.0, None)])


def _singular_below(ascending_eigenvalues: np.ndarray) -> float:
    """Eigenvalues of a PSD matrix at or below this are round-off: d · machine ε · the largest."""
    values = ascending_eigenvalues
    return float(values.size * np.finfo(np.float64).eps * max(float(values[-1]), 0.0))


def lidar(embeddings: Any, delta: float = 1e-4, eps: float = 1e-8) -> float:
    """LiDAR (Thilak et al.): the effective rank of the LDA matrix of augmentation classes.

    Args:
        embeddings: Array of shape (n, q, d): n clean samples, each under q augmentations.
        delta: Ridge δ added to the within-class covariance (>= 0; 0 needs Σ_w positive
            definite).
        eps: ε added to each normalised eigenvalue before the entropy (>= 0).

    Returns:
        exp(-Σ p_k log p_k) with p_k = λ_k / ||λ||_1 + ε; 1.0 when every λ is 0.

    Raises:
        ValueError: Not a finite 3-D array, n < 2, q < 2, delta < 0, Σ_w + δ·I not positive
            definite, or eps < 0.

    Examples:
        >>> centres = np.array([[9, 0, 0], [-9, 0, 0], [0, 9, 0], [0, -9, 0]], dtype=float)
        >>> signs = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)
        >>> views = np.stack([centres + signs, centres - signs], axis=1)  # (n=4, q=2, d=3)
        >>> round(lidar(views), 6)  # two directions separate the samples, one does not
        2.0
    """
    eps = as_number(eps, param="eps", func="lidar", low=0.0)
    return spectral_rank(_lidar_eigenvalues(embeddings, delta, "lidar"), eps)


def lidar_at_deltas(
    embeddings: Any, deltas: Any, *, relative: bool, eps: float = 1e-8
) -> tuple[dict[float, float], float]:
    """LiDAR at each δ of ``deltas`` from one pair of covariances, and the scale used.

    With ``relative``, the ridge added to Σ_w is δ · :func:`within_scale` (δ is a fraction
    of the features' within-class variance); otherwise δ itself (METRICS.md's formula, which
    both cases follow: Σ_w + δ_abs·I). A zero scale (every view identical) falls back to
    the absolute δ, and the scale is reported as 0.

    Returns:
        ({δ: LiDAR}, scale), where scale is 1.0 for absolute δ.

    Examples:
        >>> e = np.array([[[0.0], [2.0]], [[4.0], [6.0]]])  # Σ_b = 8, Σ_w = 2
        >>> values, scale = lidar_at_deltas(e, [1e-4], relative=True, eps=0.0)
        >>> scale, values[1e-4]
        (2.0, 1.0)
    """
    func = "lidar_at_deltas"
    eps = as_number(eps, param="eps", func=func, low=0.0)
    e = _views(embeddings, func)
    deltas = [as_number(delta, param="deltas", func=func, low=0.0) for delta in deltas]
    sigma_b, sigma_w, dropped = _covariances_at(e, deltas)
    scale = within_scale(sigma_w, e.shape[2]) if relative else 1.0
    factor = scale if scale > 0.0 else 1.0
    out = {}
    for delta in deltas:
        values = _ridged_eigenvalues(sigma_b, sigma_w, delta * factor, func, dropped)
        out[float(delta)] = spectral_rank(values, eps)
    return out, scale


def singular_values(z: np.ndarray) -> np.ndarray:
    """Singular values of a finite float64 matrix (order unspecified); see GRAM_MIN_RATIO."""
    tall = z if z.shape[0] >= z.shape[1] else z.T
    if gram_looks_usable(tall):
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            gram = tall.T @ tall
        if np.isfinite(gram).all():
            lam = np.linalg.eigvalsh(gram)
            # Far from under- and overflow, and well conditioned: the Gram route is exact enough.
            if lam[-1] > _GRAM_MIN_SCALE and lam[0] >= GRAM_MIN_RATIO * lam[-1]:
                return np.sqrt(lam)
    return np.linalg.svd(z, compute_uv=False)


def gram_looks_usable(tall: np.ndarray) -> bool:
    """A cheap guess from every k-th row, so collapsed inputs skip a wasted Gram product.

    Only speed depends on it: the full Gram is checked again before it is used.
    """
    rows, cols = tall.shape
    if rows <= 8 * cols:
        return True
    sample = tall[:: rows // (4 * cols)]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        gram = sample.T @ sample
    if not np.isfinite(gram).all():
        return False
    lam = np.linalg.eigvalsh(gram)
    return bool(lam[0] >= 1e-2 * GRAM_MIN_RATIO * lam[-1])


def rankme(z: Any, eps: float = 1e-7) -> float:
    """RankMe (Garrido et al.): the effective rank of the uncentred embedding matrix.

    Args:
        z: Array of shape (N, d), one embedding per row (not centred).
        eps: ε added to each normalised singular value before the entropy (>= 0).

    Returns:
        exp(-Σ p_k log p_k) with p_k = σ_k / ||σ||_1 + ε; 1.0 for an all-zero ``z``.

    Raises:
        ValueError: ``z`` is not a non-empty finite 2-D array, or eps < 0.

    Examples:
        >>> round(rankme(np.eye(4)), 5)  # ε nudges it by about 6e-7
        4.0
        >>> rankme(np.zeros((3, 2)))
        1.0
    """
    what = "a non-empty 2-D array (N samples, d features) of finite numbers"
    matrix = as_float_array(z, param="z", func="rankme", what=what, ndims=(2,))
    eps = as_number(eps, param="eps", func="rankme", low=0.0)
    return spectral_rank(singular_values(matrix), eps)


__all__ = [
    "GRAM_MIN_RATIO",
    "gram_looks_usable",
    "lidar",
    "lidar_at_deltas",
    "lidar_covariances",
    "lidar_eigenvalues",
    "in_sample_span",
    "rankme",
    "within_scale",
    "singular_values",
    "spectral_rank",
    "within_scatter",
]
