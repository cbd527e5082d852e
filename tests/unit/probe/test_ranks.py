"""Golden values and invariances for METRICS.md §3: LiDAR and RankMe."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg

from services.core import ranks
from workers.probe.scores.probe_metrics import lidar, lidar_eigenvalues, rankme


def entropy_rank(values, eps):
    """The METRICS.md formula written out, for expected values."""
    p = np.asarray(values, dtype=float) / np.sum(values) + eps
    return math.exp(-sum(pk * math.log(pk) for pk in p))


@pytest.fixture(scope="module")
def views():
    """60 samples with 6-D structure in 8-D, 7 noisy views each."""
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(60, 1, 8)) * np.array([6, 5, 4, 3, 2, 1, 0, 0])
    return centres + rng.normal(size=(60, 7, 8)) * np.linspace(0.5, 1.5, 8)


def scatter_matrices(e, delta):
    n, q, d = e.shape
    mu_i = e.mean(axis=1)
    b = mu_i - mu_i.mean(axis=0)
    w = (e - mu_i[:, None, :]).reshape(-1, d)
    return b.T @ b / (n - 1), w.T @ w / (n * (q - 1)) + delta * np.eye(d)


# --- LiDAR ---------------------------------------------------------------------------------


def test_lidar_one_dimension_by_hand():
    e = np.array([[[0.0], [2.0]], [[4.0], [6.0]]])  # μ_i = 1, 5: Σ_b = 8; Σ_w = 4 / 2 = 2
    assert lidar_eigenvalues(e, delta=1e-4).tolist() == pytest.approx([8 / (2 + 1e-4)], rel=1e-13)
    assert lidar(e) == pytest.approx(math.exp(-(1 + 1e-8) * math.log(1 + 1e-8)), rel=1e-15)


def test_lidar_of_two_separated_directions_is_about_two():
    centres = np.array([[9, 0, 0], [-9, 0, 0], [0, 9, 0], [0, -9, 0]], dtype=float)
    signs = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)
    e = np.stack([centres + signs, centres - signs], axis=1)
    # Σ_b = diag(54, 54, 0); the sign rows are orthogonal, so Σ_w = 2 I (+ δ).
    expected = [0.0, 54 / (2 + 1e-4), 54 / (2 + 1e-4)]
    np.testing.assert_allclose(lidar_eigenvalues(e), expected, rtol=1e-12, atol=1e-12)
    assert lidar(e) == pytest.approx(entropy_rank([0.0, 1.0, 1.0], 1e-8), rel=1e-12)
    assert lidar(e, eps=0.0) == pytest.approx(2.0, rel=1e-12)


def test_lidar_eigenvalues_equal_the_generalised_eigenproblem(views):
    sigma_b, sigma_w = scatter_matrices(views, 1e-4)
    generalised = scipy.linalg.eigh(sigma_b, sigma_w, eigvals_only=True)
    np.testing.assert_allclose(lidar_eigenvalues(views), np.clip(generalised, 0, None), rtol=1e-10, atol=1e-12)
    assert lidar(views) == pytest.approx(entropy_rank(np.clip(generalised, 0, None), 1e-8), rel=1e-10)


@pytest.mark.parametrize("block_bytes", [1, 8 * 7 * 8 * 3, 10**9])
def test_within_scatter_is_the_same_in_any_block_size(views, block_bytes):
    mu_i = views.mean(axis=1)
    centred = (views - mu_i[:, None, :]).reshape(-1, 8)
    np.testing.assert_allclose(ranks.within_scatter(views, mu_i, block_bytes), centred.T @ centred, rtol=1e-12)


def test_lidar_is_invariant_to_an_orthogonal_map(views):
    q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(8, 8)))
    assert lidar(views @ q.T) == pytest.approx(lidar(views), rel=1e-11)


def test_lidar_is_invariant_to_scaling_when_delta_scales_with_it(views):
    assert lidar(views * 3.0, delta=9e-4) == pytest.approx(lidar(views, delta=1e-4), rel=1e-11)


def test_lidar_is_invariant_to_an_invertible_map_up_to_delta(views):
    # Without δ the generalised eigenvalues of (AΣ_bAᵀ, AΣ_wAᵀ) are those of (Σ_b, Σ_w); with a
    # tiny δ against a well-conditioned Σ_w the difference is far below the tolerance.
    a = np.eye(8) + 0.3 * np.random.default_rng(4).normal(size=(8, 8))
    assert np.linalg.cond(a) < 100
    assert lidar(views @ a.T, delta=1e-12) == pytest.approx(lidar(views, delta=1e-12), rel=1e-8)
    assert lidar(views @ a.T, delta=1e-12) != pytest.approx(lidar(views @ a.T, delta=1.0), rel=1e-3)


def test_lidar_is_invariant_to_a_shift_and_to_sample_order(views):
    assert lidar(views + 5.0) == pytest.approx(lidar(views), rel=1e-10)
    assert lidar(views[::-1, ::-1]) == pytest.approx(lidar(views), rel=1e-12)


@pytest.mark.parametrize("shape", [(5, 3, 4), (2, 2, 1)])
def test_lidar_without_between_class_spread_is_one(shape):
    assert lidar(np.zeros(shape)) == 1.0
    same_sample = np.broadcast_to(np.random.default_rng(0).normal(size=(1, *shape[1:])), shape)
    assert lidar(same_sample) == 1.0  # μ_i all equal: Σ_b = 0, every λ = 0


def test_lidar_accepts_float32_and_leaves_its_input_alone(views):
    e32 = views.astype(np.float32)
    before = e32.copy()
    assert lidar(e32) == pytest.approx(lidar(e32.astype(np.float64)), rel=1e-14)
    assert np.array_equal(e32, before)


@pytest.mark.parametrize(
    ("shape", "got"),
    [
        ((1, 3, 4), r"Got shape \(1, 3, 4\) instead"),
        ((3, 1, 4), r"Got shape \(3, 1, 4\) instead"),
        ((3, 4), r"Got a 2-D array of shape \(3, 4\) instead"),
        ((0, 3, 4), r"Got an empty array"),
    ],
)
def test_lidar_rejects_too_few_samples_or_views(shape, got):
    with pytest.raises(ValueError, match=r"The 'embeddings' parameter of lidar must be a 3-D array .*" + got):
        lidar(np.ones(shape))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta": -1e-4}, r"'delta' parameter of lidar must be a finite number in \[0, inf\)"),
        ({"eps": -1e-8}, r"'eps' parameter of lidar must be a finite number in \[0, inf\)"),
    ],
)
def test_lidar_rejects_bad_options(views, kwargs, message):
    with pytest.raises(ValueError, match=message):
        lidar(views, **kwargs)


def lidar_by_definition(e, eps=1e-8):
    """METRICS.md §3 with δ = 0, independently: Σ_w^{-1/2} from scipy's matrix square root."""
    sigma_b, sigma_w = scatter_matrices(e, 0.0)
    inv_sqrt = np.linalg.inv(scipy.linalg.sqrtm(sigma_w).real)
    lam = np.clip(np.linalg.eigvalsh(inv_sqrt @ sigma_b @ inv_sqrt.T), 0.0, None)
    return lam, entropy_rank(lam, eps)


def test_lidar_with_delta_zero_is_the_exact_value_by_hand():
    e = np.array([[[0.0], [2.0]], [[4.0], [6.0]]])  # Σ_b = 8, Σ_w = 2 exactly
    assert lidar_eigenvalues(e, delta=0.0).tolist() == pytest.approx([4.0], rel=1e-15)
    assert lidar(e, delta=0) == pytest.approx(math.exp(-(1 + 1e-8) * math.log(1 + 1e-8)), rel=1e-15)


def test_lidar_with_delta_zero_and_a_positive_definite_within_covariance(views):
    assert np.linalg.eigvalsh(scatter_matrices(views, 0.0)[1])[0] > 0.1  # Σ_w is PD
    expected_lam, expected = lidar_by_definition(views)
    np.testing.assert_allclose(lidar_eigenvalues(views, delta=0.0), np.sort(expected_lam), rtol=1e-10, atol=1e-12)
    assert lidar(views, delta=0.0) == pytest.approx(expected, rel=1e-10)
    generalised = scipy.linalg.eigh(*scatter_matrices(views, 0.0), eigvals_only=True)
    np.testing.assert_allclose(lidar_eigenvalues(views, delta=0.0), generalised, rtol=1e-9)
    # δ = 0 is the value itself, not a ridge: it differs from the default δ = 1e-4.
    assert lidar(views, delta=0.0) != lidar(views, delta=1e-4)
    assert lidar(views, delta=1e-12) == pytest.approx(lidar(views, delta=0.0), rel=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        # one feature constant within every class: Σ_w has an exact zero row and column
        lambda v: np.concatenate(
            [v, np.broadcast_to(v.mean(axis=1, keepdims=True)[..., :1], v.shape[:2] + (1,))], axis=2
        ),
        # d = 8 > n (q − 1) = 2 · 3: Σ_w has rank at most 6 (round-off leaves tiny eigenvalues)
        lambda v: v[:2, :4],
        # a feature that duplicates another: Σ_w singular, smallest eigenvalue round-off
        lambda v: np.concatenate([v, v[..., :1] * 3.0], axis=2),
    ],
    ids=["zero-variance-feature", "more-features-than-within-dof", "collinear-features"],
)
def test_lidar_with_delta_zero_refuses_a_singular_within_covariance(views, make):
    e = make(views)
    with pytest.raises(
        ValueError,
        match=r"The 'delta' parameter of lidar must be > 0 here: the within-class covariance "
        r"is singular, so with delta = 0 it is not positive definite\. Got 0\.0 \(smallest",
    ):
        lidar(e, delta=0.0)
    assert math.isfinite(lidar(e, delta=1e-4))  # a ridge makes it valid again


def test_lidar_rejects_nan():
    e = np.ones((3, 2, 2))
    e[1, 0, 1] = np.nan
    with pytest.raises(ValueError, match=r"Got a non-finite value \(nan\) at index \(1, 0, 1\) instead"):
        lidar(e)


# --- RankMe --------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 4, 64])
def test_rankme_of_identity_is_about_d(d):
    assert rankme(np.eye(d)) == pytest.approx(entropy_rank(np.ones(d), 1e-7), rel=1e-13)
    assert rankme(np.eye(d)) == pytest.approx(d, rel=1e-4)  # ε adds about d·1e-7·(ln d − 1)


@pytest.mark.parametrize("rank", [1, 3, 7])
def test_rankme_of_a_known_rank_matrix_is_about_its_rank(rank):
    rng = np.random.default_rng(rank)
    u, _ = np.linalg.qr(rng.normal(size=(40, 10)))
    v, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    sigma = np.zeros(10)
    sigma[:rank] = 2.5
    z = (u * sigma) @ v.T
    assert rankme(z) == pytest.approx(entropy_rank(sigma, 1e-7), rel=1e-9)
    assert rankme(z) == pytest.approx(rank, rel=1e-4)


def test_rankme_golden_value_of_unequal_singular_values():
    z = np.diag([3.0, 1.0])  # p = 0.75, 0.25 (+ ε)
    assert rankme(z, eps=0.0) == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))), rel=1e-15)
    assert rankme(z) == pytest.approx(entropy_rank([3.0, 1.0], 1e-7), rel=1e-15)


def test_rankme_of_zeros_is_one():
    assert rankme(np.zeros((5, 3))) == 1.0


def test_rankme_is_invariant_to_scale_and_transpose():
    z = np.random.default_rng(6).normal(size=(30, 12))
    assert rankme(z * 1e-3) == pytest.approx(rankme(z), rel=1e-12)
    assert rankme(z.T) == pytest.approx(rankme(z), rel=1e-12)


@pytest.mark.parametrize(
    "z",
    [
        np.random.default_rng(0).normal(size=(200, 16)),  # well conditioned: Gram route
        np.random.default_rng(0).normal(size=(16, 200)),  # wide: Gram of z zᵀ
        np.outer(np.arange(1.0, 21.0), np.arange(1.0, 6.0)),  # rank 1: SVD route
        np.diag(np.geomspace(1.0, 1e-5, 6)),  # ill conditioned: SVD route
        np.full((3, 3), 1e-200),  # Gram underflows: SVD route
        np.full((3, 3), 1e200),  # Gram overflows: SVD route
        np.full((300, 3), 1e200),  # tall, sample Gram overflows: SVD route
        np.random.default_rng(1).normal(size=(300, 2)) @ np.ones((2, 16)),  # tall, collapsed
    ],
)
def test_singular_values_match_the_svd_on_both_routes(z):
    expected = np.sort(np.linalg.svd(z, compute_uv=False))
    np.testing.assert_allclose(np.sort(ranks.singular_values(z)), expected, rtol=1e-11, atol=1e-14 * expected[-1])


def test_the_row_sample_sends_collapsed_tall_matrices_straight_to_the_svd():
    rng = np.random.default_rng(2)
    well = rng.normal(size=(400, 16))
    assert ranks.gram_looks_usable(well)
    assert not ranks.gram_looks_usable(well[:, :2] @ rng.normal(size=(2, 16)))


@pytest.mark.parametrize(
    ("z", "got"),
    [
        (np.ones(3), r"Got a 1-D array of shape \(3,\) instead"),
        (np.ones((0, 3)), r"Got an empty array"),
        (np.ones((2, 2, 2)), r"Got a 3-D array"),
        ([[1.0, math.inf]], r"Got a non-finite value \(inf\) at index \(0, 1\)"),
    ],
)
def test_rankme_rejects_bad_matrices(z, got):
    with pytest.raises(ValueError, match=r"The 'z' parameter of rankme must be a non-empty 2-D array .*" + got):
        rankme(z)


def test_rankme_rejects_negative_eps():
    with pytest.raises(ValueError, match=r"The 'eps' parameter of rankme"):
        rankme(np.eye(2), eps=-1.0)


def test_listed_positional_forms_still_work(views):
    assert rankme(np.eye(3), 1e-7) == rankme(np.eye(3), eps=1e-7)
    assert lidar(views, 1e-4, 1e-8) == lidar(views, delta=1e-4, eps=1e-8)


# --- wide features: LiDAR restated in the span of the views ------------------------------


@pytest.fixture(scope="module")
def wide_views():
    """12 samples x 4 views in 200-D (d > n·q): the views span at most 47 dimensions."""
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(12, 1, 200)) * np.linspace(3.0, 0.1, 200)
    return centres + rng.normal(size=(12, 4, 200)) * 0.5 + 7.0


def test_wide_views_are_restated_in_their_span_with_the_trace_kept(wide_views):
    narrow, dropped = ranks.in_sample_span(wide_views)
    assert narrow.shape == (12, 4, 47) and dropped == 200 - 47
    full_b, full_w = ranks.lidar_covariances(wide_views)
    b, w = ranks.lidar_covariances(narrow)
    assert np.trace(w) == pytest.approx(np.trace(full_w), rel=1e-10)
    assert np.trace(b) == pytest.approx(np.trace(full_b), rel=1e-10)
    tall = np.random.default_rng(0).normal(size=(30, 5, 40))  # n·q > d: left as it is
    assert ranks.in_sample_span(tall)[0] is tall and ranks.in_sample_span(tall)[1] == 0


@pytest.mark.parametrize("delta", [1e-6, 1e-4, 1e-2])
def test_lidar_of_wide_views_equals_the_generalised_eigenproblem_in_every_dimension(wide_views, delta):
    sigma_b, sigma_w = scatter_matrices(wide_views, delta)
    generalised = np.clip(scipy.linalg.eigh(sigma_b, sigma_w, eigvals_only=True), 0, None)
    got = lidar_eigenvalues(wide_views, delta=delta)
    assert got.shape == (200,)
    np.testing.assert_allclose(np.sort(got), np.sort(generalised), rtol=1e-8, atol=1e-9 * generalised.max())
    assert lidar(wide_views, delta=delta) == pytest.approx(entropy_rank(generalised, 1e-8), rel=1e-9)


def test_lidar_at_deltas_of_wide_views_matches_one_delta_at_a_time(wide_views):
    values, scale = ranks.lidar_at_deltas(wide_views, [1e-6, 1e-4, 1e-2], relative=True)
    _, sigma_w = scatter_matrices(wide_views, 0.0)
    assert scale == pytest.approx(np.trace(sigma_w) / 200, rel=1e-10)  # the features' own d
    for delta, value in values.items():
        assert value == pytest.approx(lidar(wide_views, delta=delta * scale), rel=1e-9)
    with pytest.raises(ValueError, match="singular"):  # δ = 0 is checked on every dimension
        ranks.lidar_at_deltas(wide_views, [0.0, 1e-4], relative=False)
