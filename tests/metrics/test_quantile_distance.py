"""quantile_w1 (spec §4.4 W1, §7 item 12) and the NLL of an exact Gaussian predictive."""
import numpy as np
import pytest
from scipy import stats

from dubito.metrics.quantile_distance import quantile_levels, quantile_w1
from dubito.metrics.scoring import nll
from dubito.predictive import GaussianMixture, Normal


def test_levels_are_midpoints():
    np.testing.assert_allclose(quantile_levels(4), [0.125, 0.375, 0.625, 0.875])
    assert quantile_levels().shape == (100,) and quantile_levels()[0] == 0.005


def test_identical_is_zero_and_shift_is_shift():
    rng = np.random.default_rng(1)
    truth = np.sort(rng.normal(size=(7, 500)), axis=1)
    assert quantile_w1(truth.T, truth) == 0.0
    # every linear-interpolated quantile moves by the shift: W1 = |shift| exactly
    assert quantile_w1(truth.T + 0.3, truth) == pytest.approx(0.3, abs=1e-12)
    assert quantile_w1(truth.T - 2.0, truth) == pytest.approx(2.0, abs=1e-12)
    shifts = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(quantile_w1(truth.T + shifts, truth, per_input=True), np.abs(shifts), atol=1e-12)


def test_by_hand_small_case():
    # truth {0, 1} (np.quantile linear: Q(q) = q), prediction a point mass at 0.5, 2 levels
    # (0.25, 0.75): |0.5 - 0.25| and |0.5 - 0.75| -> 0.25
    assert quantile_w1(np.full((3, 1), 0.5), np.array([[0.0, 1.0]]), n_levels=2) == pytest.approx(0.25)


def test_exact_predictive_agrees_with_many_samples():
    rng = np.random.default_rng(2)
    truth = np.sort(rng.uniform(-1, 1, size=(5, 500)), axis=1)
    pred = Normal(np.linspace(-0.2, 0.2, 5), np.linspace(0.05, 0.5, 5))
    exact = quantile_w1(pred, truth, per_input=True)
    draws = pred.sample(200_000, generator=3)
    sampled = quantile_w1(draws, truth, per_input=True)
    # sample quantiles of 2e5 draws: sd of Qhat(q) is about sd*sqrt(q(1-q)/S)/phi(z) <= 0.5*0.0065;
    # the mean over levels of |.| differences is well inside 3e-3
    np.testing.assert_allclose(sampled, exact, atol=3e-3)
    # and the exact one equals W1 to the closed-form Normal quantiles at the levels
    q = quantile_levels(100)
    byhand = np.abs(stats.norm(pred.mean[:, None], pred.std[:, None]).ppf(q) - np.quantile(truth, q, axis=1).T).mean(1)
    np.testing.assert_allclose(exact, byhand, rtol=1e-12)
    mix = GaussianMixture(np.ones(1), pred.mean[:, None], pred.var[:, None])
    np.testing.assert_allclose(quantile_w1(mix, truth, per_input=True), exact, atol=1e-8)


def test_bad_shapes():
    truth = np.zeros((4, 10))
    with pytest.raises(ValueError, match=r"\(S, 4\)"):
        quantile_w1(np.zeros((10, 3)), truth)
    with pytest.raises(ValueError, match="4 rows"):
        quantile_w1(Normal(np.zeros(3), 1.0), truth)
    with pytest.raises(ValueError, match="n_levels"):
        quantile_w1(np.zeros((10, 4)), truth, n_levels=0)
    with pytest.raises(ValueError, match="non-finite"):
        quantile_w1(np.full((10, 4), np.nan), truth)


def test_nll_of_exact_gaussian_is_the_formula():
    # spec §7 item 12: NLL of a Gaussian predictive = 0.5 log(2 pi s^2) + (y - m)^2 / (2 s^2)
    m, s2, y = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.25, 4.0]), np.array([0.5, 2.0, -2.0])
    formula = 0.5 * np.log(2 * np.pi * s2) + (y - m) ** 2 / (2 * s2)
    np.testing.assert_allclose(nll(Normal(m, s2), y), formula, rtol=1e-13)
    mix = GaussianMixture(np.ones(2), np.stack([m, m], 1), np.stack([s2, s2], 1))
    np.testing.assert_allclose(nll(mix, y), formula, rtol=1e-12)
