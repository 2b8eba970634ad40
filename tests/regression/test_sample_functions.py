"""``sample_functions(X, n_samples, random_state=seed)``: the (n, N) values at the rows of X of n
predictors drawn from the fitted posterior (or its dropout masks), the same n predictors for any X
given the seed: what the OOD experiment's function-space entropy asks every estimator for."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dubito.inference.diagnostics import ConvergenceWarning
from dubito.regression import (
    HyperVIRegressor,
    MCDropoutRegressor,
    MeanFieldVIRegressor,
    NUTSNetworkRegressor,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 2))
Y = np.sin(X[:, 0]) + 0.2 * RNG.normal(size=40) + 5.0
X_NEW = RNG.normal(size=(9, 2))

FAST = {
    "mfvi": lambda: MeanFieldVIRegressor(hidden=(4,), epochs=3, n_samples=5, random_state=0, progress=False),
    "nuts": lambda: NUTSNetworkRegressor(hidden=(3,), num_warmup=20, num_samples=10, max_tree_depth=3, random_state=0,
                                         progress=False),
    "mc-dropout": lambda: MCDropoutRegressor(hidden=(8,), epochs=3, n_samples=5, random_state=0, progress=False),
    "hyvi": lambda: HyperVIRegressor(hidden=4, max_epochs=3, n_ll_samples=4, n_kl_samples=8, n_predictors=5,
                                     random_state=0, progress=False),
}


@pytest.fixture(scope="module", params=sorted(FAST))
def fitted(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # short chains and runs
        return request.param, FAST[request.param]().fit(X, Y)


def test_the_same_seed_gives_the_same_functions_on_any_rows(fitted):
    _, est = fitted
    f = est.sample_functions(X_NEW, 4, random_state=3)
    assert f.shape == (4, X_NEW.shape[0]) and np.isfinite(f).all()
    np.testing.assert_allclose(est.sample_functions(X_NEW[:5], 4, random_state=3), f[:, :5], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(est.sample_functions(X_NEW[5:], 4, random_state=3), f[:, 5:], rtol=1e-12, atol=1e-12)
    assert not np.allclose(est.sample_functions(X_NEW, 4, random_state=4), f)  # another seed, other predictors


def test_the_functions_are_in_the_targets_units(fitted):
    _, est = fitted
    f = est.sample_functions(X, 5, random_state=0)
    assert abs(f.mean() - Y.mean()) < 3 * Y.std()  # around the targets (mean 5), not standardised (mean 0)


def test_nuts_picks_kept_draws_and_their_weights():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = FAST["nuts"]().fit(X, Y)
    every = est.sample_functions(X_NEW)
    assert every.shape[0] == est.samples_.shape[0] * est.samples_.shape[1]
    some = est.sample_functions(X_NEW, 5, random_state=2)
    picked = [int(np.flatnonzero(np.all(np.isclose(every, row, rtol=1e-12, atol=0), axis=1))[0]) for row in some]
    assert picked == sorted(set(picked))  # 5 distinct draws, in chain-major order
    weights = est.sample_parameters(5, random_state=2)
    theta = est.samples_.reshape(-1, est.samples_.shape[-1])[:, :est.n_weights_].numpy()
    np.testing.assert_array_equal(weights, theta[picked])
    np.testing.assert_array_equal(est.sample_functions(X_NEW, 10**6, random_state=2), every)  # n >= S: all


def test_mc_dropout_functions_are_its_masked_networks():
    est = FAST["mc-dropout"]().fit(X, Y)
    np.testing.assert_array_equal(est.sample_functions(X_NEW, 6, random_state=1),
                                  est.predict_draws(X_NEW, masks=est.sample_masks(6, random_state=1)))
