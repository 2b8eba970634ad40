"""`dubito.variance_scale`: the held-out MAP variance scale, against its closed forms."""

import math

import numpy as np
import pytest

from dubito.predictive.mixture import GaussianMixture
from dubito.variance_scale import PRIOR_SD, fit_variance_scale, scale_mixture


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
