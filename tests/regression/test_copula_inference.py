"""IC-NLM inference through the estimator (spec icnlm.md §5 C1, §6.12).

Data: the spec's feature-level synthetic generator (tests/regression/copula_synthetic.py) and
the UCI yacht set. Posterior recovery uses the exact marginal G (``SteeringMarginal``), so that
the pseudo responses are the simulated z and the posterior targets beta*: with a KDE marginal
the copula is fitted to the empirical marginal of y, which under a fixed beta* is not G, and the
coefficients it targets differ from beta* (measured: up to 40% smaller on this design).

NUTS is costly here (about 1 ms per gradient, 10-15 gradients per iteration, nearly all of it
Pyro's and torch's per-call overhead), so the chains are short; every tolerance is stated with
its assertion and the seeds are fixed. What the posterior machinery already checks against
oracles (conjugate posterior, gradients, copula algebra) is in test_copula_posterior.py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from dubito.regression import ImplicitCopulaRegressor
from dubito.regression.copula_posterior import (
    CopulaModel,
    conjugate_posterior,
    copula_scales,
)

from .copula_synthetic import SteeringMarginal, feature_synthetic, steering_ppf

f64 = torch.float64
NUTS = dict(inference="nuts", nuts_samples=500, nuts_warmup=200, nuts_chains=2, random_state=0, progress=False)
# the synthetic data come from the paper's model, without an intercept: the recovery tests fit that model
PAPER = dict(intercept=False)
RIDGE_BETA, RIDGE_TAU2 = np.array([1.0, -0.8, 0.6, -0.5]), 0.5


@pytest.fixture(scope="module")
def ridge_nuts():
    """NUTS (2 x 500 draws) on n = 1000 synthetic rows, p = 4, ridge truth tau*^2 = 0.5."""
    psi, _, y = feature_synthetic(1000, RIDGE_BETA, RIDGE_TAU2, seed=0)
    est = ImplicitCopulaRegressor.from_features(psi, y, marginal=SteeringMarginal(), prior="ridge", **PAPER, **NUTS)
    return psi, y, est


def _check_nuts_recovers(est, beta):
    post = est.posterior_
    d = post.diagnostics
    # R-hat < 1.01 (Vehtari et al. 2021) on every coordinate, no divergent transition after warm-up
    assert np.max(d["rhat"]) < 1.01
    assert np.all(d["divergences"] == 0)
    assert np.min(d["ess_bulk"]) > 500  # 1,000 draws, near-independent with the dense mass matrix
    # beta* covered: |posterior mean - beta*| < 4 posterior sd for every j
    mean, sd = post.beta.mean(0).numpy(), post.beta.std(0).numpy()
    assert np.all(np.abs(mean - beta) < 4 * sd), (mean, sd)
    return post


def test_nuts_ridge_recovers_the_truth(ridge_nuts):
    _, _, est = ridge_nuts
    post = _check_nuts_recovers(est, RIDGE_BETA)  # measured: R-hat 1.003, ESS >= 738, |err| <= 2.0 sd
    # tau*^2 inside the central 99% posterior interval
    lo, hi = np.quantile(post.tau2.numpy(), [0.005, 0.995])
    assert lo < RIDGE_TAU2 < hi
    assert post.theta_by_chain.shape == (2, 500, 5)


def test_nuts_horseshoe_recovers_the_truth():
    # p = 3 strong signals: a horseshoe posterior without funnels (weak coefficients give lambda_j a
    # funnel, divergences and slow mixing: seen with beta* = (1, -0.8, 0.6) on another feature draw)
    beta, lam2 = np.array([1.5, -1.2, 1.0]), np.array([1.0, 0.6, 0.4])
    psi, _, y = feature_synthetic(1000, beta, lam2, seed=0)
    est = ImplicitCopulaRegressor.from_features(psi, y, marginal=SteeringMarginal(), prior="horseshoe", **PAPER,
                                                **NUTS)
    post = _check_nuts_recovers(est, beta)  # measured: R-hat 1.005, ESS >= 808, |err| <= 1.5 sd
    assert post.names[-1] == "log_tau" and post.theta.shape == (1000, 7)


def test_nuts_ridge_with_the_random_intercept_recovers_the_truth():
    # z = s (psi' beta* + beta_0* + eps), s = (1 + kappa* + tau*^2 ||psi||^2)^(-1/2): the default model
    psi, _, _ = feature_synthetic(1000, RIDGE_BETA, RIDGE_TAU2, seed=0)
    kappa, beta0 = 2.0, 0.8
    rng = np.random.default_rng(5)
    s = 1.0 / np.sqrt(1.0 + kappa + RIDGE_TAU2 * np.sum(psi**2, axis=1))
    y = steering_ppf(stats.norm.cdf(s * (psi @ RIDGE_BETA + beta0 + rng.normal(size=1000))))
    est = ImplicitCopulaRegressor.from_features(psi, y, marginal=SteeringMarginal(), prior="ridge", **NUTS)
    assert est.intercept is True and est.posterior_.names[-2:] == ["log_tau2", "log_kappa"]
    post = _check_nuts_recovers(est, np.r_[RIDGE_BETA, beta0])
    for draws, truth in ((post.tau2, RIDGE_TAU2), (post.prior_variances[:, -1], kappa)):
        lo, hi = np.quantile(draws.numpy(), [0.005, 0.995])   # inside the central 99 % interval
        assert lo < truth < hi, (lo, hi, truth)


# ---------------------------------------------------------------- spec C1: VI vs NUTS on a UCI set
def _c1_fits(uci_dir, features, vi_iter, nuts_kw):
    """Ridge posteriors by VI (full rank, ``vi_iter`` iterations) and by NUTS on the SAME p = 4 training
    features of yacht split 0: a fixed random ReLU map psi = ReLU(A x_std + b) (``features="random"``)
    or the feature layer of a network trained by ``fit`` (30 epochs; ``"network"``). Returns
    (vi, nuts, psi_test, y_test), both estimators with the mixture predictive."""
    import dubito.data as dd

    Xtr, ytr, Xte, yte = dd.load("yacht", data_dir=uci_dir).split(0)
    post = dict(predictive="mixture", progress=False)
    vi_kw = dict(vi_rank=5, vi_max_iter=vi_iter, vi_min_iter=vi_iter, n_draws=1000, random_state=0, **post)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # VI ConvergenceWarning (fixed iteration count)
        if features == "random":
            rng = np.random.default_rng(0)
            A, b = rng.normal(size=(6, 4)) / np.sqrt(6), 0.5 * rng.normal(size=4)
            mu, sd = Xtr.mean(0), Xtr.std(0)
            psi, psi_test = (np.maximum((X - mu) / sd @ A + b, 0.0) for X in (Xtr, Xte))
            vi = ImplicitCopulaRegressor.from_features(psi, ytr, **vi_kw)
        else:
            vi = ImplicitCopulaRegressor(hidden=(50,), n_features=4, epochs=30, lr=1e-3, **vi_kw).fit(Xtr, ytr)
            assert vi.dead_features_.size == 0  # seed 0: no dead unit, so from_features takes the same psi
            psi, psi_test = vi.train_features_, vi.features(Xte)
    nuts = ImplicitCopulaRegressor.from_features(psi, ytr, inference="nuts", **post, **nuts_kw)
    return vi, nuts, psi_test, yte


def _check_c1(vi, nuts, psi_test, y_test, mc_se_factor):
    """Spec C1 on the same features:
    (a) |mean_VI - mean_NUTS| <= 0.1 sd_NUTS + mc_se_factor * (NUTS MC standard error sd_NUTS /
    sqrt(ESS)) per coordinate (beta and log tau^2); VI's mean is q's (no MC error).
    (b) predictive means in y units: RMS over the test inputs of mean_VI(x) - mean_NUTS(x) <= 2% of
    the test response sd ("within 2%": a difference small against the spread of y, which unlike a
    relative error is not inflated where the predicted mean is near 0), and test MAEs within 1%
    of each other (spec C1: "predictive MAE/MSE agree to < 1%"). Both posterior predictives are
    the mixtures over the draws (the plug-ins differ by construction, spec §2.9).
    (c) sd ratios sd_VI / sd_NUTS in [0.7, 1.4] (spec C1, ridge), with a full-rank q: the paper's
    rank 3 measured 0.43 for log tau^2 on the 4-feature network (0.46-0.67 on three coordinates
    with 6 features), outside C1's range: q's diagonal + rank-3 covariance cannot hold them."""
    q, draws = vi.posterior_.q, nuts.posterior_.theta
    sd = draws.std(0)
    ess = torch.as_tensor(nuts.posterior_.diagnostics["ess_bulk"], dtype=f64)
    diff = (q.mean - draws.mean(0)).abs()
    assert torch.all(diff <= 0.1 * sd + mc_se_factor * sd / ess.sqrt()), (diff / sd).tolist()
    ratio = q.variance().sqrt() / sd
    assert ratio.min() > 0.7 and ratio.max() < 1.4, ratio.tolist()
    mv, mn = vi.predict(features=psi_test), nuts.predict(features=psi_test)
    assert np.sqrt(np.mean((mv - mn) ** 2)) <= 0.02 * y_test.std()
    mae_v, mae_n = np.abs(mv - y_test).mean(), np.abs(mn - y_test).mean()
    assert abs(mae_v - mae_n) <= 0.01 * mae_n
    return diff / sd, ratio


def test_c1_vi_and_nuts_agree_on_yacht(uci_dir):
    # Short runs on random ReLU features (whose posterior NUTS samples at ~8 gradients per iteration,
    # half the trained network's): VI 3,000 iterations, one NUTS chain of 600 draws (MC error of its
    # means ~0.04-0.05 sd, hence the allowance of 3 standard errors on top of the spec's 0.1 sd).
    # Measured: |mean difference| <= 0.03 sd; sd ratios 0.92-1.03; predictive means 0.4% of sd(y) apart.
    vi, nuts, psi_test, y_test = _c1_fits(uci_dir, "random", 3000, dict(nuts_chains=1, nuts_warmup=150,
                                                                       nuts_samples=600, random_state=0))
    rel, _ = _check_c1(vi, nuts, psi_test, y_test, mc_se_factor=3.0)
    assert rel.max() < 0.1  # the spec's bound itself (measured 0.03)


@pytest.mark.slow
def test_c1_vi_and_nuts_agree_on_yacht_network_features(uci_dir):
    # The spec's C1 as stated (no MC allowance), on a trained network's features: NUTS 2 x 2,000 draws, VI
    # 12,000 iterations (the ELBO stopping rule ends near 3,000 here, with means still 0.15-0.25 sd
    # off; 5,000 iterations leave 0.06-0.1). Measured: |mean difference| <= 0.024 sd, sd ratios
    # 0.985-1.023, R-hat 1.001, ESS >= 4,700, predictive means 0.08% of sd(y) apart, MAEs 6.381 both;
    # 66 s of CPU.
    vi, nuts, psi_test, y_test = _c1_fits(uci_dir, "network", 12_000, dict(nuts_chains=2, nuts_warmup=500,
                                                                          nuts_samples=2000, random_state=0))
    _check_c1(vi, nuts, psi_test, y_test, mc_se_factor=0.0)
    assert np.max(nuts.posterior_.diagnostics["rhat"]) < 1.01


# ---------------------------------------------------------------- spec §6.12 invariances
def test_row_permutation_leaves_the_vi_posterior_unchanged():
    psi, _, y = feature_synthetic(300, RIDGE_BETA, RIDGE_TAU2, seed=1)
    perm = np.random.default_rng(0).permutation(300)
    kw = dict(vi_max_iter=300, vi_min_iter=300, n_draws=200, random_state=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: 300 iterations by design
        a = ImplicitCopulaRegressor.from_features(psi, y, **kw)           # KDE marginal: the full path
        b = ImplicitCopulaRegressor.from_features(psi[perm], y[perm], **kw)
    # same seed, same data in another order: equal up to the summation order's rounding, which the
    # 300 stochastic-gradient steps do not amplify (measured 8e-12 after 3,000)
    np.testing.assert_allclose(b.marginal_.cdf_grid_, a.marginal_.cdf_grid_, rtol=0, atol=1e-12)
    torch.testing.assert_close(b.posterior_.theta, a.posterior_.theta, rtol=0, atol=1e-8)
    new = psi[:20]
    np.testing.assert_allclose(b.predict(features=new), a.predict(features=new), rtol=0, atol=1e-8)
    # the check can fail: another seed gives another posterior sample
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = ImplicitCopulaRegressor.from_features(psi[perm], y[perm], **{**kw, "random_state": 1})
    assert (c.posterior_.theta - a.posterior_.theta).abs().max() > 1e-3


def test_ridge_scale_invariance_is_exact_for_the_model():
    r"""psi -> c psi with beta -> beta / c, tau^2 -> tau^2 / c^2 and nu -> nu / c^2 leaves s_i, s_i psi_i'beta
    and hence the likelihood unchanged, and maps the Weibull(1/2, nu) prior on tau^2 onto
    Weibull(1/2, nu / c^2): the log posterior in the new coordinates is the old one plus the log
    Jacobian p log c. (Spec §6.12 writes "psi -> c psi with nu -> c^2 nu, beta' = c beta": that is this
    map read for psi -> psi / c.)"""
    psi, z, _ = feature_synthetic(60, RIDGE_BETA, RIDGE_TAU2, seed=2)
    theta = 0.7 * torch.randn(8, 5, generator=torch.Generator().manual_seed(0), dtype=f64)
    for c in (0.1, 3.0):
        scaled = theta.clone()
        scaled[:, :4] /= c
        scaled[:, 4] -= 2 * math.log(c)
        a, b = CopulaModel(psi, z, "ridge", nu=2.5), CopulaModel(c * psi, z, "ridge", nu=2.5 / c**2)
        torch.testing.assert_close(b.log_prob(scaled) - a.log_prob(theta),
                                   torch.full((8,), 4 * math.log(c), dtype=f64), rtol=0, atol=1e-9)
        # with nu left alone the difference is not constant: the hyperprior matters (the check can fail)
        off = CopulaModel(c * psi, z, "ridge", nu=2.5).log_prob(scaled) - a.log_prob(theta)
        assert off.max() - off.min() > 0.1
        # fixed tau^2 (conjugate beta posterior): the predictive Z_0 | x_0 is identical to rounding
        new = psi[:10]
        for tau2 in (0.5, 2.0):
            m1, c1 = conjugate_posterior(psi, z, tau2)
            m2, c2 = conjugate_posterior(c * psi, z, tau2 / c**2)
            s1 = copula_scales(torch.as_tensor(new), torch.full((1, 4), tau2, dtype=f64))[0]
            s2 = copula_scales(torch.as_tensor(c * new), torch.full((1, 4), tau2 / c**2, dtype=f64))[0]
            torch.testing.assert_close(s2, s1, rtol=1e-12, atol=0)
            nz, cz = torch.as_tensor(new), torch.as_tensor(c * new)
            torch.testing.assert_close(s2 * (cz @ m2), s1 * (nz @ m1), rtol=0, atol=1e-8)       # E[Z_0]
            torch.testing.assert_close(s2**2 * (1 + ((cz @ c2) * cz).sum(1)), s1**2 * (1 + ((nz @ c1) * nz).sum(1)),
                                       rtol=0, atol=1e-8)                                         # Var[Z_0]


@pytest.mark.filterwarnings("ignore::dubito.inference.diagnostics.ConvergenceWarning")  # R-hat of one short chain
def test_ridge_scale_invariance_of_the_nuts_predictive(ridge_nuts):
    # The same data with psi -> 2 psi and nu -> nu / 4, fitted by NUTS (one chain of 400): the posterior predictive means of
    # Z_0 agree within Monte Carlo error. (VI is not used here: ADADELTA from its U(0, 1) start is not
    # scale-equivariant, and at a few thousand iterations its fits of the two problems differed by up
    # to 0.4 predictive sd, 0.02 after 10,000.)
    psi, y, est = ridge_nuts
    c = 2.0
    scaled = ImplicitCopulaRegressor.from_features(c * psi, y, marginal=SteeringMarginal(), prior="ridge",
                                                   nu=2.5 / c**2, **PAPER, **{**NUTS, "nuts_chains": 1, "nuts_warmup": 150,
                                                                     "nuts_samples": 400})
    new = feature_synthetic(30, RIDGE_BETA, RIDGE_TAU2, seed=5, feature_seed=0)[0]
    za = est.posterior_.predict_z(new, "mixture")
    zb = scaled.posterior_.predict_z(c * new, "mixture")
    # MC standard error of a posterior mean of m(x_0) = s_0 psi_0'beta: sd over draws / sqrt(ESS), with
    # the smallest bulk ESS of the beta coordinates standing in for that of m(x_0)
    ess_a = np.min(est.posterior_.diagnostics["ess_bulk"])
    ess_b = np.min(scaled.posterior_.diagnostics["ess_bulk"])
    se = np.sqrt(za.loc.var(1) / ess_a + zb.loc.var(1) / ess_b)
    assert np.all(np.abs(za.mean - zb.mean) <= 4 * se)  # (inputs with psi_0 = 0 predict 0 exactly)
    np.testing.assert_allclose(np.sqrt(zb.var), np.sqrt(za.var), rtol=0.01)   # predictive sds: measured 0.2%
    # and the scaled posterior is the mapped one: beta' = beta / c, tau'^2 = tau^2 / c^2 (4 MC se)
    sd = est.posterior_.beta.std(0).numpy()
    gap = c * scaled.posterior_.beta.mean(0).numpy() - est.posterior_.beta.mean(0).numpy()
    assert np.all(np.abs(gap) < 4 * sd * np.sqrt(1 / ess_a + 1 / ess_b))


# ---------------------------------------------------------------- horseshoe vs ridge on a sparse truth
def test_horseshoe_shrinks_the_zero_coefficients_more_than_ridge():
    """beta* = (1.5, -1, 0, 0, 0, 0), generated with local prior variances (1, 1, 1e-3, ..): the horseshoe
    shrinks the four null coefficients much more than the two signals (small local variances
    lambda_j^2 for the nulls, large for the signals) and recovers beta*; ridge's single tau^2 cannot
    separate them (it also enters s_i) and shrinks nulls and signals alike, the signals by half.

    VI runs 2,000 iterations, short of convergence (ridge tau^2 0.17 here, 0.055 from 4,000 on; null
    lambda^2 still falling): the contrast only grows with more iterations (null/signal ratio of mean
    |beta|: horseshoe 0.053, 0.011, 0.006 at 2,000, 4,000, 6,000; ridge 0.12, 0.10, 0.10)."""
    beta, lam2 = np.array([1.5, -1.0, 0.0, 0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1e-3, 1e-3, 1e-3, 1e-3])
    psi, _, y = feature_synthetic(600, beta, lam2, d=6, seed=0)
    kw = dict(marginal=SteeringMarginal(), vi_max_iter=2000, vi_min_iter=2000, n_draws=2000, random_state=0,
              progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: fixed iteration count
        ridge = ImplicitCopulaRegressor.from_features(psi, y, prior="ridge", **PAPER, **kw).posterior_
        hs = ImplicitCopulaRegressor.from_features(psi, y, prior="horseshoe", **PAPER, **kw).posterior_

    def null_to_signal(post):  # mean |posterior mean| of the nulls over that of the signals
        m = np.abs(post.beta.mean(0).numpy())
        return m[2:].mean() / m[:2].mean()

    assert null_to_signal(hs) < 0.6 * null_to_signal(ridge)   # measured 0.053 vs 0.119
    lam2_med = hs.lambda2.median(0).values.numpy()             # measured (1.09, 0.91 | 0.10, 0.19, 0.23, 0.14)
    assert lam2_med[:2].min() > 2.5 * lam2_med[2:].max()

    def rmse(post):
        return float(np.sqrt(np.mean((post.beta.mean(0).numpy() - beta) ** 2)))

    assert rmse(hs) < 0.5 * rmse(ridge)                        # measured 0.081 vs 0.320
