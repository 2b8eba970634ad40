"""DeepEnsembleRegressor's predictive distribution against the paper's formulas.

Spec bayesian-ensembles.md Sec. 6: tests 1, 2, 5 (fitted gamma), 7, 8, 9, 10, 12, 15.
Small nets and a few epochs: the identities hold for any weights, trained or not.
"""

import copy

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import logsumexp

from dubito.data.synthetic import toy2
from dubito.predictive import GaussianMixture, StudentTMixture
from dubito.regression import DeepEnsembleRegressor
from dubito.regression._gamma import gamma_closed_form
from dubito.regression.ensemble import DEFAULT_TAIL_DF

# the paper's protocol: every training row, a fixed number of epochs (no held-out share)
FAST = dict(hidden=(16, 8), epochs=5, batch_size=32, lr=1e-2, progress=False, random_state=0, validation_fraction=0.0)


@pytest.fixture(scope="module")
def data():
    X, y, _ = toy2(n=120, seed=0)
    Xq, _, etaq = toy2(n=40, seed=1)
    return X, y, Xq, etaq


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return DeepEnsembleRegressor(n_members=4, **FAST).fit(X, y)


def _train_features(est, X):
    """h_l and sigma_l^2 of every member on the training rows, normalised units, float64."""
    Xs = torch.as_tensor((X - est.x_mean_) / est.x_scale_)
    with torch.no_grad():
        mean, var, h = est.net_(Xs)
    return mean.numpy(), var.numpy(), h.numpy()


def _make_identical(est, X):
    """Copy member 0 into every member and recompute gamma (eq. 36) for the copies."""
    with torch.no_grad():
        for p in est.net_.parameters():
            p[:] = p[:1].clone()
    est.gammas_ = est._compute_gammas((X - est.x_mean_) / est.x_scale_)
    return est


def test_gammas_are_eq_36_on_own_features_in_normalised_units(fitted, data):
    """P5: member's own h_l, sigma_l^2, all N training rows, lambda_prior = N (10 / N) = 10."""
    X, y, _, _ = data
    _, var, h = _train_features(fitted, X)
    assert fitted.lambda_prior_ == pytest.approx(10.0)  # default weight_decay = prior_precision / N, per_sample
    np.testing.assert_allclose(fitted.gammas_, gamma_closed_form(h, var, 10.0), rtol=1e-12)
    assert np.all(fitted.gammas_ > 0) and np.all(fitted.gammas_ <= 1 / fitted.lambda_prior_)
    assert len(set(np.round(fitted.gammas_, 12))) == 4  # members differ


def test_identical_members(data):
    """Spec test 1: identical members -> DE epistemic 0, EXT epistemic = gamma ||h||^2,
    all gamma_l equal."""
    X, y, Xq, _ = data
    est = _make_identical(DeepEnsembleRegressor(n_members=3, **FAST).fit(X, y), X)
    assert np.all(est.gammas_ == est.gammas_[0])
    comp = est.predict_components(Xq)
    de = est.predict_distribution(Xq, correction="none")
    ext = est.predict_distribution(Xq, correction="bayes")
    scale2 = est.y_scale_**2
    assert np.max(de.epistemic_var) <= 1e-24 * scale2
    np.testing.assert_allclose(ext.epistemic_var, comp.gamma_terms[:, 0], rtol=1e-9)
    assert np.all(ext.epistemic_var > 0)
    np.testing.assert_allclose(ext.mean, de.mean, rtol=0, atol=0)


def test_single_member(data):
    """Spec test 2: L = 1 -> DE epistemic 0 and EXT epistemic gamma_1 ||h_1(x)||^2."""
    X, y, Xq, _ = data
    est = DeepEnsembleRegressor(n_members=1, **FAST).fit(X, y)
    comp = est.predict_components(Xq)
    assert comp.means.shape == (40, 1) and est.gammas_.shape == (1,)
    de = est.predict_distribution(Xq, correction="none")
    ext = est.predict_distribution(Xq)
    np.testing.assert_array_equal(de.epistemic_var, 0.0)
    np.testing.assert_allclose(ext.epistemic_var, comp.gamma_terms[:, 0], rtol=1e-12)
    np.testing.assert_allclose(ext.aleatoric_var, comp.noise_variances[:, 0], rtol=1e-12)
    np.testing.assert_allclose(est.predict(Xq), comp.means[:, 0], rtol=1e-12)


def test_gamma_term_is_gamma_times_squared_feature_norm_in_user_units(fitted, data):
    X, y, Xq, _ = data
    Xs = torch.as_tensor((Xq - fitted.x_mean_) / fitted.x_scale_)
    with torch.no_grad():
        mean, var, h = fitted.net_(Xs)
    comp = fitted.predict_components(Xq)
    s = fitted.y_scale_
    np.testing.assert_allclose(comp.gamma_terms, (fitted.gammas_[:, None] * (h.numpy() ** 2).sum(-1)).T * s**2, rtol=1e-12)
    np.testing.assert_allclose(comp.noise_variances, var.numpy().T * s**2, rtol=1e-12)
    np.testing.assert_allclose(comp.means, mean.numpy().T * s + fitted.y_mean_, rtol=1e-12)


def test_mixture_parameters_and_moments(fitted, data):
    """Spec Sec. 2.5 / eq. (6), (7), (15): equal weights 1/L, components N(eta_l, sigma_l^2 +
    gamma_l ||h_l||^2); mean eta-bar; aleatoric (1/L) sum sigma_l^2; epistemic = population
    spread of eta_l (1/L, P1) + (1/L) sum gamma_l ||h_l||^2."""
    _, _, Xq, _ = data
    comp = fitted.predict_components(Xq)
    d = fitted.predict_distribution(Xq)
    assert isinstance(d, StudentTMixture) and d.n_components == 4 and d.df == DEFAULT_TAIL_DF
    np.testing.assert_allclose(d.weights, 0.25)
    np.testing.assert_allclose(d.variances, comp.noise_variances + comp.gamma_terms, rtol=1e-12)
    np.testing.assert_allclose(d.mean, comp.means.mean(1), rtol=1e-12)
    np.testing.assert_allclose(d.aleatoric_var, comp.noise_variances.mean(1), rtol=1e-12)
    spread = np.var(comp.means, axis=1, ddof=0)
    np.testing.assert_allclose(d.epistemic_var, spread + comp.gamma_terms.mean(1), rtol=1e-10)
    np.testing.assert_allclose(d.var, d.epistemic_var + d.aleatoric_var, rtol=1e-10)
    np.testing.assert_allclose(fitted.predict(Xq), d.mean, rtol=1e-12)
    de = fitted.predict_distribution(Xq, correction="none")
    np.testing.assert_allclose(de.epistemic_var, spread, rtol=1e-10)
    np.testing.assert_allclose(de.variances, comp.noise_variances, rtol=0)


def test_student_t_components_keep_the_gaussian_moments(fitted, data):
    """``tail_df`` nu: component l is t_nu(eta_l, s_l) with s_l^2 = v_l (nu - 2) / nu, v_l the Gaussian
    component's variance (scipy's t density); ``tail_df=None`` is the paper's Gaussian mixture with
    the same moments and variance decomposition."""
    _, _, Xq, _ = data
    d = fitted.predict_distribution(Xq)
    gaussian = copy.copy(fitted)
    gaussian.tail_df = None
    g = gaussian.predict_distribution(Xq)
    assert type(g) is GaussianMixture
    for name in ("mean", "var", "epistemic_var", "aleatoric_var", "variances", "means"):
        np.testing.assert_array_equal(getattr(d, name), getattr(g, name))
    nu = DEFAULT_TAIL_DF
    y = g.mean + np.linspace(-8, 8, len(Xq)) * g.std
    comps = stats.t.logpdf(y[:, None], nu, g.means, np.sqrt(g.variances * (nu - 2) / nu))
    np.testing.assert_allclose(d.log_prob(y), logsumexp(comps, axis=1) - np.log(4), rtol=1e-10)
    far = np.abs(y - g.mean) > 5 * g.std
    assert np.all(d.log_prob(y)[far] > g.log_prob(y)[far])


@pytest.mark.parametrize("tail_df", [2, 0.5, "6", float("inf")])
def test_bad_tail_df_is_refused_at_fit(data, tail_df):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="degrees of freedom"):
        DeepEnsembleRegressor(n_members=2, tail_df=tail_df, **FAST).fit(X, y)


def test_one_over_L_normalisation():
    """Spec test 9: two members at eta = 0 and 2 have epistemic variance 1, not 2."""
    d = GaussianMixture(np.full(2, 0.5), np.array([[0.0, 2.0]]), np.ones((1, 2)), noise_variances=np.ones((1, 2)))
    assert d.epistemic_var[0] == pytest.approx(1.0, abs=1e-15)


def test_one_over_L_normalisation_two_fitted_members(data):
    X, y, Xq, _ = data
    est = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, y)
    m = est.predict_components(Xq).means
    de = est.predict_distribution(Xq, correction="none")
    np.testing.assert_allclose(de.epistemic_var, ((m[:, 0] - m[:, 1]) / 2) ** 2, rtol=1e-10)
    assert not np.allclose(de.epistemic_var, (m[:, 0] - m[:, 1]) ** 2 / 2)  # not 1/(L-1)


def test_ext_dominates_de_with_the_same_mean(fitted, data):
    """Spec test 10: EXT >= DE pointwise (epistemic and total), same mean, same aleatoric."""
    _, _, Xq, _ = data
    de = fitted.predict_distribution(Xq, correction="none")
    ext = fitted.predict_distribution(Xq, correction="bayes")
    np.testing.assert_array_equal(ext.mean, de.mean)
    np.testing.assert_allclose(ext.aleatoric_var, de.aleatoric_var, rtol=0)
    assert np.all(ext.epistemic_var > de.epistemic_var)
    assert np.all(ext.var > de.var)
    diff = ext.epistemic_var - de.epistemic_var
    np.testing.assert_allclose(diff, fitted.predict_components(Xq).gamma_terms.mean(1), rtol=1e-8)


def test_closed_form_mixture_matches_algorithm_2(fitted, data):
    """Spec test 8: 2e5 draws of Algorithm 2 (W ~ N(W_l, gamma_l I), eta = W h_l(x), y ~
    N(eta, sigma_l^2)) follow the closed-form mixtures. Tolerances: |ECDF - F| <= 0.006 at
    every evaluated point (DKW: P(sup > 0.006) <= 2 exp(-2 n 0.006^2) ~ 1e-6); means within
    4 standard errors; variances within 2 % (~4 sd for these mixtures)."""
    _, _, Xq, _ = data
    Xq = Xq[:4]
    n = 200_000
    comp = fitted.predict_components(Xq)
    w = np.full(4, 0.25)
    for target, dist in (
        ("y", fitted.predict_distribution(Xq)),
        ("eta", GaussianMixture(w, comp.means, comp.gamma_terms)),
    ):
        s = fitted.sample_posterior(Xq, n, target=target, random_state=5)
        assert s.shape == (n, 4)
        np.testing.assert_array_less(np.abs(s.mean(0) - dist.mean), 4 * np.sqrt(dist.var / n))
        np.testing.assert_allclose(s.var(0), dist.var, rtol=0.02)
        grid = dist.quantile(np.array([[0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98]]))  # (4, 7)
        ecdf = (s[:, :, None] <= grid[None]).mean(0)
        np.testing.assert_array_less(np.abs(ecdf - dist.cdf(grid)), 0.006)
    # the epistemic part of the y-predictive is the eta-posterior's variance (eq. 15)
    ext = fitted.predict_distribution(Xq)
    eta = GaussianMixture(w, comp.means, comp.gamma_terms)
    np.testing.assert_allclose(ext.epistemic_var, eta.var, rtol=1e-10)
    # correction="none": Algorithm 2 with gamma = 0 draws exactly the member means
    s0 = fitted.sample_posterior(Xq, 1000, target="eta", correction="none", random_state=0)
    assert np.all(np.isclose(s0[:, :, None], comp.means[None]).any(-1))


def test_jacobian_of_mean_wrt_last_layer_weights(fitted, data):
    """Spec test 7: J J^T over the mean-head weights equals ||h(x)||^2 (p_y = 1); with the
    bias also random, ||h||^2 + 1 -- which is what random_bias=True uses."""
    X, y, Xq, _ = data
    net = fitted.net_
    x = torch.as_tensor((Xq[:3] - fitted.x_mean_) / fitted.x_scale_)
    for l in range(net.n_members):
        for i in range(3):
            net.zero_grad()
            mean, _, h = net(x[i : i + 1])
            mean[l, 0].backward()
            Jw = net.mean_head.weight.grad[l, :, 0]
            Jb = net.mean_head.bias.grad[l, 0, 0]
            hn2 = float((h[l, 0].detach() ** 2).sum())
            assert float(Jw @ Jw) == pytest.approx(hn2, rel=1e-12)
            assert float(Jw @ Jw + Jb**2) == pytest.approx(hn2 + 1, rel=1e-12)
    net.zero_grad()
    est = DeepEnsembleRegressor(n_members=2, random_bias=True, **FAST).fit(X, y)
    comp = est.predict_components(Xq)
    _, var, h = _train_features(est, X)
    haug = np.concatenate([h, np.ones_like(h[..., :1])], -1)
    np.testing.assert_allclose(est.gammas_, gamma_closed_form(haug, var, est.lambda_prior_), rtol=1e-12)
    with torch.no_grad():
        hq = est.net_(torch.as_tensor((Xq - est.x_mean_) / est.x_scale_))[2].numpy()
    expected = (est.gammas_[:, None] * ((hq**2).sum(-1) + 1)).T * est.y_scale_**2
    np.testing.assert_allclose(comp.gamma_terms, expected, rtol=1e-12)


def test_affine_target_rescaling(data):
    """Spec test 12: y -> a y + b (a > 0) gives mean a m + b, variances a^2 v (same gammas),
    so coverage and ratio are unchanged; an affine rescaling of X changes nothing.
    Tolerance 1e-4 relative (float32 training on bit-identical standardised data)."""
    X, y, Xq, etaq = data
    a, b = 37.0, -120.0
    base = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, y)
    scaled = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, a * y + b)
    moved = DeepEnsembleRegressor(n_members=2, **FAST).fit(X * [3.0, 0.5] + [1.0, -7.0], y)
    d0, d1 = base.predict_distribution(Xq), scaled.predict_distribution(Xq)
    d2 = moved.predict_distribution(Xq * [3.0, 0.5] + [1.0, -7.0])
    np.testing.assert_allclose(scaled.gammas_, base.gammas_, rtol=1e-4)
    np.testing.assert_allclose(d1.mean, a * d0.mean + b, rtol=1e-4, atol=1e-4 * a)
    for attr in ("var", "epistemic_var", "aleatoric_var"):
        np.testing.assert_allclose(getattr(d1, attr), a**2 * getattr(d0, attr), rtol=1e-4)
        np.testing.assert_allclose(getattr(d2, attr), getattr(d0, attr), rtol=1e-4)
    np.testing.assert_allclose(d2.mean, d0.mean, rtol=1e-4, atol=1e-5)
    cov0 = np.abs(etaq - d0.mean) <= 1.96 * np.sqrt(d0.epistemic_var)
    cov1 = np.abs(a * etaq + b - d1.mean) <= 1.96 * np.sqrt(d1.epistemic_var)
    assert cov0.mean() == cov1.mean()
    np.testing.assert_allclose(d1.epistemic_var / d1.aleatoric_var, d0.epistemic_var / d0.aleatoric_var, rtol=1e-4)


def test_nested_members_equal_fresh_ensemble(data):
    """Spec test 15 / P16: members 1-2 of a 4-member fit are the members of a fresh 2-member
    fit with the same seed (member l's stream depends on (seed, l) only), so the nested
    evaluation equals a fresh evaluation. Tolerance 1e-5 relative (float32 training)."""
    X, y, Xq, etaq = data
    big = DeepEnsembleRegressor(n_members=4, **FAST).fit(X, y)
    small = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, y)
    np.testing.assert_allclose(big.gammas_[:2], small.gammas_, rtol=1e-5)
    nested, fresh = big.predict_distribution(Xq, n_members=2), small.predict_distribution(Xq)
    assert nested.n_components == 2
    for attr in ("means", "variances", "noise_variances"):
        np.testing.assert_allclose(getattr(nested, attr), getattr(fresh, attr), rtol=1e-5)
    cov = lambda d: np.mean(np.abs(etaq - d.mean) <= 1.959964 * np.sqrt(d.epistemic_var))  # noqa: E731
    assert cov(nested) == cov(fresh)
    # and from the components of the full run by hand
    comp = big.predict_components(Xq)
    np.testing.assert_allclose(nested.mean, comp.means[:, :2].mean(1), rtol=1e-12)
    with pytest.raises(ValueError, match="only 4 members"):
        big.predict_distribution(Xq, n_members=5)


def test_fit_is_reproducible_and_seed_matters(data):
    X, y, Xq, _ = data
    a = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, y).predict(Xq)
    b = DeepEnsembleRegressor(n_members=2, **FAST).fit(X, y).predict(Xq)
    c = DeepEnsembleRegressor(n_members=2, **{**FAST, "random_state": 1}).fit(X, y).predict(Xq)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_training_reduces_the_loss_and_learns(data):
    X, y, _ = toy2(n=500, seed=3)
    _, _, Xq, etaq = data
    est = DeepEnsembleRegressor(n_members=2, hidden=(32, 16), epochs=40, batch_size=32, lr=1e-2, prior_precision=1.0,
                                lr_drop="halving", validation_fraction=0.0, progress=False, random_state=0).fit(X, y)
    assert est.loss_curve_.shape == (40, 2)
    assert np.all(est.loss_curve_[-1] < est.loss_curve_[0] - 0.5)
    rmse = np.sqrt(np.mean((est.predict(Xq) - etaq) ** 2))
    assert rmse < 0.35 * np.std(etaq), rmse  # noise sd 0.2, sd of eta 0.43


def test_progress_bar_runs(data, capsys):
    X, y, _, _ = data
    DeepEnsembleRegressor(n_members=2, hidden=(4,), epochs=2, progress=True, random_state=0).fit(X, y)
    assert "deep ensemble" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_matches_cpu(data):
    X, y, Xq, _ = data
    cpu = DeepEnsembleRegressor(n_members=3, **FAST).fit(X, y)
    gpu = DeepEnsembleRegressor(n_members=3, device="cuda", **FAST).fit(X, y)
    assert next(gpu.net_.parameters()).device.type == "cuda"
    np.testing.assert_allclose(gpu.predict(Xq), cpu.predict(Xq), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(gpu.gammas_, cpu.gammas_, rtol=1e-2)


def test_chunked_prediction_and_gamma_equal_unchunked(fitted, data, monkeypatch):
    """Row chunking (bounded memory for large N) does not change any number."""
    import dubito.regression.ensemble as ens

    X, _, Xq, _ = data
    full = fitted.predict_components(Xq)
    g_full = fitted._compute_gammas((X - fitted.x_mean_) / fitted.x_scale_)
    monkeypatch.setattr(ens, "_CHUNK_ELEMENTS", 16 * 4 * 7)  # 7 rows per chunk
    chunked = fitted.predict_components(Xq)
    for a, b in zip(full, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_allclose(fitted._compute_gammas((X - fitted.x_mean_) / fitted.x_scale_), g_full, rtol=1e-13)


def test_no_hidden_layer_uses_inputs_as_features(data):
    """hidden=(): eta = W x + b, so h(x) is the standardised input and p_h = n_features."""
    X, y, Xq, _ = data
    est = DeepEnsembleRegressor(n_members=2, **{**FAST, "hidden": ()}).fit(X, y)
    Xs = (X - est.x_mean_) / est.x_scale_
    _, var, h = _train_features(est, X)
    np.testing.assert_allclose(h[0], Xs)
    np.testing.assert_allclose(est.gammas_, gamma_closed_form(h, var, est.lambda_prior_), rtol=1e-12)
    assert est.predict_distribution(Xq, n_members=1).n_components == 1
