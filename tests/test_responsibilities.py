"""Responsibilities against the formulas of the maths page (doc/maths.rst), on hand-checked
cases."""

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from softkmeans._core.responsibilities import (
    SIGMA_MAX,
    SIGMA_MIN,
    RelaxationSpec,
    check_sigma,
    entmax_support_width,
)
from softkmeans._engines._array_kernels import NumpyKernels, block_responsibilities


def entmax_bisect_reference(z, alpha, iters=200):
    """Independent entmax: bisection on t with mpmath-free float64 (slow, small inputs)."""
    x = (alpha - 1.0) * (z - z.max())
    lo, hi = -1.0, 0.0
    for _ in range(iters):
        t = 0.5 * (lo + hi)
        mass = np.sum(np.maximum(x - t, 0.0) ** (1.0 / (alpha - 1.0)))
        lo, hi = (t, hi) if mass >= 1.0 else (lo, t)
    p = np.maximum(x - lo, 0.0) ** (1.0 / (alpha - 1.0))
    return p / p.sum()


D_CASES = np.array([
    [0.0, 1.0, 4.0],
    [2.0, 2.0, 3.0],
    [1.0, 0.5, 0.7],
    [9.0, 0.0, 16.0],
])


def test_softmax_matches_formula():
    sigma = 0.8
    block = block_responsibilities(D_CASES, RelaxationSpec("softmax", sigma))
    z = -D_CASES / (2 * sigma**2)
    np.testing.assert_allclose(block.resp, softmax(z, axis=1), rtol=1e-14)
    f_rows = -2 * sigma**2 * logsumexp(z, axis=1)
    np.testing.assert_allclose(block.row_objective, f_rows, rtol=1e-14)
    np.testing.assert_allclose(block.row_gap, D_CASES.min(1) - f_rows, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(block.labels, [0, 0, 1, 1])
    np.testing.assert_allclose(block.margins, [1.0, 0.0, 0.2, 9.0], atol=1e-15)
    log_sum_exp = NumpyKernels().log_sum_exp(D_CASES, 2.0 * sigma**2)
    np.testing.assert_allclose(log_sum_exp, logsumexp(z, axis=1))


def test_softmax_hand_case():
    # two centroids at squared distances 0 and 2 sigma^2: weights 1 and e^-1
    block = block_responsibilities(np.array([[0.0, 2.0]]), RelaxationSpec("softmax", 1.0))
    e = np.exp(-1.0)
    np.testing.assert_allclose(block.resp, [[1 / (1 + e), e / (1 + e)]], rtol=1e-15)
    np.testing.assert_allclose(block.row_gap, [2 * np.log1p(e)], rtol=1e-15)


def test_softmax_gap_keeps_relative_precision_far_below_epsilon():
    sigma = 0.01
    D = np.array([[0.0, 1.0]])  # S = exp(-5000), far below float64 resolution of 1 + S
    gap = block_responsibilities(D, RelaxationSpec("softmax", sigma)).row_gap[0]
    expected = 2 * sigma**2 * np.exp(-1.0 / (2 * sigma**2))
    assert gap == expected or np.isclose(gap, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 3.0])
def test_entmax_matches_bisection_reference(alpha):
    sigma = 0.9
    block = block_responsibilities(D_CASES, RelaxationSpec("entmax", sigma, alpha))
    z = -D_CASES / (2 * sigma**2)
    for row, zi in zip(block.resp, z, strict=True):
        np.testing.assert_allclose(row, entmax_bisect_reference(zi, alpha), atol=1e-12)
    # objective: sum r d - 2 sigma^2 H_alpha(r)
    r = block.resp
    H = (1 - np.sum(r**alpha, axis=1)) / (alpha * (alpha - 1))
    np.testing.assert_allclose(block.row_objective, np.sum(r * D_CASES, 1) - 2 * sigma**2 * H,
                               rtol=1e-12, atol=1e-14)


def test_entmax15_hand_case():
    # alpha = 1.5, two centroids, u = -d / (4 sigma^2) = (0, -1/2):
    # (0 - t)^2 + (-1/2 - t)^2 = 1  ->  t = (-1/2 - sqrt(7/4)) / 2
    block = block_responsibilities(np.array([[0.0, 2.0]]), RelaxationSpec("entmax", 1.0, 1.5))
    t = (-0.5 - np.sqrt(1.75)) / 2
    np.testing.assert_allclose(block.resp, [[t**2, (-0.5 - t) ** 2]], rtol=1e-14)


def test_sparsemax_hand_case():
    # alpha = 2: p = [z - t]_+ with z = -d / (2 sigma^2) = (0, -0.5, -3)
    block = block_responsibilities(np.array([[0.0, 1.0, 6.0]]), RelaxationSpec("entmax", 1.0, 2.0))
    np.testing.assert_allclose(block.resp, [[0.75, 0.25, 0.0]], rtol=1e-15)
    assert block.resp[0, 2] == 0.0


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("factor, one_hot", [(0.999, False), (1.001, True), (1.0, True),
                                             (0.5, False), (3.0, True)])
def test_entmax_one_hot_iff_margin_reaches_width(alpha, factor, one_hot):
    sigma = 0.37
    width = entmax_support_width(sigma, alpha)
    np.testing.assert_allclose(width, 2 * sigma**2 / (alpha - 1))
    D = np.array([[1.0, 1.0 + factor * width, 1.0 + 5 * width]])
    resp = block_responsibilities(D, RelaxationSpec("entmax", sigma, alpha)).resp[0]
    assert resp[2] == 0.0
    assert bool(np.count_nonzero(resp) == 1) == one_hot
    if one_hot:
        assert resp[0] == 1.0


@pytest.mark.parametrize("kind", ["softmax", "entmax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sigma", [SIGMA_MIN, 1e-12, 1e-6, 1e-2, 1.0, 1e3, 1e6, 1e12, SIGMA_MAX])
def test_no_nan_or_inf_at_any_temperature(kind, dtype, sigma):
    rng = np.random.RandomState(0)
    D = (rng.uniform(0, 100, size=(50, 6)).astype(dtype)).astype(np.float64)
    D[0, :2] = 3.0  # a tie
    block = block_responsibilities(D, RelaxationSpec(kind, sigma, 1.5))
    for value in (block.resp, block.row_objective, block.row_gap):
        assert np.all(np.isfinite(value))
    np.testing.assert_allclose(block.resp.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(block.row_gap >= 0)
    if sigma <= 1e-6:
        nearest = np.eye(6)[block.labels]
        nearest[0] = [0.5, 0.5, 0, 0, 0, 0] if kind == "softmax" else block.resp[0]
        np.testing.assert_allclose(block.resp, nearest, atol=1e-12)
    if sigma >= 1e6:
        np.testing.assert_allclose(block.resp, 1.0 / 6 if kind == "softmax" else block.resp)
        assert kind == "softmax" or np.count_nonzero(block.resp) == block.resp.size


def test_hard_block_is_one_hot_nearest():
    block = block_responsibilities(D_CASES, RelaxationSpec("hard"))
    np.testing.assert_array_equal(block.resp, np.eye(3)[[0, 0, 1, 1]])
    np.testing.assert_array_equal(block.row_gap, 0.0)
    np.testing.assert_array_equal(block.row_objective, D_CASES.min(axis=1))


@pytest.mark.parametrize("sigma", [0.0, 1e-151, 1e-200, 1e151, 1e300, np.inf, np.nan, -1.0])
@pytest.mark.parametrize("kind", ["softmax", "entmax"])
def test_temperatures_outside_the_float64_range_are_rejected(kind, sigma):
    with pytest.raises(ValueError, match=r"sigma must lie in \[1e-150, 1e\+150\]"):
        RelaxationSpec(kind, sigma)
    assert check_sigma(SIGMA_MIN) == SIGMA_MIN and check_sigma(SIGMA_MAX) == SIGMA_MAX
    assert RelaxationSpec("hard", sigma).kind == "hard"  # no temperature to check
