"""dubito.metrics.scoring against oracles: scoringrules, properscoring, scipy, hand computation.

Tolerances: closed forms vs the libraries 1e-6 relative (they agree to ~1e-15); quadrature vs
closed forms 1e-6 relative; hand cases 1e-12.
"""

import tracemalloc

import numpy as np
import properscoring as ps
import pytest
import scoringrules as sr
import torch
from scipy import stats
from sklearn.metrics import mean_absolute_error, mean_squared_error

from dubito.metrics import (
    absolute_error,
    crps,
    crps_ensemble,
    crps_mixture,
    crps_normal,
    crps_quadrature,
    interval_score,
    mae,
    nll,
    pinball,
    register_crps,
    rmse,
    squared_error,
)
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.normal import Normal
from dubito.predictive.samples import Samples
from tests.laplace import Laplace

RTOL = 1e-6


def _normal_case(seed, n=300):
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 3, n)
    sd = rng.uniform(0.05, 4.0, n)
    # observations near the centre, in the tails and far outside (up to ~40 sd away)
    y = mu + sd * np.concatenate([rng.normal(0, 1, n - n // 3), rng.uniform(-40, 40, n // 3)])
    return mu, sd, y


def _mixture_case(seed, n=200, m=6):
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(m, 0.7), size=n)
    means = rng.normal(0, 2, (n, m))
    sds = rng.uniform(0.05, 2.0, (n, m))
    y = rng.normal(0, 4, n)
    return w, means, sds, y


# ---------------------------------------------------------------------------- Normal
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crps_normal_matches_scoringrules_and_properscoring(seed):
    mu, sd, y = _normal_case(seed)
    pred = Normal(mu, sd**2)
    got = crps(pred, y)
    assert got.shape == (len(y),) and got.dtype == np.float64
    np.testing.assert_allclose(got, sr.crps_normal(y, mu, sd, backend="numpy"), rtol=RTOL)
    np.testing.assert_allclose(got, ps.crps_gaussian(y, mu, sd), rtol=RTOL)
    np.testing.assert_allclose(crps_normal(mu, sd, y), got, rtol=1e-15)


def test_crps_normal_point_mass_and_broadcasting():
    np.testing.assert_allclose(crps_normal(1.0, 0.0, [0.0, 1.0, 3.5]), [1.0, 0.0, 2.5], rtol=0)
    # scalar std broadcast; crps of N(0,1) at 0 = 2 phi(0) - 1/sqrt(pi) = (sqrt 2 - 1)/sqrt(pi)
    np.testing.assert_allclose(crps_normal(0.0, 1.0, 0.0), (np.sqrt(2) - 1) / np.sqrt(np.pi), rtol=1e-14)
    with pytest.raises(ValueError, match="non-negative"):
        crps_normal(0.0, -1.0, 0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_nll_normal_matches_scoringrules_and_scipy(seed):
    mu, sd, y = _normal_case(seed)
    got = nll(Normal(mu, sd**2), y)
    # scoringrules takes log(pdf), which underflows to -inf beyond ~38 sd: compare where it is finite
    with np.errstate(divide="ignore"):
        oracle = sr.logs_normal(y, mu, sd, backend="numpy")
    finite = np.isfinite(oracle)
    assert finite.sum() > 250
    np.testing.assert_allclose(got[finite], oracle[finite], rtol=RTOL)
    np.testing.assert_allclose(got, -stats.norm.logpdf(y, mu, sd), rtol=1e-12)


def test_crps_quadrature_matches_normal_closed_form():
    mu, sd, y = _normal_case(3, n=200)
    pred = Normal(mu, sd**2)
    np.testing.assert_allclose(crps_quadrature(pred, y), crps_normal(mu, sd, y), rtol=RTOL)
    # small chunks (forces several pred[idx] subsets) give the same numbers
    np.testing.assert_allclose(crps_quadrature(pred, y, n_grid=129, n_gauss=4), crps_normal(mu, sd, y), rtol=RTOL)


def test_crps_quadrature_matches_mixture_closed_form():
    w, means, sds, y = _mixture_case(4, n=60, m=4)
    pred = GaussianMixture(w, means, sds**2)
    np.testing.assert_allclose(crps_quadrature(pred, y), crps_mixture(w, means, sds**2, y), rtol=RTOL)
    # hard case: far-apart, very narrow components (the adaptive refinement must find them)
    rng = np.random.default_rng(14)
    w = np.tile([0.5, 0.3, 0.2], (40, 1))
    means = np.array([-5.0, 0.0, 7.0]) + rng.normal(size=(40, 1))
    var = np.tile([1e-6, 1e-2, 1e-8], (40, 1))
    y = rng.uniform(-8, 9, 40)
    got = crps_quadrature(GaussianMixture(w, means, var), y)
    np.testing.assert_allclose(got, crps_mixture(w, means, var, y), rtol=RTOL)


def test_crps_generic_predictive_falls_back_to_quadrature():
    rng = np.random.default_rng(5)
    loc, scale = rng.normal(0, 2, 150), rng.uniform(0.1, 3, 150)
    y = loc + scale * rng.standard_cauchy(150).clip(-60, 60)
    got = crps(Laplace(loc, scale), y)
    np.testing.assert_allclose(got, sr.crps_laplace(y, loc, scale, backend="numpy"), rtol=RTOL)


def test_register_crps_hook_is_used():
    class Shifted(Laplace):
        pass

    calls = []

    @register_crps(Shifted)
    def _(pred, y):
        calls.append(len(y))
        return np.full(len(y), 7.0)

    out = crps(Shifted(np.zeros(3), np.ones(3)), np.zeros(3))
    assert calls == [3] and np.all(out == 7.0)


# ---------------------------------------------------------------------------- mixtures
@pytest.mark.parametrize("seed,m", [(0, 1), (1, 3), (2, 10)])
def test_crps_mixture_matches_scoringrules(seed, m):
    w, means, sds, y = _mixture_case(seed, m=m)
    pred = GaussianMixture(w, means, sds**2)
    got = crps(pred, y)
    np.testing.assert_allclose(got, sr.crps_mixnorm(y, means, sds, w, backend="numpy"), rtol=RTOL)
    np.testing.assert_allclose(crps_mixture(w, means, sds**2, y), got, rtol=1e-15)
    # unnormalised weights are normalised
    np.testing.assert_allclose(crps_mixture(3 * w, means, sds**2, y), got, rtol=1e-13)


@pytest.mark.parametrize("seed", [0, 1])
def test_nll_mixture_matches_scoringrules(seed):
    w, means, sds, y = _mixture_case(seed)
    got = nll(GaussianMixture(w, means, sds**2), y)
    np.testing.assert_allclose(got, sr.logs_mixnorm(y, means, sds, w, backend="numpy"), rtol=RTOL)


def test_crps_mixture_reduces_to_normal_and_is_chunk_invariant():
    w, means, sds, y = _mixture_case(6, n=50, m=5)
    base = crps_mixture(w, means, sds**2, y)
    for chunk in (1, 7, 50, 1000):
        np.testing.assert_allclose(crps_mixture(w, means, sds**2, y, chunk_size=chunk), base, rtol=1e-14)
    # M identical components == one Normal
    mu, sd = means[:, :1], sds[:, :1]
    same = crps_mixture(w, np.repeat(mu, 5, 1), np.repeat(sd**2, 5, 1), y)
    np.testing.assert_allclose(same, crps_normal(mu[:, 0], sd[:, 0], y), rtol=1e-12)
    # a shared (M,) mixture broadcasts over inputs
    np.testing.assert_allclose(
        crps_mixture([0.3, 0.7], [-1.0, 2.0], [0.5, 1.5], y),
        sr.crps_mixnorm(y, np.array([-1.0, 2.0]), np.sqrt([0.5, 1.5]), np.array([0.3, 0.7]), backend="numpy"),
        rtol=RTOL,
    )


def _many_components(kind, n=40, m=600, seed=0):
    """Mixtures where the quadrature form is the cheaper: MC dropout's shape (spread 0.3, one sd
    1), a kernel density of samples (sd 0.2), similar sds, Dirichlet weights; y spread widely,
    with two rows far outside the mixture and one at its centre."""
    rng = np.random.default_rng(seed)
    spread, sd = {"mc-dropout": (0.3, 1.0), "kde": (1.0, 0.2), "similar": (1.0, None)}[kind]
    mu = rng.normal(rng.normal(0, 3, (n, 1)), spread, (n, m))
    s = np.full((n, m), sd) if sd else rng.uniform(0.5, 1.0, (n, m))
    w = rng.dirichlet(np.ones(m), n) if kind == "similar" else np.full((n, m), 1.0 / m)
    y = mu.mean(axis=1) + rng.normal(0, 2, n)
    y[:3] = [mu[0].max() + 100.0, mu[1].min() - 100.0, mu[2].mean()]
    return w, mu, s, y


@pytest.mark.parametrize("kind", ["mc-dropout", "kde", "similar"])
def test_crps_mixture_quadrature_equals_the_closed_form(kind):
    # tolerance 1e-10 relative; measured <= 3e-13 (the docstring's bound is the rounding of
    # both forms), so a panel too wide or a node rule of the wrong order fails
    w, mu, s, y = _many_components(kind)
    pairs = crps_mixture(w, mu, s**2, y, method="pairs")
    np.testing.assert_allclose(crps_mixture(w, mu, s**2, y, method="quadrature"), pairs, rtol=1e-10)
    np.testing.assert_allclose(crps_mixture(w, mu, s**2, y), pairs, rtol=1e-10)


def test_crps_mixture_auto_takes_the_quadrature_for_many_similar_components(monkeypatch):
    import dubito.metrics.scoring as scoring

    w, mu, s, y = _many_components("mc-dropout", n=5)
    ref = crps_mixture(w, mu, s**2, y, method="pairs")

    def refuse(*args):
        raise AssertionError("the O(M^2) form was used")

    monkeypatch.setattr(scoring, "_crps_mixture_pairs", refuse)
    np.testing.assert_allclose(crps_mixture(w, mu, s**2, y), ref, rtol=1e-10)
    monkeypatch.setattr(scoring, "_QUAD_BUDGET", 1000)  # one row per block: the same values
    np.testing.assert_allclose(crps_mixture(w, mu, s**2, y), ref, rtol=1e-10)
    # few components, a point mass or sds far apart keep the closed form
    with pytest.raises(AssertionError, match="O\\(M\\^2\\)"):
        crps_mixture(w[:, :10], mu[:, :10], s[:, :10] ** 2, y)
    with pytest.raises(AssertionError, match="O\\(M\\^2\\)"):
        crps_mixture(w, mu, np.where(np.arange(mu.shape[1]) == 0, 1e-4, s**2), y)


def test_crps_mixture_quadrature_refuses_a_point_mass_and_unknown_methods():
    w, mu, s, y = _many_components("kde", n=3, m=20)
    var = s**2
    var[0, 3] = 0.0
    with pytest.raises(ValueError, match="positive variances"):
        crps_mixture(w, mu, var, y, method="quadrature")
    np.testing.assert_allclose(crps_mixture(w, mu, var, y), crps_mixture(w, mu, var, y, method="pairs"))
    with pytest.raises(ValueError, match="method must be"):
        crps_mixture(w, mu, var, y, method="fast")


def test_crps_mixture_large_stays_small_in_memory():
    rng = np.random.default_rng(7)
    n, m = 10_000, 50
    w = rng.dirichlet(np.ones(m), n)
    means, var, y = rng.normal(size=(n, m)), rng.uniform(0.1, 2, (n, m)), rng.normal(size=n)
    tracemalloc.start()
    try:
        out = crps_mixture(w, means, var, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300e6, f"peak {peak / 1e6:.0f} MB"
    idx = rng.choice(n, 20, replace=False)
    np.testing.assert_allclose(
        out[idx], sr.crps_mixnorm(y[idx], means[idx], np.sqrt(var[idx]), w[idx], backend="numpy"), rtol=RTOL
    )


# ---------------------------------------------------------------------------- samples
def test_crps_samples_with_noise_is_the_mixture():
    rng = np.random.default_rng(8)
    s, n = 40, 80
    draws = rng.normal(0, 1, (s, n)) + rng.normal(0, 3, n)
    noise = rng.uniform(0.2, 1.0, (s, n))
    y = rng.normal(0, 3, n)
    got = crps(Samples(draws, noise_std=noise), y)
    oracle = sr.crps_mixnorm(y, draws.T, noise.T, np.full((n, s), 1 / s), backend="numpy")
    np.testing.assert_allclose(got, oracle, rtol=RTOL)


def test_crps_samples_kde_is_exact_and_tends_to_the_ensemble_crps():
    rng = np.random.default_rng(9)
    s, n = 30, 60
    draws = rng.normal(0, 2, (s, n))
    y = rng.normal(0, 2, n)
    kde = Samples(draws)  # Scott bandwidth
    h = kde.bandwidth_
    oracle = sr.crps_mixnorm(y, draws.T, np.repeat(h[:, None], s, 1), np.full((n, s), 1 / s), backend="numpy")
    np.testing.assert_allclose(crps(kde, y), oracle, rtol=RTOL)
    np.testing.assert_allclose(crps(kde, y), crps_quadrature(kde, y), rtol=RTOL)
    # as the kernel shrinks, the KDE's CRPS approaches the empirical one (error O(h))
    tiny = Samples(draws, bandwidth=1e-9)
    np.testing.assert_allclose(crps(tiny, y), ps.crps_ensemble(y, draws.T), rtol=RTOL)


def test_crps_ensemble_matches_properscoring():
    rng = np.random.default_rng(10)
    draws = rng.gamma(2.0, 1.0, (25, 100))
    draws[:5] = draws[5:10]  # ties among draws
    y = rng.gamma(2.0, 1.0, 100)
    y[:10] = draws[0, :10]  # y equal to a draw
    np.testing.assert_allclose(crps_ensemble(draws, y), ps.crps_ensemble(y, draws.T), rtol=1e-12)
    np.testing.assert_allclose(
        crps_ensemble(draws, y), sr.crps_ensemble(y, draws.T, estimator="nrg", backend="numpy"), rtol=1e-10
    )


# ---------------------------------------------------------------------------- interval, pinball
Z90 = 1.6448536269514722  # Phi^{-1}(0.95)
Z50 = 0.6744897501960817  # Phi^{-1}(0.75)


def test_interval_score_hand_cases():
    pred = Normal([0.0, 0.0, 0.0, 10.0], [1.0, 1.0, 1.0, 4.0])
    y = np.array([0.0, 3.0, -2.0, 10.0])
    # level 0.9: alpha = 0.1, [l, u] = mu -+ 1.6449 sigma
    width = 2 * Z90
    expected = [width, width + 20 * (3 - Z90), width + 20 * (-Z90 + 2), 2 * width]
    np.testing.assert_allclose(interval_score(pred, y, 0.9), expected, rtol=1e-12)
    # level 0.5: alpha = 0.5, penalty 2/alpha = 4
    np.testing.assert_allclose(interval_score(pred, [1.0, 0.0, 0.0, 10.0], 0.5)[0], 2 * Z50 + 4 * (1 - Z50), rtol=1e-12)
    with pytest.raises(ValueError, match="between 0 and 1"):
        interval_score(pred, y, 1.0)


def test_pinball_hand_cases_and_crps_identity():
    pred = Normal([0.0, 0.0, 1.0], [1.0, 1.0, 4.0])
    y = np.array([2.0, 0.0, -1.0])
    q90 = 1.2815515655446004  # Phi^{-1}(0.9)
    expected = [0.9 * (2 - q90), 0.1 * q90, 0.1 * (1 + 2 * q90 + 1)]
    np.testing.assert_allclose(pinball(pred, y, 0.9), expected, rtol=1e-12)
    np.testing.assert_allclose(pinball(pred, y, 0.5), 0.5 * np.abs(y - [0, 0, 1]), rtol=1e-12)
    both = pinball(pred, y, [0.5, 0.9])
    assert both.shape == (3, 2)
    np.testing.assert_allclose(both[:, 1], expected, rtol=1e-12)
    # CRPS = 2 int_0^1 pinball_q dq (Gneiting & Raftery 2007, eq. 41); midpoint rule, 4000 levels
    qs = (np.arange(4000) + 0.5) / 4000
    np.testing.assert_allclose(2 * pinball(pred, y, qs).mean(axis=1), crps(pred, y), rtol=2e-3)


# ---------------------------------------------------------------------------- point errors
def test_point_errors_match_sklearn():
    rng = np.random.default_rng(11)
    mu, y = rng.normal(size=100), rng.normal(size=100)
    pred = Normal(mu, np.ones(100))
    np.testing.assert_allclose(squared_error(pred, y), (y - mu) ** 2, rtol=1e-15)
    np.testing.assert_allclose(absolute_error(pred, y), np.abs(y - mu), rtol=1e-15)
    assert isinstance(rmse(pred, y), float) and isinstance(mae(pred, y), float)
    assert rmse(pred, y) == pytest.approx(np.sqrt(mean_squared_error(y, mu)), rel=1e-12)
    assert mae(pred, y) == pytest.approx(mean_absolute_error(y, mu), rel=1e-12)


# ---------------------------------------------------------------------------- input handling
SCORES = [nll, crps, squared_error, absolute_error, rmse, mae, interval_score, lambda p, y: pinball(p, y, 0.3)]


@pytest.mark.parametrize("fn", SCORES)
def test_wrong_length_or_nonfinite_y_raises(fn):
    pred = Normal(np.zeros(4), np.ones(4))
    with pytest.raises(ValueError, match=r"y must have shape \(4,\)"):
        fn(pred, np.zeros(5))
    with pytest.raises(ValueError, match=r"y must have shape \(4,\)"):
        fn(pred, np.zeros((4, 1)))
    with pytest.raises(ValueError, match="finite"):
        fn(pred, [0.0, np.nan, 0.0, 0.0])


def test_torch_inputs_accepted():
    mu, sd, y = _normal_case(12, n=30)
    pred = Normal(torch.tensor(mu), torch.tensor(sd**2))
    np.testing.assert_allclose(crps(pred, torch.tensor(y)), crps_normal(mu, sd, y), rtol=1e-15)
    np.testing.assert_allclose(nll(pred, torch.tensor(y, dtype=torch.float32)), nll(pred, y.astype(np.float32)), rtol=1e-12)
    np.testing.assert_allclose(crps_normal(torch.tensor(mu), torch.tensor(sd), torch.tensor(y)), crps_normal(mu, sd, y))


def test_non_predictive_refused():
    with pytest.raises(TypeError, match="RegressionPredictive"):
        crps(np.zeros(3), np.zeros(3))


def test_scores_are_proper_in_expectation():
    """Sanity oracle for 'must be able to fail': the true predictive beats a wrong one on average."""
    rng = np.random.default_rng(13)
    y = rng.normal(0, 1, 4000)
    right, wide, shifted = Normal(np.zeros(4000), 1.0), Normal(np.zeros(4000), 4.0), Normal(np.full(4000, 0.5), 1.0)
    for score in (crps, nll):
        assert score(right, y).mean() < score(wide, y).mean()
        assert score(right, y).mean() < score(shifted, y).mean()
    # and the exact expectation: E CRPS(N(0,1), Y), Y ~ N(0,1) = 1/sqrt(pi) (Gneiting & Raftery 2007)
    se = crps(right, y).std() / np.sqrt(y.size)
    assert abs(crps(right, y).mean() - 1 / np.sqrt(np.pi)) < 4 * se
