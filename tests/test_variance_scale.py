"""`dubito.variance_scale`: the held-out MAP variance scale, against its closed forms."""

import math

import numpy as np
import pytest

from dubito.predictive import GaussianMixture, StudentTMixture
from dubito.variance_scale import (
    AUTO_MIN_HELDOUT_ROWS,
    PRIOR_SD,
    fit_variance_scale,
    scale_mixture,
    scale_spread,
    scales_on,
)


def _one_component(m, v, c_true, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, math.sqrt(c_true * v), size=m)
    pred = GaussianMixture(np.ones(1), np.zeros((m, 1)), np.full((m, 1), v), noise_variances=np.full((m, 1), v))
    return pred, y


def test_without_a_prior_it_is_the_gaussian_mle():
    """One Gaussian component: -log p_c = 1/2 log(2 pi c v) + r^2 / (2 c v), minimised at
    c = mean(r^2 / v) (closed form); an almost flat prior (tau = 1e6) reaches it to 1e-5."""
    pred, y = _one_component(400, 2.0, 0.3)
    assert fit_variance_scale(pred, y, prior_sd=1e6) == pytest.approx(np.mean(y**2 / 2.0), rel=1e-5)


def test_the_prior_shrinks_towards_one_and_the_map_is_stationary():
    """With tau the MAP solves m/2 - sum r^2 / (2 c v) + log(c) / tau^2 = 0; it lies between 1
    and the MLE, nearer 1 with fewer rows."""
    for m in (20, 2000):
        pred, y = _one_component(m, 1.0, 0.2, seed=m)
        c = fit_variance_scale(pred, y)
        mle = float(np.mean(y**2))
        grad = m / 2 - np.sum(y**2) / (2 * c) + math.log(c) / PRIOR_SD**2
        assert abs(grad) < 1e-3 * m and mle < c < 1.0
    small = fit_variance_scale(*_one_component(20, 1.0, 0.2, seed=20))
    large = fit_variance_scale(*_one_component(2000, 1.0, 0.2, seed=2000))
    assert abs(math.log(large / 0.2)) < 0.1 and small > large  # many rows: near the truth (seed 2000)


def test_scale_mixture_multiplies_every_variance_and_keeps_the_means():
    rng = np.random.default_rng(1)
    means, var = rng.normal(size=(5, 3)), rng.uniform(0.5, 2.0, size=(5, 3))
    pred = GaussianMixture(np.full(3, 1 / 3), means, var, noise_variances=0.5 * var)
    out = scale_mixture(pred, 0.25)
    np.testing.assert_allclose(out.variances, 0.25 * var)
    np.testing.assert_allclose(out.noise_variances, 0.125 * var)
    np.testing.assert_array_equal(out.mean, pred.mean)
    np.testing.assert_allclose(out.aleatoric_var, 0.25 * pred.aleatoric_var)


def test_scale_spread_is_the_location_scale_map_of_the_whole_predictive():
    """p_c(y) = p(mean + (y - mean) / sqrt(c)) / sqrt(c): checked pointwise against the unscaled
    density; the mean stays, the total, epistemic and aleatoric variances all scale by c."""
    rng = np.random.default_rng(2)
    means, var = rng.normal(size=(4, 6)), rng.uniform(0.1, 0.5, size=(4, 6))
    pred = GaussianMixture(np.full(6, 1 / 6), means, var, noise_variances=var)
    c = 0.3
    out = scale_spread(pred, c)
    y = rng.normal(size=4)
    m = pred.mean
    np.testing.assert_allclose(out.log_prob(y), pred.log_prob(m + (y - m) / math.sqrt(c)) - 0.5 * math.log(c),
                               rtol=1e-12)
    np.testing.assert_allclose(out.mean, m, rtol=1e-12)
    for attr in ("var", "epistemic_var", "aleatoric_var"):
        np.testing.assert_allclose(getattr(out, attr), c * getattr(pred, attr), rtol=1e-12)


def test_a_spread_scale_recovers_draws_that_are_too_wide():
    """Draws of a predictive twice as wide (sd) as the truth: the spread scale's MLE is 1/4 to
    within its sampling error (2,000 rows: about 3 %; tolerance 10 %)."""
    rng = np.random.default_rng(3)
    n, s = 2000, 50
    center = rng.normal(size=n)
    draws = center[:, None] + 2.0 * 0.8 * rng.normal(size=(n, s))  # true epistemic sd 0.8, doubled
    pred = GaussianMixture(np.full(s, 1 / s), draws, np.full((n, s), 4 * 0.36))  # noise sd 0.6, doubled
    y = center + np.sqrt(0.8**2 + 0.6**2) * rng.normal(size=n)
    assert fit_variance_scale(pred, y, prior_sd=1e6, scale=scale_spread) == pytest.approx(0.25, rel=0.1)
    # scaling only the noise cannot shrink the draws' spread: its MLE goes far below 1/4
    assert fit_variance_scale(pred, y, prior_sd=1e6) < 0.2


def test_a_student_t_mixture_stays_one_and_its_scale_is_the_t_mle():
    """`scale_mixture` / `scale_spread` keep a `StudentTMixture` (same df). One t_nu component of
    variance v: with a flat prior the scale maximises the t likelihood (brute force over a fine
    grid of c agrees to the grid's step), and draws of variance 3 v give c within 10 % of 3
    (4,000 draws, seed 0; the sd of this estimate is about 3 %)."""
    nu, v, m = 5.0, 2.0, 4000
    rng = np.random.default_rng(0)
    y = rng.standard_t(nu, m) * math.sqrt(3.0 * v * (nu - 2) / nu)
    pred = StudentTMixture(np.ones(1), np.zeros((m, 1)), np.full((m, 1), v), nu, noise_variances=np.full((m, 1), v))
    for scaled in (scale_mixture(pred, 2.5), scale_spread(pred, 2.5)):
        assert isinstance(scaled, StudentTMixture) and scaled.df == nu
        np.testing.assert_allclose(scaled.variances, 2.5 * v)
        np.testing.assert_allclose(scaled.noise_variances, 2.5 * v)
    c = fit_variance_scale(pred, y, prior_sd=1e6)
    grid = np.linspace(2.0, 4.0, 2001)
    brute = grid[np.argmax([scale_mixture(pred, g).log_prob(y).sum() for g in grid[::10]]) * 10]
    assert abs(c - brute) <= 0.011
    assert c == pytest.approx(3.0, rel=0.1)


@pytest.mark.parametrize("setting, n, expected", [
    ("heldout", 1, True), ("heldout", 0, False), ("none", 5000, False),
    ("auto", AUTO_MIN_HELDOUT_ROWS, True), ("auto", AUTO_MIN_HELDOUT_ROWS - 1, False), ("auto", 0, False)])
def test_which_settings_fit_a_scale_on_how_many_held_out_rows(setting, n, expected):
    assert scales_on(setting, n) is expected
