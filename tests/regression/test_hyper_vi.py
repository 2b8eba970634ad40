"""HyperVIRegressor (NN-HyVI, FuNN-HyVI, MFVI, FuNN-MFVI; spec §2.5-§2.9, §3, tests 8, 9, 11, 14).

Oracles: a brute-force Gaussian log-likelihood loop over nn.Sequential nets (test 8), torch.
distributions.Normal (test 9), scipy's norm.logpdf / logsumexp (test 11), numpy variances
(ood_score), exact scaling identities (entropies), and the analytic Gaussian entropy (k-NN
estimate in d = 4, tolerance 0.25 as spec test 1 at d = 5)."""
import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import logsumexp

from dubito import io
from dubito._estimator import DubitoRegressor, seeds_from
from dubito.data.ood_box import UniformBox
from dubito.early_stopping import holdout_split
from dubito.nn.flat_mlp import FlatMLP
from dubito.predictive.samples import Samples
from dubito.regression.hyper_vi import HyperVIRegressor
from dubito.regression.hyper_vi_objective import _Objective, _run_epoch
from dubito.regression.variational_family import (
    HyperNetwork,
    MeanField,
    normal_log_prob,
)
from dubito.tune import tune

TINY = {"n_ll_samples": 5, "n_kl_samples": 20, "n_ood_points": 10, "max_epochs": 2, "n_predictors": 50, "hidden": 8,
            "progress": False}


def _data(n=40, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.sin(X[:, 0]) + 0.5 * X[:, -1] + 0.1 * rng.normal(size=n)
    return X, y * 3.0 + 10.0


def _wave(seed=0):
    """The spec §4 synthetic set: 60 x~U[-1,-0.5] + 60 x~U[0.5,1], y = cos(4(x+0.2)) + N(0, 0.1²)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-1, -0.5, 60), rng.uniform(0.5, 1, 60)])
    return x[:, None], np.cos(4 * (x + 0.2)) + rng.normal(0, 0.1, 120)


def _prior_normal():
    """N(0, 0.5²) with float64 parameters (python floats would give float32 ones)."""
    return torch.distributions.Normal(torch.tensor(0.0, dtype=torch.float64), torch.tensor(0.5, dtype=torch.float64))


# ---------------------------------------------------------------- test 8: minibatch ELBO scaling
class _FixedFamily(torch.nn.Module):
    """A 'family' whose draws are a fixed θ matrix (cycled), so the LL is deterministic."""

    def __init__(self, theta):
        super().__init__()
        self.theta = theta

    def sample(self, n, generator=None):
        return self.theta[torch.arange(n) % self.theta.shape[0]]


@pytest.mark.parametrize("batch_size", [7, 10, 40])
def test_epoch_losses_sum_to_full_negative_elbo(batch_size):
    """Spec test 8: with KL stubbed to a constant, Σ_B loss_B = −Σ_D LL + KL (|B|/|D| weights)."""
    X, y = _data(n=40)
    net = FlatMLP(3, 8, "tanh")
    gen = torch.Generator().manual_seed(0)
    theta = torch.randn(4, net.n_params, generator=gen, dtype=torch.float64)
    sigma, kl_const = 0.7, 123.456
    obj = _Objective(_FixedFamily(theta), net, noise_std=sigma, prior_sd=0.5, space="function",
                     box=UniformBox.from_data(X), n_ll=4, n_kl=3, n_ood=5, n_train=40, analytic_kl=False)
    obj.kl = lambda theta_q, generator: torch.tensor(kl_const, dtype=torch.float64)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    parts = _run_epoch(obj, None, Xt, yt, batch_size, torch.Generator().manual_seed(1), gen)
    assert [b for b, _ in parts] == [min(batch_size, 40 - s) for s in range(0, 40, batch_size)]
    # brute force: mean over the 4 θ of Σ_i ln N(y_i; f_θ(x_i), σ²), nets built by FlatMLP.to_module
    ll = np.mean([stats.norm.logpdf(y, net.to_module(t)(Xt).detach().numpy()[:, 0], sigma).sum() for t in theta])
    assert math.isclose(sum(v for _, v in parts), -ll + kl_const, rel_tol=1e-12)


def test_mfvi_kl_is_mean_of_analytic_log_ratio():
    gen = torch.Generator().manual_seed(2)
    fam = MeanField(11, init_sd=0.3, generator=gen, dtype=torch.float64)
    obj = _Objective(fam, FlatMLP(2, 2), noise_std=1.0, prior_sd=0.5, space="parameter", box=None, n_ll=1,
                     n_kl=6, n_ood=1, n_train=10, analytic_kl=True)
    theta = fam.sample(6, gen)
    q = torch.distributions.Normal(fam.mu, fam.sd).log_prob(theta).sum(-1)
    p = _prior_normal().log_prob(theta).sum(-1)
    torch.testing.assert_close(obj.kl(theta, gen), (q - p).mean(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- test 9: mean-field log-density
def test_mean_field_log_density_equals_torch_normal():
    gen = torch.Generator().manual_seed(0)
    fam = MeanField(751, init_sd=1e-3, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        fam.rho.copy_(torch.randn(751, generator=gen, dtype=torch.float64))  # varied σ = softplus(ρ)
    theta = fam.sample(5, gen)
    ref = torch.distributions.Normal(fam.mu, fam.sd).log_prob(theta).sum(-1)
    torch.testing.assert_close(fam.log_prob(theta), ref, rtol=1e-12, atol=1e-9)
    # at points far from q (the [C] bug divides by σ, not σ², and halves Σ ln σ: it would fail here)
    far = torch.randn(3, 751, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(fam.log_prob(far), torch.distributions.Normal(fam.mu, fam.sd).log_prob(far).sum(-1),
                               rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(fam.entropy(), torch.distributions.Normal(fam.mu, fam.sd).entropy().sum(),
                               rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(normal_log_prob(far, 0.5), _prior_normal().log_prob(far).sum(-1),
                               rtol=1e-12, atol=1e-9)


def test_mean_field_init_and_hypernetwork_shapes():
    gen = torch.Generator().manual_seed(0)
    fam = MeanField(20000, generator=gen)
    assert torch.allclose(fam.sd, torch.full((20000,), 1e-3), rtol=1e-4)
    assert abs(float(fam.mu.detach().mean())) < 0.05 and abs(float(fam.mu.detach().std()) - 1.0) < 0.05  # μ ~ N(0, 1) ([C])
    hyper = HyperNetwork(751, generator=torch.Generator().manual_seed(0))
    assert sum(p.numel() for p in hyper.parameters()) == 31_751  # spec §2.6: 960 + 41 d
    assert hyper.sample(7, gen).shape == (7, 751)
    last = hyper.net[-1].weight
    assert float(last.detach().abs().max()) <= 1 / math.sqrt(40)  # default init U(±1/√fan_in)


# ---------------------------------------------------------------- test 11: LPP
def test_one_predictor_lpp_is_gaussian_log_density_minus_log_sy():
    X, y = _data(n=40)
    est = HyperVIRegressor(space="parameter", noise_std=0.1, random_state=0, **TINY).fit(X, y)
    est.set_params(n_predictors=1)
    f = est.sample_predictions(X, 1)[0]  # standardised units, same default seed as predict_distribution
    s_y = est.y_scale_
    # targets at standardised residuals 0 .. 10 (σ_l = 0.1: down to ~ -5000 nats)
    resid = np.linspace(0.0, 10.0, X.shape[0])
    y_user = (f + resid) * s_y + est.y_mean_
    dist = est.predict_distribution(X)
    assert isinstance(dist, Samples)
    got = dist.log_prob(y_user)
    ref = stats.norm.logpdf(resid, 0.0, 0.1) - math.log(s_y)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_lpp_mixture_matches_logsumexp_and_units():
    X, y = _data(n=40)
    est = HyperVIRegressor(space="function", noise_std=0.3, random_state=1, **TINY).fit(X, y)
    F = est.sample_predictions(X, est.n_predictors)
    dist = est.predict_distribution(X)
    np.testing.assert_allclose(dist.draws, F * est.y_scale_ + est.y_mean_, rtol=1e-12)
    ys = (y - est.y_mean_) / est.y_scale_
    ref = logsumexp(stats.norm.logpdf(ys, F, 0.3), axis=0) - math.log(F.shape[0]) - math.log(est.y_scale_)
    np.testing.assert_allclose(dist.log_prob(y), ref, rtol=1e-9)
    np.testing.assert_allclose(est.predict(X), F.mean(0) * est.y_scale_ + est.y_mean_, rtol=1e-12)


# ---------------------------------------------------------------- scores and entropies
def test_ood_score_is_gaussian_entropy_of_prediction_spread():
    X, y = _data(n=40)
    est = HyperVIRegressor(space="function", noise_std=0.5, random_state=2, **TINY).fit(X, y)
    F = est.sample_predictions(X, est.n_predictors, random_state=5)
    ref = 0.5 * np.log(2 * np.pi * np.e * F.var(axis=0, ddof=1))
    np.testing.assert_allclose(est.ood_score(X, random_state=5), ref, rtol=1e-10)


def _mean_field_model(hidden=1):
    X, y = _data(n=20, p=1)
    est = HyperVIRegressor(space="parameter", family="mean-field", noise_std=1.0, random_state=0,
                           **{**TINY, "hidden": hidden, "max_epochs": 1}).fit(X, y)
    return est


def test_parameter_entropy_of_mean_field_matches_gaussian_entropy():
    est = _mean_field_model(hidden=1)  # d = 4
    d = est.n_params_
    sd = torch.tensor([0.3, 1.0, 2.0, 0.5])
    with torch.no_grad():
        est.family_.rho.copy_(torch.log(torch.expm1(sd)))
    exact = float(torch.log(sd).sum()) + 0.5 * d * math.log(2 * math.pi * math.e)
    values = [est.parameter_entropy(n=2000, random_state=s) for s in range(5)]
    assert abs(np.mean(values) - exact) < 0.25


def test_predictor_entropy_shifts_by_T_ln_a_when_outputs_scale_by_a():
    """Scaling the output layer's (μ, σ) by a scales every prediction by a exactly (same draws),
    so the function-space entropy shifts by T ln a; it also equals a hand mean over the draws."""
    est = _mean_field_model(hidden=5)
    with torch.no_grad():
        est.family_.rho.fill_(math.log(math.expm1(0.5)))
    T, a = 7, 3.0
    h1 = est.predictor_entropy(n_draws=3, n_predictors=100, n_points=T, random_state=0)
    H, D = 5, 1
    with torch.no_grad():
        sl = slice(H * D + H, None)  # W2 and b2
        est.family_.mu[sl] *= a
        est.family_.rho[sl] = torch.log(torch.expm1(0.5 * a * torch.ones_like(est.family_.rho[sl])))
    h3 = est.predictor_entropy(n_draws=3, n_predictors=100, n_points=T, random_state=0)
    assert math.isclose(h3 - h1, T * math.log(a), rel_tol=1e-4)


# ---------------------------------------------------------------- schedule, monitor, determinism
def test_stops_after_first_epoch_at_min_lr():
    X, y = _data(n=30)
    est = HyperVIRegressor(space="parameter", noise_std=1.0, random_state=0, lr=4e-4, lr_factor=0.5, lr_patience=0,
                           min_lr=1e-4, **{**TINY, "max_epochs": 50}).fit(X, y)
    assert est.n_epochs_ == len(est.loss_curve_) == len(est.lr_curve_) == len(est.min_knn_distance_) < 50
    assert est.lr_curve_[-1] == pytest.approx(1e-4) and (est.lr_curve_[:-1] > 1e-4 * (1 + 1e-9)).all()
    assert est.lr_curve_[0] == pytest.approx(4e-4)
    assert np.isfinite(est.loss_curve_).all() and (est.min_knn_distance_ > 0).all()


def test_diagnostics_say_whether_the_schedule_or_the_cap_ended_the_run(tmp_path):
    """The stopping rule is the first epoch at lr <= min_lr: a run the schedule ends (as in the test
    above) is converged; 2 epochs at lr 5e-3 > min_lr end at the cap: stopped_by_cap, not converged."""
    from dubito.inference.convergence import SCHEMA_KEYS

    X, y = _data(n=30)
    ruled = HyperVIRegressor(space="parameter", noise_std=1.0, random_state=0, lr=4e-4, lr_factor=0.5, lr_patience=0,
                             min_lr=1e-4, **{**TINY, "max_epochs": 50}).fit(X, y)
    capped = HyperVIRegressor(space="parameter", noise_std=1.0, random_state=0, **TINY).fit(X, y)
    for est in (ruled, capped):
        d = est.diagnostics_
        assert set(SCHEMA_KEYS) <= set(d)
        assert all(math.isnan(d[k]) for k in ("rhat_mean", "ess_mean", "rhat_loglik", "ess_loglik", "acceptance"))
        assert d["divergences"] is None and isinstance(d["converged"], bool) and d["n_epochs"] == est.n_epochs_
    assert ruled.n_epochs_ < 50 and ruled.diagnostics_["stopped_by_cap"] is False and ruled.diagnostics_["converged"]
    assert ruled.stopped_by_ == "min_lr" and capped.stopped_by_ == "cap"
    assert capped.n_epochs_ == 2 and capped.diagnostics_["stopped_by_cap"] is True
    assert capped.diagnostics_["converged"] is False
    capped.save(tmp_path / "m.safetensors")
    back = HyperVIRegressor.load(tmp_path / "m.safetensors").diagnostics_
    assert back.keys() == capped.diagnostics_.keys()
    for key, value in capped.diagnostics_.items():
        assert back[key] == value or (isinstance(value, float) and math.isnan(value) and math.isnan(back[key]))


def test_max_epochs_and_loss_decreases_on_wave():
    X, y = _wave()
    est = HyperVIRegressor(space="parameter", noise_std=0.1, activation="tanh", standardize=False, random_state=0,
                           validation_fraction=0.0, **{**TINY, "hidden": 50, "max_epochs": 30, "n_ll_samples": 10}).fit(X, y)
    assert est.n_epochs_ == 30 and est.stopped_by_ == "cap" and est.best_epoch_ == 30
    assert est.loss_curve_[-5:].mean() < 0.85 * est.loss_curve_[:5].mean()


def test_collapse_warning():
    X, y = _data(n=20)
    with pytest.warns(RuntimeWarning, match="q collapsed"):
        est = HyperVIRegressor(space="parameter", family="mean-field", noise_std=1.0, init_sd=1e-10, lr=1e-9,
                               random_state=0, **TINY).fit(X, y)
    assert est.min_knn_distance_[-1] < 1e-6


@pytest.mark.parametrize("space,family", [("function", "hypernet"), ("parameter", "hypernet"),
                                          ("parameter", "mean-field"), ("function", "mean-field")])
def test_deterministic_given_seed(space, family):
    X, y = _data(n=30)
    kw = dict(space=space, family=family, noise_std=0.5, **TINY)
    a = HyperVIRegressor(random_state=3, **kw).fit(X, y)
    b = HyperVIRegressor(random_state=3, **kw).fit(X, y)
    c = HyperVIRegressor(random_state=4, **kw).fit(X, y)
    np.testing.assert_array_equal(a.loss_curve_, b.loss_curve_)
    np.testing.assert_array_equal(a.sample_predictions(X, 10), b.sample_predictions(X, 10))
    assert not np.array_equal(a.loss_curve_, c.loss_curve_)
    assert a.n_params_ == (3 + 1) * 8 + 8 + 1


def test_ood_box_in_user_units_and_default_box():
    X, y = _data(n=30)
    est = HyperVIRegressor(noise_std=0.5, random_state=0, **TINY).fit(X, y)
    Xs = (X - est.x_mean_) / est.x_scale_
    np.testing.assert_allclose(est.ood_box_.low, Xs.min(0))
    np.testing.assert_allclose(est.ood_box_.high, Xs.max(0))
    est2 = HyperVIRegressor(noise_std=0.5, random_state=0, ood_box=([-4] * 3, [2] * 3), **TINY).fit(X, y)
    np.testing.assert_allclose(est2.ood_box_.low, (-4 - est.x_mean_) / est.x_scale_)


def test_save_load_roundtrip(tmp_path):
    X, y = _data(n=30)
    est = HyperVIRegressor(noise_std=0.5, random_state=0, ood_box=([-4] * 3, [2] * 3), **TINY).fit(X, y)
    est.save(tmp_path / "m.safetensors")
    back = HyperVIRegressor.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.sample_predictions(X, 20), est.sample_predictions(X, 20))
    np.testing.assert_array_equal(back.loss_curve_, est.loss_curve_)
    np.testing.assert_array_equal(back.ood_box_.low, est.ood_box_.low)
    assert back.n_epochs_ == est.n_epochs_


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kw,match",
    [({"noise_std": 0.0}, "noise_std must be > 0"), ({"validation_fraction": 0.5}, "validation_fraction"),
     ({"validation_fraction": -0.1}, "validation_fraction"), ({"patience": 0}, "patience must be >= 1"),
     ({"lr_patience": -1}, "lr_patience must be >= 0"),
     ({"noise_std": -1.0}, "noise_std must be > 0"), ({"space": "weights"}, "space must be one of"),
     ({"noise_std": 1e-300}, r"noise_std must be >= 1e-06 .* got 1e-300"),  # issue 22: said "try a smaller lr"
     ({"family": "flow"}, "family must be one of"), ({"n_kl_samples": 1}, "n_kl_samples must be >= 2"),
     ({"lr_factor": 1.5}, "lr_factor must be in"), ({"ood_box": ([0.0], [1.0])}, "ood_box has 1 feature"),
     ({"ood_box": "box"}, "ood_box must be None")],
)
def test_bad_settings(kw, match):
    X, y = _data(n=20)
    with pytest.raises(ValueError, match=match):
        HyperVIRegressor(**{**dict(noise_std=1.0, **TINY), **kw}).fit(X, y)


def test_bad_data():
    X, y = _data(n=20)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        HyperVIRegressor(noise_std=1.0, **TINY).fit(X, y)
    X, y = _data(n=20)
    est = HyperVIRegressor(noise_std=1.0, random_state=0, **TINY).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict_distribution(X[:, :2])
    with pytest.raises(ValueError, match="n_predictors >= 2"):
        est.set_params(n_predictors=1).ood_score(X)


# ---------------------------------------------------------------- validated fitting, base, persistence
def _held_out(est, n):
    """The held-out rows and the fixed seed of the held-out NLL's draws (seeds 5 and 6 of the fit)."""
    *_, holdout_seed, validation_seed = seeds_from(est.random_state, 6)
    return holdout_split(n, est.validation_fraction, holdout_seed)[1], validation_seed


@pytest.fixture(scope="module")
def stopped():
    """A learned noise and a high rate on 36 + 4 rows: the held-out NLL turns up and the rule stops it."""
    X, y = _data(n=40)
    est = HyperVIRegressor(space="parameter", family="mean-field", lr=3e-2, patience=5, random_state=0,
                           **{**TINY, "max_epochs": 400}).fit(X, y)
    return est, X, y


def test_stops_early_on_the_held_out_nll_and_records_the_curve(stopped):
    est, X, y = stopped
    curve = est.validation_curve_
    assert est.stopped_by_ == "patience" and est.diagnostics_["stopped_by_cap"] is False
    assert curve.shape == est.loss_curve_.shape == (est.n_epochs_,) and est.n_epochs_ < 400
    assert est.best_epoch_ == int(np.argmin(curve)) + 1 and est.n_epochs_ == est.best_epoch_ + 5
    assert est.n_train_ == 36 and est.noise_std is None and est.noise_std_ > 0


def test_restores_the_best_epoch(stopped):
    """The restored q and σ_l score the held-out rows at the curve's best value (same 200 draws);
    the last epoch's value differs, so the check can fail."""
    est, X, y = stopped
    rows, validation_seed = _held_out(est, len(y))
    theta = est.family_.sample(200, torch.Generator().manual_seed(validation_seed)).double()
    f = est.net_(theta, torch.as_tensor((X[rows] - est.x_mean_) / est.x_scale_)).numpy()
    yv = (y[rows] - est.y_mean_) / est.y_scale_
    again = -np.mean(logsumexp(stats.norm.logpdf(yv, f, est.noise_std_), axis=0) - math.log(200))
    best = est.validation_curve_[est.best_epoch_ - 1]
    assert again == pytest.approx(best, abs=1e-9)
    assert abs(est.validation_curve_[-1] - best) > 1e-3
    # the predictive mixture of 1000 other draws, in standardised units, agrees to Monte Carlo error
    nll = -np.mean(est.predict_distribution(X[rows]).log_prob(y[rows])) - math.log(est.y_scale_)
    assert nll == pytest.approx(best, abs=0.1)


def test_learned_noise_is_the_default_and_reaches_the_predictive():
    X, y = _data(n=40)
    est = HyperVIRegressor(space="parameter", random_state=0, **{**TINY, "max_epochs": 30}).fit(X, y)
    assert est.noise_std is None and est.noise_std_ != pytest.approx(1.0)  # moved from its start, sd(y) = 1
    pred = est.predict_distribution(X[:3])
    np.testing.assert_allclose(pred.aleatoric_var, (est.noise_std_ * est.y_scale_) ** 2, rtol=1e-12)
    fixed = HyperVIRegressor(space="parameter", noise_std=0.4, random_state=0, **TINY).fit(X, y)
    assert fixed.noise_std_ == 0.4


def test_is_a_dubito_regressor_whose_predict_is_the_predictive_mean():
    X, y = _data(n=30)
    est = HyperVIRegressor(noise_std=0.5, random_state=0, **TINY).fit(X, y)
    assert isinstance(est, DubitoRegressor) and "predict" not in vars(HyperVIRegressor)
    np.testing.assert_array_equal(est.predict(X), est.predict_distribution(X).mean)


def test_save_load_keeps_the_validated_fit(stopped, tmp_path):
    est, X, _ = stopped
    est.save(tmp_path / "m.safetensors")
    back = HyperVIRegressor.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.predict_distribution(X).draws, est.predict_distribution(X).draws)
    np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)
    assert (back.best_epoch_, back.stopped_by_, back.noise_std_) == (est.best_epoch_, est.stopped_by_, est.noise_std_)
    assert back.get_params() == est.get_params()


def test_a_file_written_before_validated_fitting_still_loads(tmp_path):
    """The layout before issue 19: "patience" was the plateau schedule's, noise_std fixed and
    required, y_mean / y_scale in the JSON, no held-out record. It loads as fitted on every row."""
    X, y = _data(n=30)
    est = HyperVIRegressor(noise_std=0.5, random_state=0, validation_fraction=0.0, lr_patience=7, **TINY).fit(X, y)
    est.save(tmp_path / "new.safetensors")
    tensors, settings = io.load_tensors(tmp_path / "new.safetensors", "HyperVIRegressor")
    for key in ("validation_curve", "y_mean", "y_scale"):
        del tensors[key]
    fitted = {k: v for k, v in settings["fitted"].items() if k not in ("best_epoch", "stopped_by", "noise_std")}
    fitted.update(y_mean=est.y_mean_, y_scale=est.y_scale_)
    params = {k: v for k, v in settings["params"].items() if k not in ("validation_fraction", "patience")}
    params["patience"] = params.pop("lr_patience")
    io.save_tensors(tmp_path / "old.safetensors", tensors, "HyperVIRegressor", {"params": params, "fitted": fitted})
    back = HyperVIRegressor.load(tmp_path / "old.safetensors")
    np.testing.assert_array_equal(back.predict_distribution(X).draws, est.predict_distribution(X).draws)
    assert (back.lr_patience, back.patience, back.validation_fraction, back.noise_std_) == (7, 20, 0.0, 0.5)
    assert back.stopped_by_ == "cap" and back.best_epoch_ == 2 and back.validation_curve_.size == 0


def test_tune_accepts_the_declared_search_space():
    X, y = _data(n=40)
    assert set(HyperVIRegressor.search_space) == {"lr", "prior_sd", "hidden"}
    result = tune(HyperVIRegressor(space="parameter", **TINY), X, y, n_trials=2, progress=False)
    assert len(result.trials) == 2 and all(t["state"] == "COMPLETE" for t in result.trials)
    assert set(result.best_params) == {"lr", "prior_sd", "hidden"} and np.isfinite(result.best_score)


# ---------------------------------------------------------------- test 14: synthetic smoke test
def _wave_sigma_ratio(**kw):
    X, y = _wave()
    est = HyperVIRegressor(space="function", noise_std=0.1, activation="tanh", n_ood_points=50,
                           ood_box=([-4.0], [2.0]), standardize=False, n_predictors=500, random_state=0,
                           progress=False, **kw).fit(X, y)
    far = est.sample_predictions(np.linspace(-4, -2, 50)[:, None], 500).std(axis=0, ddof=1).mean()
    near = est.sample_predictions(X, 500).std(axis=0, ddof=1).mean()
    return far / near


def test_funn_hyvi_wave_sigma_grows_away_from_data_cheap():
    """Spec test 14, CI budget (50 epochs of 3 steps, 100 KL + 20 LL samples): ratio > 2."""
    assert _wave_sigma_ratio(max_epochs=50, n_kl_samples=100, n_ll_samples=20) > 2.0


@pytest.mark.slow
def test_funn_hyvi_wave_sigma_grows_away_from_data():
    """Spec test 14 at the paper's sample sizes (500 + 500 KL, 100 LL), 200 epochs (~20 s)."""
    assert _wave_sigma_ratio(max_epochs=200) > 2.0


# ------------------------------------------------------------------------------------ checkpoints
class _Interrupt(Exception):
    pass


def _interrupt_after(monkeypatch, n_epochs: int):
    """Make the n_epochs+1-th epoch of the next fit raise, as a kill between epochs would."""
    calls = {"n": 0}
    real = HyperVIRegressor._train_epoch

    def flaky(state):
        calls["n"] += 1
        if calls["n"] > n_epochs:
            raise _Interrupt
        return real(state)

    monkeypatch.setattr(HyperVIRegressor, "_train_epoch", staticmethod(flaky))


@pytest.mark.parametrize("space, family", [("function", "hypernet"), ("parameter", "mean-field")])
def test_resume_after_an_interruption_gives_the_uninterrupted_fit(tmp_path, monkeypatch, space, family):
    """Killed after epoch 5 (last checkpoint at 4, every 2 epochs), resume=True ends where an
    uninterrupted 9-epoch fit ends: q's weights, curves and predictions bit for bit."""
    X, y = _data()
    kw = dict(TINY, space=space, family=family, noise_std=0.5, random_state=7, max_epochs=9, lr_patience=0,
              lr_factor=0.5)
    full = HyperVIRegressor(**kw).fit(X, y)
    with monkeypatch.context() as m:
        _interrupt_after(m, 5)
        with pytest.raises(_Interrupt):
            HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y)
    assert [p.name for p in tmp_path.iterdir()] == ["hyper_vi.safetensors"]  # no temporary files left
    resumed = HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y, resume=True)
    assert np.array_equal(resumed.loss_curve_, full.loss_curve_) and resumed.n_epochs_ == full.n_epochs_ == 9
    assert np.array_equal(resumed.lr_curve_, full.lr_curve_)
    if family == "hypernet":  # the noisy k-NN objective plateaus: the schedule's state was restored
        assert len(set(full.lr_curve_)) > 1
    for a, b in zip(full.family_.state_dict().values(), resumed.family_.state_dict().values()):
        assert torch.equal(a, b)
    assert np.array_equal(resumed.ood_score(X[:5]), full.ood_score(X[:5]))
    # a finished checkpoint: resume returns the fitted model without training again
    _interrupt_after(monkeypatch, 0)
    again = HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y, resume=True)
    assert np.array_equal(again.loss_curve_, full.loss_curve_)


def test_resume_keeps_the_early_stopping_state_and_the_best_q(tmp_path, monkeypatch):
    """Held-out patience 2 stops this fit at epoch 3 with epoch 1 best. Killed after epoch 2
    (checkpoints every epoch), the resumed fit stops at the same epoch and restores the same
    best q, which only the checkpoint's copy holds; resuming the finished checkpoint trains nothing."""
    X, y = _data()
    kw = dict(TINY, noise_std=0.5, random_state=7, max_epochs=9, lr_patience=0, lr_factor=0.5, patience=2)
    full = HyperVIRegressor(**kw).fit(X, y)
    assert (full.stopped_by_, full.n_epochs_, full.best_epoch_) == ("patience", 3, 1)
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        with pytest.raises(_Interrupt):
            HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=1).fit(X, y)
    resumed = HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=1).fit(X, y, resume=True)
    _interrupt_after(monkeypatch, 0)
    again = HyperVIRegressor(**kw, checkpoint_dir=tmp_path, checkpoint_every=1).fit(X, y, resume=True)
    for est in (resumed, again):
        assert (est.stopped_by_, est.n_epochs_, est.best_epoch_) == ("patience", 3, 1)
        np.testing.assert_array_equal(est.validation_curve_, full.validation_curve_)
        np.testing.assert_array_equal(est.loss_curve_, full.loss_curve_)
        for a, b in zip(full.family_.state_dict().values(), est.family_.state_dict().values()):
            assert torch.equal(a, b)


def test_resume_refuses_other_data_or_settings_and_needs_a_folder_and_seed(tmp_path):
    X, y = _data()
    kw = dict(TINY, noise_std=0.5, random_state=7, checkpoint_dir=tmp_path)
    HyperVIRegressor(**kw).fit(X, y)
    with pytest.raises(ValueError, match="different model, data or settings.*data"):
        HyperVIRegressor(**kw).fit(X, y + 1.0, resume=True)
    with pytest.raises(ValueError, match=r"noise_std: checkpoint 0\.5 vs this fit 0\.6"):
        HyperVIRegressor(**{**kw, "noise_std": 0.6}).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        HyperVIRegressor(**{**kw, "checkpoint_dir": None}).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="integer random_state"):
        HyperVIRegressor(**{**kw, "random_state": None}).fit(X, y, resume=True)
    (tmp_path / "hyper_vi.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable safetensors"):
        HyperVIRegressor(**kw).fit(X, y, resume=True)
    # no checkpoint yet: resume starts afresh and equals a plain fit
    fresh = HyperVIRegressor(**{**kw, "checkpoint_dir": tmp_path / "new"}).fit(X, y, resume=True)
    plain = HyperVIRegressor(**{**kw, "checkpoint_dir": None}).fit(X, y)
    assert np.array_equal(fresh.loss_curve_, plain.loss_curve_)
