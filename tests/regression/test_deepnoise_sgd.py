"""DeepNoise-SGD (spec §2.3 step 1): the frequentist DeepNoise fitted by the MC-mixture NLL."""
import math

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import norm

from dubito._estimator import DubitoRegressor
from dubito.regression.deepnoise_model import forward_moments
from dubito.regression.deepnoise_sgd import DeepNoiseNet, DeepNoiseSGDRegressor
from tests.old_layout import rewrite_as_older


def _toy(n, seed):
    """sin(3x) + s(x) z with s rising linearly from 0.05 to 0.5 over x in [-1, 1]."""
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, n)
    s = 0.05 + 0.45 * (x + 1) / 2
    return x[:, None], np.sin(3 * x) + s * r.standard_normal(n), s


def _small(**kw):
    args = dict(hidden=(6, 4), epochs=3, batch_size=64, n_noise_samples=8, random_state=0, progress=False)
    args.update(kw)
    return DeepNoiseSGDRegressor(**args)


@pytest.fixture(scope="module")
def data():
    X, y, _ = _toy(80, 0)
    return np.c_[X, X**2], y


@pytest.mark.parametrize("activation, h", [("hardtanh", lambda t: np.clip(t, -1, 1)), ("relu", lambda t: np.maximum(t, 0))])
def test_zero_noise_forward_is_the_plain_mlp(data, activation, h):
    """Hidden noise scales 1e-12 (spec §7.8): every noise-draw component mean equals the
    deterministic numpy MLP in user units, to 1e-9; the component variance is τ_L² sd_y²."""
    X, y = data
    m = _small(activation=activation).fit(X, y)
    with torch.no_grad():
        for t in (*m.net_.log_tau[:-1], *m.net_.log_sigma):
            t.fill_(math.log(1e-12))
    pd = m.predict_distribution(X, n_samples=5)
    u = (X - m.x_mean_) / m.x_scale_
    W = [w.detach().numpy() for w in m.net_.W]
    g = [b.detach().numpy() for b in m.net_.gamma]
    for l in range(len(W) - 1):
        u = h(u @ W[l] + g[l])
    mlp = (u @ W[-1] + g[-1])[:, 0] * m.y_scale_ + m.y_mean_
    np.testing.assert_allclose(pd.means, np.repeat(mlp[:, None], 5, axis=1), rtol=0, atol=1e-9)
    tau_L2 = math.exp(2 * float(m.net_.log_tau[-1][0].detach()))
    np.testing.assert_allclose(pd.variances, tau_L2 * m.y_scale_**2, rtol=1e-9)


def test_mixture_nll_is_minus_log_mean_of_gaussians():
    """mixture_nll = −mean_i log (1/S) Σ_s N(y_i; μ_si, v) with the same noise draws (scipy)."""
    net = DeepNoiseNet((2, 5, 3, 1), "hardtanh", torch.Generator().manual_seed(1), dtype=torch.float64)
    X = torch.randn(30, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y = torch.randn(30, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        nll = float(net.mixture_nll(X, y, 17, torch.Generator().manual_seed(4)))
        mean, var = net.moments(X, 17, torch.Generator().manual_seed(4))
    mean, var = mean.numpy(), float(var)
    expect = -np.mean(logsumexp(norm.logpdf(y.numpy()[None, :], mean, math.sqrt(var)), axis=0) - math.log(17))
    assert nll == pytest.approx(expect, rel=1e-12)
    # exact last layer: v = τ_L² + Σ_k W_L[k]² σ²_{L-1,k}
    with torch.no_grad():
        v = math.exp(2 * float(net.log_tau[2][0])) + float((net.W[2][:, 0] ** 2 * torch.exp(2 * net.log_sigma[1])).sum())
    assert var == pytest.approx(v, rel=1e-12)


def test_learns_heteroscedastic_toy_better_than_any_homoscedastic_gaussian():
    """Test NLL on the toy below that of the *oracle* homoscedastic Gaussian (true mean, best
    constant variance: 0.209), which bounds every homoscedastic Gaussian fit from below.
    Measured (3 seeds, this setting): 0.117, 0.119, 0.118; tolerance: < 0.209 − 0.05."""
    X, y, _ = _toy(400, 0)
    Xt, yt, st = _toy(2000, 1)
    m = DeepNoiseSGDRegressor(hidden=(16, 16), epochs=300, batch_size=400, n_noise_samples=32, lr=1e-2,
                              random_state=0, progress=False).fit(X, y)
    nll = -m.predict_distribution(Xt).log_prob(yt).mean()
    s2 = np.mean(st**2)
    hom = -norm.logpdf(yt, np.sin(3 * Xt[:, 0]), math.sqrt(s2)).mean()
    assert hom == pytest.approx(0.209, abs=0.01)
    assert nll < hom - 0.05, (nll, hom)
    assert m.loss_curve_[-1] < m.loss_curve_[0]


def test_params_round_trip_into_forward_moments(data):
    """params_() through H1's forward_moments gives the SGD model's own predictive: the exact
    last-layer variance to 1e-12; per row the mean and the spread of the component means
    over 20,000 draws each agree within 5 standard errors (mean) and 5% (sd of means)."""
    X, y = data
    m = _small(epochs=20, random_state=3).fit(X, y)
    with torch.no_grad():  # noise large enough that a τ/τ² or σ/σ² mix-up shows
        for t in (*m.net_.log_tau[:-1], *m.net_.log_sigma):
            t.fill_(math.log(0.7))
    p = m.params_()
    Xs = torch.as_tensor((X[:6] - m.x_mean_) / m.x_scale_)
    S = 20000
    mean_h1, var_h1 = forward_moments(p, Xs, "hardtanh", S, torch.Generator().manual_seed(9))
    mean_own, var_own = m.predict_moments(X[:6], n_samples=S)
    mean_h1 = mean_h1.numpy() * m.y_scale_ + m.y_mean_
    np.testing.assert_allclose(var_h1.numpy() * m.y_scale_**2, var_own, rtol=1e-12)
    sd = mean_own.std(axis=1)
    assert np.all(sd > 0.05 * m.y_scale_)  # the hidden noise matters in this check
    se = np.sqrt(sd**2 / S + mean_h1.std(axis=0) ** 2 / S)
    assert np.all(np.abs(mean_h1.mean(axis=0) - mean_own.mean(axis=1)) < 5 * se)
    np.testing.assert_allclose(mean_h1.std(axis=0), sd, rtol=0.05)


def test_params_fields(data):
    """τ² = exp(2 log τ), σ² = exp(2 log σ), ρ² = W², ξ² = γ² floored at 1e-8; float64; widths."""
    X, y = data
    m = _small().fit(X, y)
    p = m.params_()
    assert p.widths == (2, 6, 4, 1) and p.n_hidden == 2
    for l in range(3):
        assert p.W[l].dtype == torch.float64
        torch.testing.assert_close(p.tau2[l], torch.exp(2 * m.net_.log_tau[l].detach()))
        torch.testing.assert_close(p.rho2[l], torch.clamp(p.W[l] ** 2, min=1e-8))
        torch.testing.assert_close(p.xi2[l], torch.clamp(p.gamma[l] ** 2, min=1e-8))
    for l in range(2):
        torch.testing.assert_close(p.sigma2[l], torch.exp(2 * m.net_.log_sigma[l].detach()))
    assert float(p.xi2[0].min()) >= 1e-8


def test_seeded_and_deterministic(data):
    X, y = data
    a = _small().fit(X, y).predict_distribution(X)
    b = _small().fit(X, y).predict_distribution(X)
    c = _small(random_state=1).fit(X, y).predict_distribution(X)
    np.testing.assert_array_equal(a.means, b.means)
    assert not np.allclose(a.means, c.means)


def test_constant_column_gets_unit_scale(data):
    X, y = data
    Xc = np.c_[X, np.full(len(y), 3.0)]
    m = _small().fit(Xc, y)
    assert m.x_scale_[2] == 1.0 and m.x_mean_[2] == 3.0
    assert np.all(np.isfinite(m.predict(Xc)))


def test_save_load_round_trip(tmp_path, data):
    X, y = data
    m = _small().fit(X, y)
    m.save(tmp_path / "sgd.safetensors")
    m2 = DeepNoiseSGDRegressor.load(tmp_path / "sgd.safetensors")
    a, b = m.predict_distribution(X), m2.predict_distribution(X)
    np.testing.assert_array_equal(a.means, b.means)
    np.testing.assert_array_equal(a.variances, b.variances)
    (tmp_path / "junk.safetensors").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a readable"):
        DeepNoiseSGDRegressor.load(tmp_path / "junk.safetensors")


def test_bad_input(data):
    X, y = data
    with pytest.raises(ValueError, match="piecewise-linear"):
        _small(activation="tanh").fit(X, y)
    Xn = X.copy()
    Xn[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _small().fit(Xn, y)
    with pytest.raises(ValueError, match="constant"):
        _small().fit(X, np.ones(len(y)))
    m = _small().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :1])
    with pytest.raises(ValueError, match="n_noise_samples"):
        _small(n_noise_samples=0).fit(X, y)


def test_is_a_dubito_regressor():
    assert isinstance(DeepNoiseSGDRegressor(), DubitoRegressor)


@pytest.mark.parametrize("era", ["before the estimator base", "before validated fitting"])
def test_file_in_an_older_layout_still_loads(tmp_path, data, era):
    """A file in the layout of earlier versions loads to the same predictive: before the estimator
    base, y_mean / y_scale were JSON settings, not tensors; before validated fitting there was no
    held-out curve, best epoch, stopped_by or n_train (read as: trained to the cap, n_train -1)."""
    X, y = data
    m = _small().fit(X, y)
    path = tmp_path / "old.safetensors"
    m.save(path)
    before = era == "before validated fitting"
    rewrite_as_older(path, "DeepNoiseSGDRegressor", drop_tensors=("validation_curve",) * before,
                     drop_fitted=("best_epoch", "stopped_by", "n_train") if before else ())
    back = DeepNoiseSGDRegressor.load(path)
    a, b = m.predict_distribution(X), back.predict_distribution(X)
    np.testing.assert_array_equal(a.means, b.means)
    np.testing.assert_array_equal(a.variances, b.variances)
    if era == "before validated fitting":
        assert (back.stopped_by_, back.best_epoch_, back.n_train_, back.validation_curve_.shape) == ("cap", 3, -1, (0,))
    else:
        assert (back.best_epoch_, back.stopped_by_, back.n_train_) == (m.best_epoch_, m.stopped_by_, m.n_train_)


def test_declared_search_space_is_accepted_by_tune(data):
    """`dubito.tune` runs the declared search_space: two tiny trials complete (no failed trial),
    and the returned estimator is refitted with the chosen parameters."""
    from dubito.search_space import check_space
    from dubito.tune import tune

    X, y = data
    est = _small()
    assert set(check_space(est, None)) == {"lr", "hidden", "batch_size"}
    result = tune(est, X, y, n_trials=2, progress=False)
    assert [t["state"] for t in result.trials] == ["COMPLETE", "COMPLETE"]
    assert set(result.best_params) == {"lr", "hidden", "batch_size"} and np.isfinite(result.best_score)
    params = result.estimator.get_params()
    assert all(params[k] == v for k, v in result.best_params.items()) and params["epochs"] == 3
    assert hasattr(result.estimator, "net_")


@pytest.mark.parametrize("name", ["hardtanh", "bounded_relu", "relu", "leaky_relu"])
def test_the_fused_in_place_activations_equal_the_piecewise_ones_with_their_gradients(name):
    """`_native` swaps the generic piecewise activation for one torch op applied in place to the
    fresh pre-activation: the same values and the same gradients (away from the kinks, where
    the two conventions may differ), and the network's loss with it is what the generic one gives."""
    from dubito.regression.deepnoise_model import piecewise_activation
    from dubito.regression.deepnoise_sgd import _native

    act = piecewise_activation(name)
    fused = _native(act)
    assert fused is not act
    x = torch.linspace(-3.0, 3.0, 601, dtype=torch.float64)
    x = x[(x - x.round()).abs() > 1e-6]  # off the kinks at -1, 0, 1
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = act(a * 1.0), fused(b * 1.0)  # each on a fresh tensor, as in the net
    torch.testing.assert_close(yb, ya, rtol=0, atol=1e-15)
    (ya * torch.cos(x)).sum().backward()
    (yb * torch.cos(x)).sum().backward()
    torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=1e-15)
