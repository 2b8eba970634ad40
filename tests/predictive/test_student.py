"""StudentTMixture against scipy.stats.t, scoringrules' closed-form CRPS and its Gaussian twin."""

import numpy as np
import pytest
import scoringrules as sr
from scipy import stats
from scipy.special import logsumexp

from dubito.metrics import crps
from dubito.predictive import GaussianMixture, StudentTMixture


def _mixture(seed=0, n=6, m=3, df=5.0):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.1, 1.0, (n, m))
    mu = rng.normal(0, 3, (n, m))
    var = rng.uniform(0.2, 4.0, (n, m))
    noise = var * rng.uniform(0.3, 1.0, (n, m))
    return w / w.sum(1, keepdims=True), mu, var, noise, df


def _scales(var, df):
    return np.sqrt(var * (df - 2) / df)


def test_density_and_cdf_match_scipy():
    w, mu, var, noise, df = _mixture()
    pred = StudentTMixture(w, mu, var, df, noise_variances=noise)
    y = np.linspace(-40, 40, 17)[None, :]
    s = _scales(var, df)
    comps = stats.t.logpdf(y[:, :, None], df, mu[:, None, :], s[:, None, :])  # (N, k, M)
    np.testing.assert_allclose(pred.log_prob(y), logsumexp(comps + np.log(w)[:, None, :], axis=-1), rtol=1e-12)
    cdf = (stats.t.cdf(y[:, :, None], df, mu[:, None, :], s[:, None, :]) * w[:, None, :]).sum(-1)
    np.testing.assert_allclose(pred.cdf(y), cdf, rtol=1e-12, atol=1e-15)


def test_moments_and_decomposition_are_the_gaussian_twins():
    w, mu, var, noise, df = _mixture(1)
    pred = StudentTMixture(w, mu, var, df, noise_variances=noise)
    twin = GaussianMixture(w, mu, var, noise_variances=noise)
    for name in ("mean", "var", "epistemic_var", "aleatoric_var"):
        np.testing.assert_array_equal(getattr(pred, name), getattr(twin, name))
    # and the variance is the true one: sum_m w (var_m + mu_m^2) - mean^2 of the t components
    comp_var = stats.t.var(df, 0, _scales(var, df))
    np.testing.assert_allclose(comp_var, var, rtol=1e-12)


def test_quantile_inverts_cdf_and_is_exact_for_one_component():
    w, mu, var, noise, df = _mixture(2, m=4)
    pred = StudentTMixture(w, mu, var, df)
    q = np.array([1e-6, 0.025, 0.3, 0.5, 0.9, 0.975, 1 - 1e-6])
    x = pred.quantile(q)
    np.testing.assert_allclose(pred.cdf(x), np.broadcast_to(q, x.shape), rtol=1e-8, atol=1e-12)
    one = StudentTMixture(np.ones(1), mu[:, :1], var[:, :1], df)
    np.testing.assert_allclose(one.quantile(q), stats.t.ppf(q[None, :], df, mu[:, :1], _scales(var[:, :1], df)),
                               rtol=1e-12)


def test_samples_follow_the_mixture():
    w, mu, var, noise, df = _mixture(3, n=2)
    pred = StudentTMixture(w, mu, var, df)
    draws = pred.sample(40_000, generator=0)  # (n, N)
    assert draws.shape == (40_000, 2)
    for i in range(2):  # Kolmogorov-Smirnov against the mixture CDF; seed fixed, level 0.001
        assert stats.kstest(draws[:, i], lambda t: pred[i].cdf(np.asarray(t)[None, :])[0]).pvalue > 1e-3
    np.testing.assert_array_equal(draws, pred.sample(40_000, generator=0))


def test_crps_matches_scoringrules_closed_form():
    rng = np.random.default_rng(4)
    mu, var, df = rng.normal(0, 2, 20), rng.uniform(0.5, 3, 20), 4.0
    y = mu + rng.standard_t(3, 20) * 3
    pred = StudentTMixture(np.ones(1), mu[:, None], var[:, None], df)
    expected = sr.crps_t(y, df, mu, _scales(var, df))
    np.testing.assert_allclose(crps(pred, y), expected, rtol=1e-6)


def test_heavy_tails_cost_less_far_out_and_approach_the_gaussian():
    w, mu, var, noise, _ = _mixture(5)
    gauss = GaussianMixture(w, mu, var)
    far = gauss.mean + 12 * gauss.std
    assert np.all(StudentTMixture(w, mu, var, 4.0).log_prob(far) > gauss.log_prob(far) + 10)
    near = gauss.mean + 0.5 * gauss.std
    np.testing.assert_allclose(StudentTMixture(w, mu, var, 1e7).log_prob(near), gauss.log_prob(near), atol=1e-6)


def test_subset_keeps_df_and_parameters():
    w, mu, var, noise, df = _mixture(6)
    pred = StudentTMixture(w, mu, var, df, noise_variances=noise)
    sub = pred[[4, 1]]
    assert isinstance(sub, StudentTMixture) and sub.df == df
    np.testing.assert_array_equal(sub.means, mu[[4, 1]])
    np.testing.assert_array_equal(sub.log_prob(0.3), pred.log_prob(0.3)[[4, 1]])


@pytest.mark.parametrize("df", [2, 1.5, -3, float("inf"), float("nan"), "6", True, None])
def test_bad_df_is_one_clear_error(df):
    w, mu, var, noise, _ = _mixture()
    with pytest.raises(ValueError, match="degrees of freedom"):
        StudentTMixture(w, mu, var, df)
