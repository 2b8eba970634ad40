"""DeterministicRegressor and NaiveRegressor (the IC-NLM paper's "Deterministic DNN" and naive
learner), and the input validation shared by every MLP baseline."""

import json

import numpy as np
import pytest
import torch
from scipy import stats

from dubito._validation import DataTypeError, NotFittedError
from dubito.metrics import crps, nll
from dubito.predictive.normal import Normal
from dubito.regression import (
    DeterministicRegressor,
    MCDropoutRegressor,
    MixtureDensityRegressor,
    NaiveRegressor,
)

FAST = dict(hidden=(16, 8), lr=1e-2, epochs=10, batch_size=32, progress=False, random_state=0, validation_fraction=0.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = 5.0 + X @ [1.0, -2.0, 0.5] + 0.5 * rng.normal(size=150)
    return X, y, rng.normal(size=(20, 3))


@pytest.fixture(scope="module")
def fitted(data):
    return DeterministicRegressor(**FAST).fit(*data[:2])


# ---------------------------------------------------------------- deterministic network
def test_noise_variance_is_the_training_residual_variance(fitted, data):
    """noise_var_ = (1/n) sum_i (y_i - f(x_i))^2 over the training rows, user units."""
    X, y, _ = data
    f = fitted.predict(X)
    assert fitted.noise_var_ == pytest.approx(np.sum((y - f) ** 2) / len(y), rel=1e-12)
    # the same from the raw network on standardised inputs
    with torch.no_grad():
        raw = fitted.net_(torch.as_tensor((X - fitted.x_mean_) / fitted.x_scale_))[:, 0].numpy()
    np.testing.assert_allclose(f, raw * fitted.y_scale_ + fitted.y_mean_, rtol=1e-13)


def test_predictive_is_a_normal_with_the_noise(fitted, data):
    _, _, Xq = data
    d = fitted.predict_distribution(Xq)
    assert isinstance(d, Normal)
    np.testing.assert_array_equal(d.mean, fitted.predict(Xq))
    np.testing.assert_allclose(d.var, fitted.noise_var_, rtol=0)
    np.testing.assert_allclose(d.aleatoric_var, fitted.noise_var_, rtol=0)
    assert d.epistemic_var is None


def test_training_learns(data):
    X, y, _ = data
    est = DeterministicRegressor(**{**FAST, "epochs": 40}).fit(X, y)
    assert est.loss_curve_.shape == (40,) and est.loss_curve_[-1] < 0.2 * est.loss_curve_[0]
    assert est.score(X, y) > 0.9
    assert est.noise_var_ < 0.5  # true noise variance 0.25


def test_fit_is_reproducible(data):
    X, y, Xq = data
    a = DeterministicRegressor(**FAST).fit(X, y).predict(Xq)
    b = DeterministicRegressor(**FAST).fit(X, y).predict(Xq)
    c = DeterministicRegressor(**{**FAST, "random_state": 3}).fit(X, y).predict(Xq)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_optimizer_equals_hand_written_momentum_sgd(data, momentum):
    """optimizer="sgd": three full-batch epochs equal a hand-written heavy-ball loop
    v <- mu v + g, theta <- theta - lr v (torch's SGD, dampening 0) from the same initial net."""
    from dubito.regression.deterministic import seeds_from

    X, y, _ = data
    settings = dict(hidden=(6,), lr=0.05, epochs=3, batch_size=len(y), progress=False, random_state=4,
                    optimizer="sgd", momentum=momentum, validation_fraction=0.0)
    est = DeterministicRegressor(**settings).fit(X, y)
    net = est._build_net(est._settings(), X.shape[1], generator=torch.Generator().manual_seed(seeds_from(4, 4)[0]))
    xs = torch.as_tensor((X - est.x_mean_) / est.x_scale_, dtype=torch.float32)
    ys = torch.as_tensor((y - est.y_mean_) / est.y_scale_, dtype=torch.float32)
    velocity = [torch.zeros_like(p) for p in net.parameters()]
    for _ in range(3):
        loss = ((net(xs)[:, 0] - ys) ** 2).mean()
        grads = torch.autograd.grad(loss, list(net.parameters()))
        with torch.no_grad():
            for p, v, g in zip(net.parameters(), velocity, grads):
                v.mul_(momentum).add_(g)
                p.sub_(0.05 * v)
    for ours, theirs in zip(est.net_.parameters(), net.parameters()):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().double().numpy(), rtol=1e-5, atol=1e-6)
    adam = DeterministicRegressor(**{**settings, "optimizer": "adam"}).fit(X, y)
    assert not np.allclose(adam.predict(X), est.predict(X))
    with pytest.raises(ValueError, match="optimizer"):
        DeterministicRegressor(**{**settings, "optimizer": "lbfgs"}).fit(X, y)
    with pytest.raises(ValueError, match="momentum"):
        DeterministicRegressor(**{**settings, "momentum": 1.0}).fit(X, y)


def test_deterministic_save_load_round_trip(fitted, data, tmp_path):
    _, _, Xq = data
    path = tmp_path / "det.safetensors"
    fitted.save(path)
    back = DeterministicRegressor.load(path, device="cpu")
    assert back.get_params() == fitted.get_params()
    assert back.noise_var_ == fitted.noise_var_
    np.testing.assert_array_equal(back.predict(Xq), fitted.predict(Xq))
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert header["__metadata__"]["dubito_class"] == "DeterministicRegressor"
    data_bytes = path.read_bytes()
    path.write_bytes(data_bytes[: len(data_bytes) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        DeterministicRegressor.load(path)


# ---------------------------------------------------------------- naive learner
@pytest.mark.parametrize("strategy", ["constant", "mean"])
def test_naive_nll_equals_the_closed_form(data, strategy):
    """N(c, s^2) with s^2 = mean((y - c)^2): NLL_i = 1/2 log(2 pi s^2) + (y_i - c)^2 / (2 s^2);
    c = 0 (the paper's "always predicts 0") or the training mean (s^2 = Var(y), ddof 0)."""
    X, y, Xq = data
    est = NaiveRegressor(strategy=strategy).fit(X, y)
    c = 0.0 if strategy == "constant" else y.mean()
    s2 = np.mean(y**2) if strategy == "constant" else np.var(y)
    assert est.center_ == pytest.approx(c, abs=1e-14) and est.noise_var_ == pytest.approx(s2, rel=1e-13)
    yq = np.linspace(-3, 8, 20)
    expected = 0.5 * np.log(2 * np.pi * s2) + (yq - c) ** 2 / (2 * s2)
    d = est.predict_distribution(Xq)
    np.testing.assert_allclose(nll(d, yq), expected, rtol=1e-12)
    np.testing.assert_allclose(nll(d, yq), -stats.norm.logpdf(yq, c, np.sqrt(s2)), rtol=1e-12)
    np.testing.assert_array_equal(est.predict(Xq), c)
    # in-sample, the mean NLL is 1/2 log(2 pi e s^2) (the ML fit of the noise)
    assert nll(est.predict_distribution(X), y).mean() == pytest.approx(0.5 * np.log(2 * np.pi * np.e * s2), rel=1e-12)


def test_naive_other_constant_and_save_load(data, tmp_path):
    X, y, Xq = data
    est = NaiveRegressor(constant=2.5).fit(X, y)
    assert est.noise_var_ == pytest.approx(np.mean((y - 2.5) ** 2), rel=1e-13)
    est.save(tmp_path / "naive.safetensors")
    back = NaiveRegressor.load(tmp_path / "naive.safetensors")
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict_distribution(Xq).var, est.predict_distribution(Xq).var)
    assert back.center_ == 2.5
    with pytest.raises(ValueError, match="holds a NaiveRegressor"):
        DeterministicRegressor.load(tmp_path / "naive.safetensors")
    with pytest.raises(ValueError, match="strategy must be one of"):
        NaiveRegressor(strategy="median").fit(X, y)
    with pytest.raises(ValueError, match="constant must be a finite number"):
        NaiveRegressor(constant=np.nan).fit(X, y)


# ---------------------------------------------------------------- CRPS on every baseline
def test_crps_works_on_every_predictive(data):
    """CRPS via dubito.metrics: closed form for the Normals (checked against the formula of
    Gneiting & Raftery 2007 eq. 5), mixtures for MC dropout and the MDN; all finite and > 0."""
    X, y, Xq = data
    yq = 5.0 + Xq @ [1.0, -2.0, 0.5]
    for est in (
        NaiveRegressor(),
        DeterministicRegressor(**FAST),
        MCDropoutRegressor(n_samples=20, **FAST),
        MixtureDensityRegressor(n_components=3, **FAST),
    ):
        d = est.fit(X, y).predict_distribution(Xq)
        c = crps(d, yq)
        assert c.shape == (20,) and np.all(np.isfinite(c)) and np.all(c > 0), type(est).__name__
        if isinstance(d, Normal):
            z = (yq - d.mean) / d.std
            closed = d.std * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
            np.testing.assert_allclose(c, closed, rtol=1e-10)


# ---------------------------------------------------------------- shared validation
ESTIMATORS = [
    lambda: NaiveRegressor(),
    lambda: DeterministicRegressor(hidden=(4,), epochs=1, batch_size=8, progress=False, random_state=0),
    lambda: MCDropoutRegressor(hidden=(4,), epochs=1, batch_size=8, n_samples=3, progress=False, random_state=0),
    lambda: MixtureDensityRegressor(hidden=(4,), n_components=2, epochs=1, batch_size=8, progress=False, random_state=0),
]
NAMES = ["naive", "deterministic", "mc-dropout", "mdn"]


def _with(a, idx, value):
    a = a.copy()
    a[idx] = value
    return a


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    return X, X @ [1.0, -2.0, 0.5] + rng.normal(size=30)


BAD_FIT = [
    (lambda X, y: (_with(X, (3, 1), np.nan), y), ValueError, "Input X contains NaN"),
    (lambda X, y: (_with(X, (0, 0), np.inf), y), ValueError, "Input X contains infinity"),
    (lambda X, y: (X, _with(y, 5, np.nan)), ValueError, "Input y contains NaN"),
    (lambda X, y: (X, y[:-1]), ValueError, "inconsistent numbers of samples: \\[30, 29\\]"),
    (lambda X, y: (X[:, 0], y), ValueError, "X must be 2-D .* got a 1-D array of shape \\(30,\\)"),
    (lambda X, y: (X[:1], y[:1]), ValueError, "1 sample\\(s\\) .* minimum of 2 is required"),
    (lambda X, y: (X[:, :0], y), ValueError, "0 feature\\(s\\)"),
    (lambda X, y: (X, np.full_like(y, 3.5)), ValueError, "y is constant \\(every value is 3.5\\)"),
    (lambda X, y: (X.astype(str), y), ValueError, "X holds strings"),
    (lambda X, y: (_with(X.astype(object), (0, 0), {"a": 1}), y), DataTypeError, "non-numeric entries"),
    (lambda X, y: (X, None), ValueError, "requires y to be passed"),
    (lambda X, y: (X + 1j, y), ValueError, "Complex data not supported"),
]


@pytest.mark.parametrize("make_est", ESTIMATORS, ids=NAMES)
@pytest.mark.parametrize("make, exc, match", BAD_FIT,
                         ids=["nan-X", "inf-X", "nan-y", "lengths", "1d-X", "one-row", "no-features",
                              "constant-y", "str-X", "object-dict", "y-None", "complex"])
def test_bad_fit_inputs(Xy, make_est, make, exc, match):
    X, y = make(*Xy)
    with pytest.raises(exc, match=match):
        make_est().fit(X, y)


@pytest.mark.parametrize("make_est", ESTIMATORS, ids=NAMES)
def test_bad_predict_inputs_and_unfitted(Xy, make_est):
    est = make_est()
    name = type(est).__name__
    for call in (est.predict, est.predict_distribution):
        with pytest.raises(NotFittedError, match=f"{name} instance is not fitted yet"):
            call(Xy[0])
    est.fit(*Xy)
    for X, match in [
        (np.zeros((4, 2)), f"X has 2 features, but {name} is expecting 3 features"),
        (np.zeros(3), "X must be 2-D .* got a 1-D array of shape \\(3,\\)"),
        (_with(np.zeros((4, 3)), (1, 1), np.nan), "Input X contains NaN"),
        (np.zeros((0, 3)), "0 sample\\(s\\)"),
        (np.array([["a", "b", "c"]]), "X holds strings"),
    ]:
        for call in (est.predict, est.predict_distribution):
            with pytest.raises(ValueError, match=match):
                call(X)
    # tensors and lists are accepted
    p1 = est.predict(Xy[0].tolist())
    np.testing.assert_allclose(p1, est.predict(torch.as_tensor(Xy[0])))


def test_save_before_fit_raises(tmp_path):
    for make in ESTIMATORS:
        with pytest.raises(NotFittedError):
            make().save(tmp_path / "x.safetensors")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda(Xy):
    with pytest.raises(ValueError, match="CUDA is not available"):
        DeterministicRegressor(**{**FAST, "device": "cuda"}).fit(*Xy)
