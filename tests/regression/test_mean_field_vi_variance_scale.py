"""Mean-field VI's held-out variance scale (``variance_scaling="heldout"``, the default): the noise
variance s^2 times one c, the MAP value on the fit's held-out rows under the log-normal prior of
`dubito.variance_scale`. Checked against SciPy (the MAP by direct minimisation of the held-out
mixture's NLL, with SciPy's normal densities) and against the unscaled fit with the same seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special, stats

from dubito._estimator import seeds_from
from dubito.early_stopping import holdout_split
from dubito.regression import MeanFieldVIRegressor
from dubito.variance_scale import PRIOR_SD

from .variance_scale_io import check_an_older_file_loads_unscaled, check_round_trip_keeps_c

FAST = dict(hidden=(16, 16), epochs=60, n_samples=100, batch_size=32, random_state=0, progress=False)


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(300, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.3 * rng.normal(size=300)


@pytest.fixture(scope="module")
def plain(Xy):
    return MeanFieldVIRegressor(variance_scaling="none", **FAST).fit(*Xy)


@pytest.fixture(scope="module")
def scaled(Xy):
    return MeanFieldVIRegressor(**FAST).fit(*Xy)  # the default, "heldout"


def test_c_is_the_map_of_the_held_out_rows_mixture_likelihood(Xy, plain, scaled):
    """c minimises -sum_j log (1/S) sum_s N(y_j; g_s(x_j), c s^2) + (log c)^2 / (2 tau^2) over the
    held-out rows (drawn again from the documented seed), by SciPy to 1e-4; the fit itself is the
    unscaled one, bit for bit."""
    X, y = Xy
    assert plain.variance_scale_ == 1.0
    for key, value in plain.q_.items():
        np.testing.assert_array_equal(scaled.q_[key].numpy(), value.numpy())
    assert scaled.noise_sd_ == plain.noise_sd_
    rows = holdout_split(len(y), scaled.validation_fraction, seeds_from(scaled.random_state, 2)[0])[1]
    g = scaled.sample_functions(X[rows], random_state=0)  # (S, m): the draws predict_distribution uses

    def objective(log_c):
        logp = stats.norm.logpdf(y[rows], g, np.exp(0.5 * log_c) * scaled.noise_sd_)
        return -(special.logsumexp(logp, axis=0) - np.log(g.shape[0])).sum() + log_c**2 / (2 * PRIOR_SD**2)

    oracle = np.exp(optimize.minimize_scalar(objective, bounds=(-5, 5), method="bounded",
                                             options={"xatol": 1e-9}).x)
    assert scaled.variance_scale_ == pytest.approx(oracle, rel=1e-4)
    assert abs(np.log(scaled.variance_scale_)) > 0.03  # the check means something: c moved from 1


def test_the_predictive_keeps_its_draws_and_scales_the_noise(Xy, plain, scaled):
    X, _ = Xy
    c = scaled.variance_scale_
    a, b = plain.predict_distribution(X[:20]), scaled.predict_distribution(X[:20])
    np.testing.assert_array_equal(b.means, a.means)
    np.testing.assert_allclose(b.variances, c * a.variances, rtol=1e-15)
    np.testing.assert_allclose(b.noise_variances, c * plain.noise_sd_**2, rtol=1e-15)
    np.testing.assert_allclose(b.epistemic_var, a.epistemic_var, rtol=1e-12)


def test_without_enough_held_out_rows_c_is_one(Xy):
    X, y = Xy
    assert MeanFieldVIRegressor(**dict(FAST, epochs=3), validation_fraction=0.0).fit(X, y).variance_scale_ == 1.0
    # "auto" scales from AUTO_MIN_HELDOUT_ROWS (100) held-out rows up; 30 are held out here
    assert MeanFieldVIRegressor(**dict(FAST, epochs=3), variance_scaling="auto").fit(X, y).variance_scale_ == 1.0


def test_round_trip_keeps_c(Xy, scaled, tmp_path):
    check_round_trip_keeps_c(scaled, *Xy, tmp_path / "mfvi.safetensors")


def test_a_file_written_before_the_scale_loads_unscaled(Xy, scaled, plain, tmp_path):
    check_an_older_file_loads_unscaled(scaled, plain, *Xy, tmp_path / "old.safetensors")


def test_an_unknown_variance_scaling_is_refused(Xy):
    with pytest.raises(ValueError, match="variance_scaling"):
        MeanFieldVIRegressor(**dict(FAST, epochs=2), variance_scaling="conformal").fit(*Xy)
