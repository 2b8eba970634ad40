"""The MDN's held-out variance scale (``variance_scaling``): every component variance times one c,
the MAP value on the held-out rows under the log-normal prior of `dubito.variance_scale`. Checked
against SciPy (the MAP by direct minimisation of the held-out mixture's NLL, with SciPy's normal
densities) and against the unscaled fit with the same seed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special, stats

from dubito._estimator import seeds_from
from dubito.early_stopping import holdout_split
from dubito.regression import MixtureDensityRegressor
from dubito.variance_scale import PRIOR_SD

from .variance_scale_io import check_an_older_file_loads_unscaled, check_round_trip_keeps_c

FAST = dict(n_components=3, hidden=(16,), epochs=30, lr=3e-3, batch_size=32, random_state=0, progress=False)


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(300, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + (0.1 + 0.2 * np.abs(X[:, 0])) * rng.normal(size=300)


@pytest.fixture(scope="module")
def plain(Xy):
    return MixtureDensityRegressor(variance_scaling="none", **FAST).fit(*Xy)


@pytest.fixture(scope="module")
def scaled(Xy):
    return MixtureDensityRegressor(variance_scaling="heldout", **FAST).fit(*Xy)


def test_c_is_the_map_of_the_held_out_rows_mixture_likelihood(Xy, plain, scaled):
    """c minimises -sum_j log sum_k w_jk N(y_j; mu_jk, c s_jk^2) + (log c)^2 / (2 tau^2) over the
    held-out rows (drawn again from the documented seed), by SciPy to 1e-4; the network is the
    unscaled fit's, bit for bit."""
    X, y = Xy
    assert plain.variance_scale_ == 1.0
    np.testing.assert_array_equal(scaled.predict(X[:20]), plain.predict(X[:20]))
    rows = holdout_split(len(y), scaled.validation_fraction, seeds_from(scaled.random_state, 5)[4],
                         batch_size=scaled.batch_size)[1]
    w, mu, var = plain.predict_components(X[rows])

    def objective(log_c):
        logp = stats.norm.logpdf(y[rows, None], mu, np.exp(0.5 * log_c) * np.sqrt(var))
        return -special.logsumexp(logp, b=w, axis=1).sum() + log_c**2 / (2 * PRIOR_SD**2)

    oracle = np.exp(optimize.minimize_scalar(objective, bounds=(-5, 5), method="bounded",
                                             options={"xatol": 1e-9}).x)
    assert scaled.variance_scale_ == pytest.approx(oracle, rel=1e-4)
    assert abs(np.log(scaled.variance_scale_)) > 0.03  # the check means something: c moved from 1


def test_the_predictive_keeps_weights_and_means_and_scales_the_variances(Xy, plain, scaled):
    X, _ = Xy
    a, b = plain.predict_components(X[:20]), scaled.predict_components(X[:20])
    np.testing.assert_array_equal(b[0], a[0])
    np.testing.assert_array_equal(b[1], a[1])
    np.testing.assert_allclose(b[2], scaled.variance_scale_ * a[2], rtol=1e-15)
    pred = scaled.predict_distribution(X[:20])
    assert pred.epistemic_var is None and np.allclose(pred.aleatoric_var, pred.var)


def test_without_enough_held_out_rows_c_is_one(Xy):
    X, y = Xy
    few = dict(FAST, epochs=3)
    assert MixtureDensityRegressor(**few, validation_fraction=0.0).fit(X, y).variance_scale_ == 1.0
    # "auto" scales from AUTO_MIN_HELDOUT_ROWS (100) held-out rows up; 30 are held out here
    assert MixtureDensityRegressor(**few, variance_scaling="auto").fit(X, y).variance_scale_ == 1.0


def test_round_trip_keeps_c(Xy, scaled, tmp_path):
    check_round_trip_keeps_c(scaled, *Xy, tmp_path / "mdn.safetensors")


def test_a_file_written_before_the_scale_loads_unscaled(Xy, scaled, plain, tmp_path):
    check_an_older_file_loads_unscaled(scaled, plain, *Xy, tmp_path / "old.safetensors")


def test_an_unknown_variance_scaling_is_refused(Xy):
    with pytest.raises(ValueError, match="variance_scaling"):
        MixtureDensityRegressor(**dict(FAST, epochs=2), variance_scaling="conformal").fit(*Xy)
