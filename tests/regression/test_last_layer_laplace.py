"""LastLayerLaplaceRegressor: Bayesian linear regression on a network's last hidden layer (issue 20 §2).

Oracles: the conjugate posterior and predictive written out in numpy (explicit inverse, no shared
code), scipy's multivariate normal density of y ~ N(0, sigma^2 I + Phi Phi^T / alpha) for the
evidence, a fine grid over (alpha, sigma^2) for the evidence's maximiser, a torch forward pass
for the wrapped model's features, and the binomial spread of the coverage of 95 % intervals.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.base import clone
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dubito.predictive.normal import Normal
from dubito.regression import LastLayerLaplaceRegressor
from dubito.regression.last_layer_laplace import (
    blr_log_evidence,
    blr_posterior,
    maximise_evidence,
)
from dubito.search_space import check_space

torch.set_num_threads(1)

FAST = dict(hidden=(16, 16), activation="tanh", lr=1e-2, epochs=40, batch_size=32, progress=False, random_state=0)


# ---------------------------------------------------------------- independent numpy oracles
def _np_posterior(Phi, z, alpha, sigma2):
    """S = (alpha I + Phi^T Phi / sigma^2)^{-1}, m = S Phi^T z / sigma^2 (PRML 3.53-3.54), explicit inverse."""
    S = np.linalg.inv(alpha * np.eye(Phi.shape[1]) + Phi.T @ Phi / sigma2)
    return S @ Phi.T @ z / sigma2, S


def _np_log_evidence(Phi, z, alpha, sigma2):
    """PRML eq. 3.86 through the eigenvalues of Phi^T Phi (a second, independent route)."""
    n, k = Phi.shape
    lam, V = np.linalg.eigh(Phi.T @ Phi)
    beta = 1.0 / sigma2
    b = V.T @ (Phi.T @ z)
    d = alpha + beta * lam
    m = V @ (beta * b / d)
    r = z - Phi @ m
    return (0.5 * k * np.log(alpha) + 0.5 * n * np.log(beta) - 0.5 * beta * r @ r - 0.5 * alpha * m @ m
            - 0.5 * np.sum(np.log(d)) - 0.5 * n * np.log(2 * np.pi))


def _design(n=60, k=4, seed=0, noise=0.4):
    rng = np.random.default_rng(seed)
    Phi = np.concatenate([rng.normal(size=(n, k - 1)) * [1.0, 3.0, 0.2][: k - 1], np.ones((n, 1))], axis=1)
    z = Phi @ rng.normal(size=k) + noise * rng.normal(size=n)
    return Phi, z


# ---------------------------------------------------------------- closed forms
def test_posterior_is_the_conjugate_posterior():
    Phi, z = _design()
    for alpha, sigma2 in [(0.5, 0.2), (10.0, 1.5), (1e-3, 0.05)]:
        m, A = blr_posterior(Phi, z, alpha, sigma2)
        m_ref, S_ref = _np_posterior(Phi, z, alpha, sigma2)
        np.testing.assert_allclose(m, m_ref, rtol=0, atol=1e-8)
        np.testing.assert_allclose(np.linalg.inv(A), S_ref, rtol=0, atol=1e-8)


def test_log_evidence_is_the_marginal_gaussian_density():
    """log p(z | alpha, sigma^2) = log N(z; 0, sigma^2 I + Phi Phi^T / alpha) (scipy) to 1e-8."""
    Phi, z = _design()
    for alpha, sigma2 in [(0.5, 0.2), (10.0, 1.5), (1e-3, 0.05), (3.0, 1e-3)]:
        cov = sigma2 * np.eye(len(z)) + Phi @ Phi.T / alpha
        ref = stats.multivariate_normal(np.zeros(len(z)), cov).logpdf(z)
        assert blr_log_evidence(Phi, z, alpha, sigma2) == pytest.approx(ref, abs=1e-8)
        assert _np_log_evidence(Phi, z, alpha, sigma2) == pytest.approx(ref, abs=1e-8)


@pytest.mark.parametrize("seed,k,noise", [(0, 4, 0.4), (1, 3, 1.0), (2, 4, 0.05)])
def test_marglik_choice_is_the_grid_maximiser(seed, k, noise):
    """The (alpha, sigma^2) returned beat every point of a 301 x 301 log grid (1e-3 .. 1e3 for alpha,
    1e-4 .. 1e2 for sigma^2; 0.02 decades apart) by at least -1e-10 and lie within one grid step of
    the grid's best point on each axis. The same with one of them fixed, on a 3001-point grid."""
    Phi, z = _design(k=k, seed=seed, noise=noise)
    alpha, sigma2, logev = maximise_evidence(Phi, z)
    assert logev == pytest.approx(_np_log_evidence(Phi, z, alpha, sigma2), abs=1e-8)
    la, ls = np.linspace(-3, 3, 301), np.linspace(-4, 2, 301)
    grid = np.array([[_np_log_evidence(Phi, z, 10.0**a, 10.0**s) for s in ls] for a in la])
    i, j = np.unravel_index(np.argmax(grid), grid.shape)
    assert 0 < i < 300 and 0 < j < 300  # an interior maximum
    assert logev >= grid.max() - 1e-10
    assert abs(np.log10(alpha) - la[i]) <= 0.02 + 1e-9 and abs(np.log10(sigma2) - ls[j]) <= 0.02 + 1e-9
    # one fixed, the other by the evidence
    fine = np.linspace(-4, 3, 3001)
    a1, s1, ev1 = maximise_evidence(Phi, z, prior_precision="marglik", noise_var=0.3)
    g1 = np.array([_np_log_evidence(Phi, z, 10.0**a, 0.3) for a in fine])
    assert s1 == 0.3 and ev1 >= g1.max() - 1e-10 and abs(np.log10(a1) - fine[np.argmax(g1)]) <= 7 / 3000 + 1e-9
    a2, s2, ev2 = maximise_evidence(Phi, z, prior_precision=2.0, noise_var="marglik")
    g2 = np.array([_np_log_evidence(Phi, z, 2.0, 10.0**s) for s in fine])
    assert a2 == 2.0 and ev2 >= g2.max() - 1e-10 and abs(np.log10(s2) - fine[np.argmax(g2)]) <= 7 / 3000 + 1e-9


def test_features_that_explain_nothing_warn_at_the_edge():
    """Pure-noise targets: the evidence keeps rising as alpha -> infinity (w = 0, sigma^2 = var z);
    the edge of the search range is returned with a warning (measured alpha 1.8e14, sigma^2 1.0)."""
    rng = np.random.default_rng(1)
    Phi = np.concatenate([rng.normal(size=(200, 2)), np.ones((200, 1))], axis=1)
    z = rng.normal(size=200)
    z = (z - z.mean()) / z.std()
    with pytest.warns(RuntimeWarning, match="edge of the search range"):
        alpha, sigma2, logev = maximise_evidence(Phi, z)
    assert alpha > 1e12 and sigma2 == pytest.approx(1.0, abs=1e-9)
    assert logev == pytest.approx(stats.norm.logpdf(z).sum(), abs=1e-6)  # the all-noise model


# ---------------------------------------------------------------- a user's torch network
@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)

    def draw(n):
        X = rng.uniform(-2, 2, size=(n, 2))
        return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)

    return (*draw(400), *draw(200))


@pytest.fixture(scope="module")
def torch_mlp(problem):
    X, y, _, _ = problem
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 24), nn.Tanh(), nn.Linear(24, 12), nn.Tanh(), nn.Linear(12, 1)).double()
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    for _ in range(300):
        opt.zero_grad()
        ((net(xt)[:, 0] - yt) ** 2).mean().backward()
        opt.step()
    return net.eval()


def _hidden(net, X):
    with torch.no_grad():
        return net[:4](torch.as_tensor(X, dtype=torch.float64)).numpy()


def test_wrap_is_the_conjugate_posterior_on_the_last_hidden_layer(torch_mlp, problem):
    """At fixed alpha, sigma^2: coef_, the covariance and the predictive (user units) equal the numpy
    formulas on Phi = [tanh layer, 1] and z = (y - mean) / sd to 1e-8."""
    X, y, Xq, _ = problem
    alpha, noise = 2.0, 0.1
    est = LastLayerLaplaceRegressor.wrap(torch_mlp, X, y, prior_precision=alpha, noise_var=noise)
    assert est.feature_layer_ == "4" and est.feature_source_ == "wrapped" and est.n_features_ == 12
    Phi = np.concatenate([_hidden(torch_mlp, X), np.ones((len(y), 1))], axis=1)
    mu, sd = y.mean(), y.std()
    sigma2 = noise / sd**2
    m, S = _np_posterior(Phi, (y - mu) / sd, alpha, sigma2)
    np.testing.assert_allclose(est.coef_, m, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.linalg.inv(est.posterior_precision_), S, rtol=0, atol=1e-8)
    assert est.prior_precision_ == alpha and est.noise_var_ == pytest.approx(noise, rel=1e-14)
    pred = est.predict_distribution(Xq)
    Pq = np.concatenate([_hidden(torch_mlp, Xq), np.ones((len(Xq), 1))], axis=1)
    epi = np.einsum("ij,jk,ik->i", Pq, S, Pq) * sd**2
    assert isinstance(pred, Normal)
    np.testing.assert_allclose(pred.mean, mu + sd * Pq @ m, rtol=0, atol=1e-8)
    np.testing.assert_allclose(pred.epistemic_var, epi, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(pred.aleatoric_var, noise, rtol=1e-12)
    np.testing.assert_allclose(pred.var, epi + noise, rtol=1e-8)
    np.testing.assert_array_equal(est.predict(Xq), pred.mean)
    assert est.log_marginal_likelihood_ == pytest.approx(_np_log_evidence(Phi, (y - mu) / sd, alpha, sigma2),
                                                         abs=1e-8)


def test_wrap_by_marglik_and_input_kinds(torch_mlp, problem):
    """Default "marglik": the evidence maximiser on the wrapped features; numpy, a torch tensor
    (float32 too), a DataLoader of (x, y) (shuffled or not) and the layer by name or module all
    give the same posterior; a DataLoader at prediction (not shuffled) the same predictive."""
    X, y, Xq, _ = problem
    est = LastLayerLaplaceRegressor.wrap(torch_mlp, X, y)
    Phi = np.concatenate([_hidden(torch_mlp, X), np.ones((len(y), 1))], axis=1)
    z = (y - y.mean()) / y.std()
    alpha, sigma2, logev = maximise_evidence(Phi, z)
    assert est.prior_precision_ == pytest.approx(alpha, rel=1e-9)
    assert est.noise_var_ == pytest.approx(sigma2 * y.std() ** 2, rel=1e-9)
    assert est.log_marginal_likelihood_ == pytest.approx(logev, abs=1e-8)
    ref = est.predict_distribution(Xq)
    ordered = DataLoader(TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=64)
    shuffled = DataLoader(TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=64, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    for kw in (dict(X=torch.as_tensor(X), y=torch.as_tensor(y)), dict(X=ordered), dict(X=shuffled),
               dict(X=X, y=y, feature_layer="3"), dict(X=X, y=y, feature_layer=torch_mlp[3])):
        other = LastLayerLaplaceRegressor.wrap(torch_mlp, **kw)
        np.testing.assert_allclose(other.coef_, est.coef_, rtol=0, atol=1e-10)
        assert other.prior_precision_ == pytest.approx(est.prior_precision_, rel=1e-10)
    np.testing.assert_allclose(
        est.predict_distribution(DataLoader(TensorDataset(torch.as_tensor(Xq)), batch_size=50)).mean, ref.mean,
        rtol=0, atol=1e-12)
    np.testing.assert_allclose(est.predict_distribution(torch.as_tensor(Xq)).var, ref.var, rtol=1e-14)


def test_wrap_drops_constant_feature_units_with_a_warning(torch_mlp, problem):
    X, y, Xq, _ = problem
    net = nn.Sequential(*copy.deepcopy(list(torch_mlp[:4])), nn.ReLU(), nn.Linear(12, 1).double())
    with torch.no_grad():  # unit 5 of the ReLU layer is dead: -tanh(...) - 2 < 0 everywhere
        net[2].weight[5].zero_()
        net[2].bias[5] = -2.0
    with pytest.warns(RuntimeWarning, match=r"1 of 12 feature units are constant .* \[5\]"):
        est = LastLayerLaplaceRegressor.wrap(net, X, y, prior_precision=1.0, noise_var=0.1)
    assert est.dead_features_.tolist() == [5] and est.coef_.shape == (12,) and est.feature_mask_.sum() == 11
    assert np.all(np.isfinite(est.predict_distribution(Xq).var))


# ---------------------------------------------------------------- fit: train a network, then the Laplace
@pytest.fixture(scope="module")
def fitted(problem):
    X, y, _, _ = problem
    return LastLayerLaplaceRegressor(**FAST).fit(X, y)


def test_fit_is_the_blr_on_the_trained_networks_features(fitted, problem):
    """fit = the MLP baseline's training, then maximise_evidence and the conjugate posterior on
    [net_.features(standardised X), 1] over all rows, y standardised by the training rows."""
    X, y, Xq, _ = problem
    with torch.no_grad():
        phi = fitted.net_.features(torch.as_tensor((X - fitted.x_mean_) / fitted.x_scale_)).numpy()
    Phi = np.concatenate([phi[:, fitted.feature_mask_], np.ones((len(y), 1))], axis=1)
    z = (y - fitted.y_mean_) / fitted.y_scale_
    alpha, sigma2, _ = maximise_evidence(Phi, z)
    assert fitted.prior_precision_ == pytest.approx(alpha, rel=1e-12)
    assert fitted.noise_var_ == pytest.approx(sigma2 * fitted.y_scale_**2, rel=1e-12)
    m, _ = _np_posterior(Phi, z, alpha, sigma2)
    np.testing.assert_allclose(fitted.coef_, m, rtol=0, atol=1e-8)
    assert fitted.n_train_ == len(y) and fitted.best_epoch_ >= 1 and fitted.feature_source_ == "network"
    pred = fitted.predict_distribution(Xq)
    assert np.all(pred.epistemic_var > 0) and np.all(pred.aleatoric_var == fitted.noise_var_)


def test_coverage_of_95_percent_intervals_on_a_homoscedastic_problem():
    """y = sin(2 x1) + x2 / 2 + N(0, 0.3^2), x ~ U(-2, 2)^2, 3000 training and 2000 test rows: the 95 %
    intervals cover within 3 binomial sd (0.0146) of 0.95. Measured over seeds 0-5: 0.9485, 0.9435,
    0.9525, 0.9555, 0.9430, 0.9475 (sigma^2 0.087-0.092 for the true 0.09)."""
    rng = np.random.default_rng(0)

    def draw(n):
        X = rng.uniform(-2, 2, size=(n, 2))
        return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)

    X, y = draw(3000)
    Xt, yt = draw(2000)
    est = LastLayerLaplaceRegressor(hidden=(32, 32), activation="tanh", lr=1e-2, epochs=100, batch_size=64,
                                    progress=False, random_state=0).fit(X, y)
    lo, hi = est.predict_distribution(Xt).interval(0.95)
    cover = np.mean((yt >= lo) & (yt <= hi))
    assert abs(cover - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / len(yt)), cover
    assert est.noise_var_ == pytest.approx(0.09, rel=0.15)


# ---------------------------------------------------------------- persistence, scikit-learn, device
def test_save_load_round_trip(fitted, torch_mlp, problem, tmp_path):
    X, y, Xq, _ = problem
    path = tmp_path / "lll.safetensors"
    fitted.save(path)
    back = LastLayerLaplaceRegressor.load(path)
    a, b = fitted.predict_distribution(Xq), back.predict_distribution(Xq)
    for name in ("mean", "var", "epistemic_var", "aleatoric_var"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("prior_precision_", "noise_var_", "log_marginal_likelihood_", "n_train_", "best_epoch_"):
        assert getattr(back, name) == getattr(fitted, name), name
    assert back.get_params() == fitted.get_params()
    with pytest.raises(ValueError, match="not a wrapped model"):
        LastLayerLaplaceRegressor.load(path, model=torch_mlp)
    # a wrapped model: its module is passed back at load
    wrapped = LastLayerLaplaceRegressor.wrap(torch_mlp, X, y)
    wpath = tmp_path / "wrapped.safetensors"
    wrapped.save(wpath)
    with pytest.raises(ValueError, match="model=your_model"):
        LastLayerLaplaceRegressor.load(wpath)
    with pytest.raises(ValueError, match="torch.nn.Module"):
        LastLayerLaplaceRegressor.load(wpath, model="net")
    wback = LastLayerLaplaceRegressor.load(wpath, model=torch_mlp)
    a, b = wrapped.predict_distribution(Xq), wback.predict_distribution(Xq)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.var, b.var)
    with pytest.raises(ValueError, match="resolves it"):
        LastLayerLaplaceRegressor.load(wpath, model=nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1)).double())


def test_sklearn_params_clone_and_search_space(fitted, problem):
    X, y, _, _ = problem
    params = fitted.get_params()
    assert params["prior_precision"] == "marglik" and params["noise_var"] == "marglik"
    twin = clone(fitted)
    assert twin.get_params() == params and not hasattr(twin, "coef_")
    check_space(twin, None)
    twin.set_params(prior_precision=3.0, noise_var=0.2, epochs=5).fit(X, y)
    assert twin.prior_precision_ == 3.0 and twin.noise_var_ == pytest.approx(0.2, rel=1e-14)
    assert fitted.score(X, y) > 0.8  # R^2 of the posterior mean
    with pytest.raises(ValueError, match="device"):
        LastLayerLaplaceRegressor(**{**FAST, "device": "tpu9"}).fit(X, y)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(problem):
    X, y, Xq, _ = problem
    cpu = LastLayerLaplaceRegressor(**FAST).fit(X, y)
    gpu = LastLayerLaplaceRegressor(**{**FAST, "device": "cuda"}).fit(X, y)
    assert next(gpu.net_.parameters()).is_cuda
    np.testing.assert_allclose(gpu.predict_distribution(Xq).mean, cpu.predict_distribution(Xq).mean, atol=0.1)


# ---------------------------------------------------------------- bad input
def test_bad_input(fitted, torch_mlp, problem):
    X, y, Xq, _ = problem
    for kw, msg in [({"prior_precision": "auto"}, "prior_precision"), ({"prior_precision": -1.0}, "prior_precision"),
                    ({"noise_var": 0.0}, "noise_var"), ({"noise_var": np.nan}, "noise_var")]:
        with pytest.raises(ValueError, match=msg):
            LastLayerLaplaceRegressor(**{**FAST, **kw}).fit(X, y)
        with pytest.raises(ValueError, match=msg):
            LastLayerLaplaceRegressor.wrap(torch_mlp, X, y, **kw)
    with pytest.raises(ValueError, match="constant"):
        LastLayerLaplaceRegressor(**FAST).fit(X, np.ones(len(y)))
    with pytest.raises(ValueError, match="NaN"):
        LastLayerLaplaceRegressor(**FAST).fit(np.where(X > 1.9, np.nan, X), y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict_distribution(Xq[:, :1])
    with pytest.raises(ValueError, match="NaN|infinity"):
        fitted.predict_distribution(np.where(Xq > 1.9, np.inf, Xq))
    with pytest.raises(ValueError, match="torch.nn.Module"):
        LastLayerLaplaceRegressor.wrap("net", X, y)
    with pytest.raises(ValueError, match="NaN"):
        LastLayerLaplaceRegressor.wrap(torch_mlp, np.where(X > 1.9, np.nan, X), y)
    with pytest.raises(ValueError, match="NaN"):
        LastLayerLaplaceRegressor.wrap(torch_mlp, X, np.where(y > 1.5, np.nan, y))
    with pytest.raises(ValueError, match="399 rows"):
        LastLayerLaplaceRegressor.wrap(torch_mlp, X, y[:-1])
    with pytest.raises(ValueError, match="constant"):
        LastLayerLaplaceRegressor.wrap(torch_mlp, X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="not a submodule"):
        LastLayerLaplaceRegressor.wrap(torch_mlp, X, y, feature_layer="head")
    wrapped = LastLayerLaplaceRegressor.wrap(torch_mlp, X, y)
    with pytest.raises(ValueError, match="NaN"):
        wrapped.predict_distribution(np.where(Xq > 1.9, np.nan, Xq))
    with pytest.raises(ValueError, match="not fitted|fitted"):
        LastLayerLaplaceRegressor(**FAST).predict_distribution(Xq)
    for bad in [(np.ones((3, 2)), np.zeros(2)), (np.ones((3, 2)), np.array([1.0, np.nan, 0.0]))]:
        with pytest.raises(ValueError):
            blr_posterior(*bad, 1.0, 1.0)
    with pytest.raises(ValueError, match="prior_precision"):
        blr_log_evidence(*_design(), 0.0, 1.0)
