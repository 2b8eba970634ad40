"""dubito.metrics.summary.regression_summary: stable keys, values equal to the individual metrics."""

import numpy as np
import pytest

from dubito.metrics import (
    calibration_error,
    coverage,
    crps,
    interval_score,
    level_key,
    mae,
    marginal_calibration,
    nll,
    regression_summary,
    rmse,
    width,
)
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.normal import Normal
from dubito.predictive.samples import Samples

BASE_KEYS = [
    "rmse",
    "mae",
    "nll",
    "crps",
    "coverage_50",
    "coverage_90",
    "coverage_95",
    "width_50",
    "width_90",
    "width_95",
    "interval_score_95",
    "calibration_error",
    "marginal_calibration_gap",
]


def _case(seed=0, n=400):
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    var = rng.uniform(0.2, 2.0, n)
    y = mu + np.sqrt(var) * rng.normal(size=n)
    return mu, var, y


def test_keys_and_values_match_the_individual_functions():
    mu, var, y = _case()
    pred = Normal(mu, var)
    s = regression_summary(pred, y)
    assert list(s) == BASE_KEYS  # no epistemic/aleatoric keys: this Normal does not know them
    assert all(type(v) is float for v in s.values())
    assert s["rmse"] == rmse(pred, y) and s["mae"] == mae(pred, y)
    assert s["nll"] == pytest.approx(nll(pred, y).mean(), rel=1e-15)
    assert s["crps"] == pytest.approx(crps(pred, y).mean(), rel=1e-15)
    cov, wid = coverage(pred, y, (0.5, 0.9, 0.95)), width(pred, (0.5, 0.9, 0.95))
    assert [s["coverage_50"], s["coverage_90"], s["coverage_95"]] == list(cov)
    assert [s["width_50"], s["width_90"], s["width_95"]] == pytest.approx(list(wid), rel=1e-15)
    assert s["interval_score_95"] == pytest.approx(interval_score(pred, y, 0.95).mean(), rel=1e-15)
    assert s["calibration_error"] == calibration_error(pred, y)
    assert s["marginal_calibration_gap"] == marginal_calibration(pred, y).max_gap


def test_variance_parts_reported_when_known():
    mu, var, y = _case(1)
    pred = Normal(mu, var, epistemic_var=0.25 * var, aleatoric_var=0.75 * var)
    s = regression_summary(pred, y)
    assert list(s) == BASE_KEYS + ["mean_epistemic_var", "mean_aleatoric_var"]
    assert s["mean_epistemic_var"] == pytest.approx(np.mean(0.25 * var), rel=1e-14)
    assert s["mean_aleatoric_var"] == pytest.approx(np.mean(0.75 * var), rel=1e-14)
    # a mixture always knows its split; a KDE Samples does not
    rng = np.random.default_rng(2)
    mix = GaussianMixture(np.ones(3), rng.normal(size=(50, 3)), np.full((50, 3), 0.5))
    assert "mean_epistemic_var" in regression_summary(mix, rng.normal(size=50))
    kde = Samples(rng.normal(size=(20, 50)))
    assert list(regression_summary(kde, rng.normal(size=50))) == BASE_KEYS


def test_custom_levels_and_level_keys():
    mu, var, y = _case(3, n=100)
    s = regression_summary(Normal(mu, var), y, levels=(0.8, 0.975))
    assert [k for k in s if k.startswith(("coverage_", "width_"))] == [
        "coverage_80",
        "coverage_97.5",
        "width_80",
        "width_97.5",
    ]
    assert "interval_score_95" in s
    assert [level_key(v) for v in (0.5, 0.9, 0.95, 0.975, 0.99, 0.999)] == ["50", "90", "95", "97.5", "99", "99.9"]
    with pytest.raises(ValueError, match=r"y must have shape \(100,\)"):
        regression_summary(Normal(mu, var), y[:10])


@pytest.mark.parametrize("family", ["normal", "mixture", "samples"])
@pytest.mark.parametrize("block_rows", [1, 37, 400, 10_000])
def test_the_summary_in_blocks_equals_the_whole_summary(family, block_rows):
    """regression_summary_in_blocks (issue 21: bounded memory for a million rows) gives the keys
    and values of regression_summary on the whole predictive, to the rounding of the sums."""
    from dubito.metrics import regression_summary_in_blocks

    mu, var, y = _case(seed=3)
    rng = np.random.default_rng(4)
    n = mu.size
    if family == "normal":
        whole = Normal(mu, var)
    elif family == "mixture":
        whole = GaussianMixture(rng.dirichlet(np.ones(3), size=n), mu[:, None] + rng.normal(size=(n, 3)),
                                var[:, None] * rng.uniform(0.5, 1.5, size=(n, 3)), noise_variances=var[:, None] * 0.5
                                * np.ones((n, 3)))
    else:
        whole = Samples(mu[None, :] + np.sqrt(var)[None, :] * rng.normal(size=(60, n)))
    X = np.arange(n)[:, None]  # the "inputs": row numbers, so predict can slice the whole predictive
    calls = []

    def predict(rows):
        calls.append(len(rows))
        return whole[rows[:, 0]]

    expected = regression_summary(whole, y)
    got = regression_summary_in_blocks(predict, X, y, block_rows=block_rows)
    assert list(got) == list(expected)
    for key in expected:
        assert got[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-14), key
    assert max(calls) <= block_rows and sum(calls) == n


def test_the_summary_in_blocks_refuses_mismatched_inputs():
    from dubito.metrics import regression_summary_in_blocks

    mu, var, y = _case()
    with pytest.raises(ValueError, match="X has 399 rows but y has 400"):
        regression_summary_in_blocks(lambda X: Normal(mu[: len(X)], var[: len(X)]), np.zeros((399, 1)), y)
    with pytest.raises(ValueError, match="block_rows must be >= 1"):
        regression_summary_in_blocks(lambda X: Normal(mu, var), np.zeros((400, 1)), y, block_rows=0)
