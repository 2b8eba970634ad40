"""MixtureDensityRegressor (Bishop 1994; the IC-NLM paper's MDN benchmark)."""

import json

import numpy as np
import pytest
import torch
from scipy import stats

from dubito.metrics import crps, nll
from dubito.metrics.scoring import crps_mixture, crps_quadrature
from dubito.nn.mdn import MixtureDensityNet, mixture_nll
from dubito.predictive.mixture import GaussianMixture
from dubito.regression import MixtureDensityRegressor
from dubito.regression.mdn import MDNMixture

FAST = dict(n_components=5, hidden=(16,), lr=1e-2, epochs=5, batch_size=32, progress=False, random_state=0,
            validation_fraction=0.0)


def _hetero(n, seed):
    """y = sin(x) + (0.1 + 0.2 |x|) e, x ~ U(-3, 3): true conditional sd 0.1 + 0.2 |x|."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, n)
    return x[:, None], np.sin(x) + (0.1 + 0.2 * np.abs(x)) * rng.standard_normal(n)


@pytest.fixture(scope="module")
def data():
    X, y = _hetero(200, 0)
    Xq, yq = _hetero(30, 1)
    return X, y, Xq, yq


@pytest.fixture(scope="module")
def fitted(data):
    return MixtureDensityRegressor(**FAST).fit(*data[:2])


def test_recovers_heteroscedastic_truth_and_pit_is_uniform():
    """n = 2000, K = 10, seed 0. Tolerances: on the grid x in [-2.5, 2.5] the predictive sd is
    within 25 % of the true 0.1 + 0.2|x| wherever |x| >= 0.5 and within 10 % on average over
    the grid (x = 0, true sd 0.1, is the hardest point: 41 % off there); the mean is within
    0.15 of sin(x); and the PIT of 1000 fresh points passes a KS test for uniformity at the
    1 % level. Measured at seed 0: worst 10 % (|x| >= 0.5), mean 6.7 %, mean error 0.10,
    KS D = 0.020, p = 0.82. Over seeds 0-5: sd bounds held for all; worst mean error 0.158
    (seed 4) and KS p > 0.01 for 5 of 6 (seed 4: D = 0.056, p = 0.004)."""
    X, y = _hetero(2000, 0)
    est = MixtureDensityRegressor(n_components=10, hidden=(32, 32), lr=3e-3, epochs=80, batch_size=64,
                                  validation_fraction=0.0, progress=False, random_state=0).fit(X, y)
    grid = np.linspace(-2.5, 2.5, 21)
    d = est.predict_distribution(grid[:, None])
    true_sd = 0.1 + 0.2 * np.abs(grid)
    rel = np.abs(d.std / true_sd - 1)
    assert rel[np.abs(grid) >= 0.5].max() < 0.25, rel
    assert rel.mean() < 0.10, rel
    assert np.abs(d.mean - np.sin(grid)).max() < 0.15
    Xt, yt = _hetero(1000, 7)
    u = est.predict_distribution(Xt).cdf(yt)
    assert stats.kstest(u, "uniform").pvalue > 0.01


def test_mixture_nll_is_exact_and_stable():
    """Against scipy's log of the summed densities; finite where the naive form underflows."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 4, generator=g, dtype=torch.float64)
    log_w = torch.log_softmax(logits, -1)
    mu = torch.randn(6, 4, generator=g, dtype=torch.float64)
    var = torch.rand(6, 4, generator=g, dtype=torch.float64) + 0.1
    y = torch.randn(6, generator=g, dtype=torch.float64)
    per_row = mixture_nll(log_w, mu, var, y, reduction="none")
    dens = (log_w.exp() * torch.as_tensor(stats.norm.pdf(y[:, None], mu, var.sqrt()))).sum(-1)
    np.testing.assert_allclose(per_row.numpy(), -np.log(dens.numpy()), rtol=1e-12)
    assert float(mixture_nll(log_w, mu, var, y)) == pytest.approx(float(per_row.mean()), rel=1e-14)
    far = torch.full((6,), 1e3, dtype=torch.float64)  # every component ~ 1000 sd away
    naive = torch.log((log_w.exp() * torch.exp(-0.5 * (far[:, None] - mu) ** 2 / var)).sum(-1))
    assert torch.isinf(naive).all()
    stable = mixture_nll(log_w, mu, var, far, reduction="none")
    assert torch.isfinite(stable).all()
    # the largest component dominates: -log p ~ min_k [ -log w_k + 1/2 log(2 pi var_k) + z_k^2 / 2 ]
    terms = -log_w + 0.5 * torch.log(2 * np.pi * var) + 0.5 * (far[:, None] - mu) ** 2 / var
    np.testing.assert_allclose(stable.numpy(), terms.min(-1).values.numpy(), rtol=1e-6)


def test_variance_floor_bounds_every_component():
    net = MixtureDensityNet(2, (8,), 3, variance_floor=0.01, generator=torch.Generator().manual_seed(0),
                            dtype=torch.float64)
    with torch.no_grad():
        net.body.layers[-1].bias[6:] = -1e3  # raw variances -> softplus ~ 0
        log_w, mu, var = net(torch.zeros(4, 2, dtype=torch.float64))
    assert torch.all(var >= 0.01) and torch.allclose(var, torch.full_like(var, 0.01))
    np.testing.assert_allclose(log_w.exp().sum(-1).numpy(), 1.0, rtol=1e-14)


def test_predictive_is_the_fitted_mixture_in_user_units(fitted, data):
    X, y, Xq, _ = data
    d = fitted.predict_distribution(Xq)
    assert isinstance(d, MDNMixture) and isinstance(d, GaussianMixture) and d.n_components == 5
    w, mu, var = fitted.predict_components(Xq)
    Xs = torch.as_tensor((Xq - fitted.x_mean_) / fitted.x_scale_)
    with torch.no_grad():
        lw, m_s, v_s = fitted.net_(Xs)
    np.testing.assert_allclose(w, lw.exp().numpy(), rtol=1e-14)
    np.testing.assert_allclose(mu, m_s.numpy() * fitted.y_scale_ + fitted.y_mean_, rtol=1e-14)
    np.testing.assert_allclose(var, v_s.numpy() * fitted.y_scale_**2, rtol=1e-14)
    assert np.all(var >= fitted.variance_floor * fitted.y_scale_**2 * (1 - 1e-12))
    np.testing.assert_allclose(d.weights.sum(1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(d.mean, np.einsum("nk,nk->n", w, mu), rtol=1e-12)  # analytic, spec 7.13
    np.testing.assert_allclose(fitted.predict(Xq), d.mean, rtol=1e-12)
    # an MDN knows no model uncertainty: all of its variance is aleatoric, epistemic unknown
    assert d.epistemic_var is None
    np.testing.assert_array_equal(d.aleatoric_var, d.var)
    within = np.einsum("nk,nk->n", w, var)
    between = np.einsum("nk,nk->n", w, (mu - d.mean[:, None]) ** 2)
    np.testing.assert_allclose(d.var, within + between, rtol=1e-12)
    sub = d[3:7]
    assert isinstance(sub, MDNMixture) and sub.epistemic_var is None
    np.testing.assert_array_equal(sub.means, d.means[3:7])


def test_affine_target_rescaling(data):
    """y -> a y + b: means a m + b and variances a^2 v (standardisation inside); float32
    training on identical standardised data, tolerance 1e-5 relative."""
    X, y, Xq, _ = data
    a, b = 25.0, -4.0
    d0 = MixtureDensityRegressor(**FAST).fit(X, y).predict_distribution(Xq)
    d1 = MixtureDensityRegressor(**FAST).fit(X, a * y + b).predict_distribution(Xq)
    np.testing.assert_allclose(d1.means, a * d0.means + b, rtol=1e-5, atol=1e-5 * a)
    np.testing.assert_allclose(d1.variances, a**2 * d0.variances, rtol=1e-5)
    np.testing.assert_allclose(d1.weights, d0.weights, rtol=1e-5, atol=1e-7)


def test_crps_and_nll(fitted, data):
    _, _, Xq, yq = data
    d = fitted.predict_distribution(Xq)
    c = crps(d, yq)
    np.testing.assert_allclose(c, crps_mixture(d.weights, d.means, d.variances, yq), rtol=1e-12)
    np.testing.assert_allclose(c, crps_quadrature(d, yq), rtol=1e-6)
    w, mu, var = fitted.predict_components(Xq)
    dens = (w * stats.norm.pdf(yq[:, None], mu, np.sqrt(var))).sum(1)
    np.testing.assert_allclose(nll(d, yq), -np.log(dens), rtol=1e-10)


def test_training_reduces_the_nll(data):
    X, y, _, _ = data
    est = MixtureDensityRegressor(**{**FAST, "epochs": 30}).fit(X, y)
    assert est.loss_curve_.shape == (30,)
    assert est.loss_curve_[-1] < est.loss_curve_[0] - 0.3


def test_fit_is_reproducible_and_seed_matters(data):
    X, y, Xq, _ = data
    a = MixtureDensityRegressor(**FAST).fit(X, y).predict_components(Xq)
    b = MixtureDensityRegressor(**FAST).fit(X, y).predict_components(Xq)
    c = MixtureDensityRegressor(**{**FAST, "random_state": 1}).fit(X, y).predict_components(Xq)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.allclose(a[1], c[1])


def test_save_load_round_trip(fitted, data, tmp_path):
    _, _, Xq, _ = data
    path = tmp_path / "mdn.safetensors"
    fitted.save(path)
    back = MixtureDensityRegressor.load(path)
    assert back.get_params() == fitted.get_params()
    for u, v in zip(back.predict_components(Xq), fitted.predict_components(Xq)):
        np.testing.assert_array_equal(u, v)
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert header["__metadata__"]["dubito_class"] == "MixtureDensityRegressor"
    from dubito import io

    tensors, settings = io.load_tensors(path, "MixtureDensityRegressor")
    del tensors["net.body.layers.0.weight"]
    io.save_tensors(path, tensors, "MixtureDensityRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        MixtureDensityRegressor.load(path)


@pytest.mark.parametrize(
    "setting, match",
    [
        (dict(n_components=0), "n_components must be >= 1"),
        (dict(variance_floor=0.0), "variance_floor must be > 0"),
        (dict(epochs=0), "epochs must be >= 1"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(hidden=(4, 0)), "hidden widths must be >= 1"),
        (dict(device="tpu-9"), "device must be a torch device string"),
    ],
)
def test_bad_settings_fail_at_fit(data, setting, match):
    with pytest.raises(ValueError, match=match):
        MixtureDensityRegressor(**{**FAST, **setting}).fit(*data[:2])


def test_one_component_is_a_gaussian(data):
    X, y, Xq, _ = data
    d = MixtureDensityRegressor(**{**FAST, "n_components": 1}).fit(X, y).predict_distribution(Xq)
    np.testing.assert_array_equal(d.weights, 1.0)
    np.testing.assert_allclose(d.var, d.variances[:, 0], rtol=1e-14)
