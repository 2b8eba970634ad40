"""MCDropoutRegressor (Gal & Ghahramani 2016; the IC-NLM paper's MC-dropout benchmark)."""

import json

import numpy as np
import pytest
import torch

from dubito._validation import NotFittedError
from dubito.metrics import crps, nll
from dubito.metrics.scoring import crps_mixture, crps_quadrature
from dubito.nn.dropout_mlp import MLP
from dubito.predictive.samples import Samples
from dubito.regression import MCDropoutRegressor
from dubito.regression.deterministic import residual_variance

FAST = dict(dropout=0.1, n_samples=40, hidden=(32, 16), lr=3e-3, epochs=8, batch_size=32, progress=False,
            random_state=0, validation_fraction=0.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ [1.0, 2.0, -1.0] + np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=200)
    return X, y, rng.normal(size=(25, 3))


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _ = data
    return MCDropoutRegressor(**FAST).fit(X, y)


def test_batched_passes_equal_a_loop_over_masks_exactly(fitted, data):
    """All T masks in one forward == T single-mask forwards with the same masks (bit for bit)."""
    _, _, Xq = data
    masks = fitted.sample_masks()
    batched = fitted.predict_draws(Xq, masks=masks)
    loop = np.stack([fitted.predict_draws(Xq, masks=[m[t : t + 1] for m in masks])[0] for t in range(40)])
    assert batched.shape == (40, 25)
    np.testing.assert_array_equal(batched, loop)
    # ... and the default call uses the same seeded masks
    np.testing.assert_array_equal(fitted.predict_draws(Xq), batched)
    # the net level: one (T, n, 1) forward against T forwards of (1, n, 1)
    net = fitted.net_
    x = torch.as_tensor((Xq - fitted.x_mean_) / fitted.x_scale_)
    with torch.no_grad():
        full = net(x, masks)
        for t in range(40):
            assert torch.equal(full[t], net(x, [m[t : t + 1] for m in masks])[0])


def test_masks_are_bernoulli_with_the_dropout_rate():
    net = MLP(3, (200, 100), 1, dropout=0.3, generator=torch.Generator().manual_seed(0))
    masks = net.sample_masks(500, torch.Generator().manual_seed(1))
    assert [tuple(m.shape) for m in masks] == [(500, 200), (500, 100)]
    for m in masks:
        vals = set(np.unique(m.numpy()).round(12))
        assert vals == {0.0, round(1 / 0.7, 12)}
        # 1e5 Bernoulli(0.3) draws: sd of the rate 0.0014; tolerance ~ 5 sd
        assert abs(float((m == 0).double().mean()) - 0.3) < 0.007


def test_predictive_is_samples_with_noise(fitted, data):
    """Samples(draws, noise_std): mean = mean of draws; epistemic = Var of draws (ddof 0);
    aleatoric = noise_var_ = (1/n) sum (y - f_ws(x))^2 with f_ws the weight-scaled net."""
    X, y, Xq = data
    d = fitted.predict_distribution(Xq)
    draws = fitted.predict_draws(Xq)
    assert isinstance(d, Samples) and d.n_draws == 40
    np.testing.assert_array_equal(d.draws, draws)
    np.testing.assert_allclose(d.mean, draws.mean(0), rtol=1e-13)
    np.testing.assert_allclose(d.epistemic_var, draws.var(0), rtol=1e-12)
    np.testing.assert_allclose(d.aleatoric_var, fitted.noise_var_, rtol=1e-13)
    np.testing.assert_allclose(d.var, draws.var(0) + fitted.noise_var_, rtol=1e-12)
    fitted.net_.eval()
    with torch.no_grad():
        f_ws = fitted.net_(torch.as_tensor((X - fitted.x_mean_) / fitted.x_scale_))[:, 0].numpy()
    f_ws = f_ws * fitted.y_scale_ + fitted.y_mean_
    assert fitted.noise_var_ == pytest.approx(np.mean((y - f_ws) ** 2), rel=1e-12)
    assert fitted.noise_var_ == residual_variance(y, f_ws)
    np.testing.assert_allclose(fitted.predict(Xq), d.mean, rtol=1e-13)
    # draws vary between masks (dropout is on at prediction)
    assert np.all(draws.std(0) > 0)


def test_noise_none_gives_a_kde_and_a_float_is_sigma(data):
    X, y, Xq = data
    kde = MCDropoutRegressor(**{**FAST, "noise": "none"}).fit(X, y)
    d = kde.predict_distribution(Xq)
    assert kde.noise_var_ is None and d.noise_std is None and d.epistemic_var is None
    assert d.bandwidth_ is not None  # Scott's rule on the draws, as the authors' KDE
    fixed = MCDropoutRegressor(**{**FAST, "noise": 0.25}).fit(X, y)
    assert fixed.noise_var_ == 0.0625
    np.testing.assert_allclose(fixed.predict_distribution(Xq).aleatoric_var, 0.0625)
    # same seed, same network: only the noise differs
    np.testing.assert_array_equal(fixed.predict_draws(Xq), kde.predict_draws(Xq))


def test_epistemic_variance_grows_away_from_the_data():
    """Train on x in [-2, 2]; the spread of the MC draws at |x| in {6, 8} is more than 5x its
    largest value at |x| <= 1.5 (measured over seeds 0-2 and p in {0.05, 0.1}: ratio >= 8)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 500)
    y = np.sin(2 * x) + 0.1 * rng.standard_normal(500)
    est = MCDropoutRegressor(dropout=0.05, n_samples=200, hidden=(64, 64), lr=3e-3, epochs=40,
                             progress=False, random_state=0).fit(x[:, None], y)
    inside = est.predict_distribution(np.linspace(-1.5, 1.5, 13)[:, None]).epistemic_var
    outside = est.predict_distribution(np.array([[-8.0], [-6.0], [6.0], [8.0]])).epistemic_var
    assert outside.min() > 5 * inside.max(), (inside, outside)
    # the aleatoric part is the same everywhere (homoscedastic)
    assert np.ptp(est.predict_distribution(np.array([[0.0], [8.0]])).aleatoric_var) == 0


def test_crps_and_nll_through_the_mixture(fitted, data):
    """crps dispatches Samples -> its mixture's closed form; it agrees with quadrature."""
    _, _, Xq = data
    d = fitted.predict_distribution(Xq[:6])
    yq = d.mean + np.linspace(-1, 1, 6)
    c = crps(d, yq)
    mix = d.as_mixture()
    np.testing.assert_allclose(c, crps_mixture(mix.weights, mix.means, mix.variances, yq), rtol=1e-12)
    np.testing.assert_allclose(c, crps_quadrature(d, yq), rtol=1e-6)
    assert np.all(np.isfinite(nll(d, yq)))
    kde = MCDropoutRegressor(**{**FAST, "noise": "none"}).fit(*data[:2]).predict_distribution(Xq[:6])
    assert np.all(np.isfinite(crps(kde, yq)))


def test_seeds_rows_and_chunks(fitted, data, monkeypatch):
    """Masks are shared by all rows: a row's draws do not depend on the other rows or on the
    chunking (to BLAS rounding); another prediction seed gives other draws."""
    import dubito.regression.dropout as mcd

    _, _, Xq = data
    full = fitted.predict_draws(Xq)
    np.testing.assert_allclose(fitted.predict_draws(Xq[5:9]), full[:, 5:9], rtol=1e-12, atol=1e-12)
    # blocks of 3 rows (3 x 32 numbers) and 7 masks: same numbers, and still bit-equal to a loop
    monkeypatch.setitem(mcd._ROW_ELEMENTS, "cpu", 3 * 32)
    monkeypatch.setitem(mcd._BLOCK_ELEMENTS, "cpu", 7 * 3 * 32)
    blocked = fitted.predict_draws(Xq)
    np.testing.assert_allclose(blocked, full, rtol=1e-12, atol=1e-12)
    masks = fitted.sample_masks()
    loop = np.stack([fitted.predict_draws(Xq, masks=[m[t : t + 1] for m in masks])[0] for t in range(40)])
    np.testing.assert_array_equal(blocked, loop)
    other = fitted.predict_draws(Xq, random_state=123)
    assert not np.allclose(other, full)
    np.testing.assert_array_equal(other, fitted.predict_draws(Xq, random_state=123))
    assert fitted.predict_draws(Xq, n_samples=7).shape == (7, 25)


def test_fit_is_reproducible_and_seed_matters(data):
    X, y, Xq = data
    a = MCDropoutRegressor(**FAST).fit(X, y).predict_draws(Xq)
    b = MCDropoutRegressor(**FAST).fit(X, y).predict_draws(Xq)
    c = MCDropoutRegressor(**{**FAST, "random_state": 1}).fit(X, y).predict_draws(Xq)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_training_learns(data):
    X, y, _ = data
    est = MCDropoutRegressor(**{**FAST, "epochs": 30}).fit(X, y)
    assert est.loss_curve_[-1] < 0.5 * est.loss_curve_[0]
    assert est.score(X, y) > 0.9


def test_save_load_round_trip(fitted, data, tmp_path):
    _, _, Xq = data
    path = tmp_path / "mcd.safetensors"
    fitted.save(path)
    back = MCDropoutRegressor.load(path)
    assert back.get_params() == fitted.get_params()
    assert back.noise_var_ == fitted.noise_var_ and back.predict_seed_ == fitted.predict_seed_
    np.testing.assert_array_equal(back.predict_draws(Xq), fitted.predict_draws(Xq))
    np.testing.assert_array_equal(back.loss_curve_, fitted.loss_curve_)
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert header["__metadata__"]["dubito_class"] == "MCDropoutRegressor"
    # noise="none" stores None
    kde = MCDropoutRegressor(**{**FAST, "noise": "none", "epochs": 1}).fit(*data[:2])
    kde.save(path)
    assert MCDropoutRegressor.load(path).noise_var_ is None
    with pytest.raises(ValueError, match="holds a MCDropoutRegressor"):
        from dubito.regression import MixtureDensityRegressor

        MixtureDensityRegressor.load(path)


def test_heldout_variance_scale_is_the_map_of_the_held_out_rows_and_is_saved(data, tmp_path):
    """variance_scaling="heldout": c is `fit_variance_scale` (with `scale_spread`) of the predictive on
    the estimator's own held-out rows, brute-forced here from the documented seeds; the predictive
    is then the unscaled one's location-scale map (variance times c, same mean), and the file keeps
    c. "none", or no held-out rows: c = 1."""
    from dubito._estimator import seeds_from
    from dubito.early_stopping import holdout_split
    from dubito.variance_scale import fit_variance_scale, scale_spread

    X, y, Xq = data
    kw = {**FAST, "validation_fraction": 0.2, "epochs": 30}
    plain = MCDropoutRegressor(**kw).fit(X, y)
    scaled = MCDropoutRegressor(**kw, variance_scaling="heldout").fit(X, y)
    held = holdout_split(len(y), 0.2, seeds_from(0, 5)[4])[1]
    reference = fit_variance_scale(plain.predict_distribution(X[held]).as_mixture(), y[held], scale=scale_spread)
    assert plain.variance_scale_ == 1.0 and scaled.variance_scale_ == pytest.approx(reference, rel=1e-9)
    assert scaled.variance_scale_ != pytest.approx(1.0, abs=0.02)
    a, b = plain.predict_distribution(Xq), scaled.predict_distribution(Xq)
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b.var, scaled.variance_scale_ * a.var, rtol=1e-10)
    scaled.save(tmp_path / "s.safetensors")
    back = MCDropoutRegressor.load(tmp_path / "s.safetensors")
    assert back.variance_scale_ == scaled.variance_scale_
    np.testing.assert_array_equal(back.predict_distribution(Xq).var, b.var)
    # "auto" (the default) is "heldout" from AUTO_MIN_HELDOUT_ROWS held-out rows up (here 40), "none" below
    import dubito.variance_scale as variance_scale_module

    for threshold, c in ((40, scaled.variance_scale_), (41, 1.0)):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(variance_scale_module, "AUTO_MIN_HELDOUT_ROWS", threshold)
            assert MCDropoutRegressor(**kw, variance_scaling="auto").fit(X, y).variance_scale_ == c
    every_row = MCDropoutRegressor(**{**FAST, "epochs": 2}, variance_scaling="heldout").fit(X, y)
    assert every_row.variance_scale_ == 1.0
    # a file written before variance scaling (no variance_scale, no such parameter) loads with c = 1
    from dubito import io
    from tests.old_layout import rewrite_as_older

    plain.save(tmp_path / "old.safetensors")
    rewrite_as_older(tmp_path / "old.safetensors", "MCDropoutRegressor", drop_fitted=("variance_scale",))
    tensors, settings = io.load_tensors(tmp_path / "old.safetensors", "MCDropoutRegressor")
    del settings["params"]["variance_scaling"]
    io.save_tensors(tmp_path / "old.safetensors", tensors, "MCDropoutRegressor", settings)
    old = MCDropoutRegressor.load(tmp_path / "old.safetensors")
    assert old.variance_scale_ == 1.0 and old.variance_scaling == "none"
    np.testing.assert_array_equal(old.predict_distribution(Xq).var, a.var)


@pytest.mark.parametrize(
    "setting, match",
    [
        (dict(variance_scaling="yes"), "variance_scaling must be one of"),
        (dict(dropout=1.0), "dropout must be < 1"),
        (dict(dropout=-0.1), "dropout must be >= 0"),
        (dict(n_samples=0), "n_samples must be >= 1"),
        (dict(noise="tau"), "noise must be 'residual', 'none' or a positive float"),
        (dict(noise=-1.0), "noise must be > 0"),
        (dict(hidden=()), "at least one hidden layer"),
        (dict(weight_decay=-1.0), "weight_decay must be >= 0"),
        (dict(lr=0.0), "lr must be > 0"),
        (dict(activation="sigmoid"), "activation must be one of"),
        (dict(progress="yes"), "progress must be True or False"),
    ],
)
def test_bad_settings_fail_at_fit(data, setting, match):
    with pytest.raises(ValueError, match=match):
        MCDropoutRegressor(**{**FAST, **setting}).fit(*data[:2])


def test_bad_calls(fitted, data):
    _, _, Xq = data
    with pytest.raises(NotFittedError):
        MCDropoutRegressor().predict_distribution(Xq)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        fitted.predict_distribution(Xq, n_samples=0)
    with pytest.raises(ValueError, match="need one mask per hidden layer"):
        fitted.predict_draws(Xq, masks=fitted.sample_masks()[:1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_matches_cpu_closely(data):
    X, y, Xq = data
    gpu = MCDropoutRegressor(**{**FAST, "device": "cuda"}).fit(X, y)
    assert next(gpu.net_.parameters()).device.type == "cuda"
    back = gpu.predict_draws(Xq)
    assert back.shape == (40, 25) and np.all(np.isfinite(back))
