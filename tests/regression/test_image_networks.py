"""network="cnn" (PilotNet on flattened images) for the MLP baselines: Deterministic, MC dropout, MDN.

Task: 16x16 grey images of a line through the centre at angle y * 60 degrees, y ~ U(-1, 1),
plus pixel noise (sd 0.05); 300 training and 200 test images, 10 epochs (MDN: 30). The naive
predictor N(mean(y), var(y)) of the training y has a test MSE of about Var(y) = 1/3 and a
test NLL of 0.85 nats. Tolerances (fixed seeds; margins from random_state 0-9):

* Deterministic and MC dropout: test MSE < 0.1 x naive (R^2 > 0.9); measured <= 0.05 x naive
  over seeds 0-9 (0.004 and 0.02 at seed 0).
* MDN, which fits by NLL and whose mixture mean is noisier on 300 images: test NLL at least
  0.5 nats below the naive one and test MSE < 0.5 x naive; measured NLL <= 0.08 nats and MSE
  <= 0.33 x naive over seeds 0-9 (-2.2 nats and 0.001 x naive at seed 0).
"""

import json

import numpy as np
import pytest
import torch
from scipy import stats

import dubito.regression.deterministic as det_module
from dubito.nn import MLP, PilotNet
from dubito.metrics import nll
from dubito.nn.pilotnet import activation_width
from dubito.regression import DeterministicRegressor, MCDropoutRegressor, MixtureDensityRegressor


def bars(n: int, seed: int, size: int = 16):
    """(n, size*size) images of a Gaussian-profile line at angle y * 60 deg from vertical; y (n,)."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(-1, 1, n)
    r = np.arange(size) - (size - 1) / 2
    rows, cols = np.meshgrid(r, r, indexing="ij")
    theta = y[:, None, None] * np.pi / 3
    dist = cols * np.cos(theta) - rows * np.sin(theta)  # distance to the line through the centre
    img = np.exp(-0.5 * (dist / 0.8) ** 2) + 0.05 * rng.normal(size=(n, size, size))
    return img.reshape(n, -1), y


CNN = dict(network="cnn", image_shape=(16, 16), lr=1e-3, epochs=10, batch_size=32, progress=False, random_state=0)
MODELS = {
    "deterministic": (DeterministicRegressor, {}),
    "mc_dropout": (MCDropoutRegressor, dict(dropout=0.05, n_samples=20)),
    "mdn": (MixtureDensityRegressor, dict(n_components=5, epochs=30)),
}


@pytest.fixture(scope="module")
def data():
    X, y = bars(300, seed=0)
    Xq, yq = bars(200, seed=1)
    return X, y, Xq, yq


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return {name: cls(**{**CNN, **kw}).fit(X, y) for name, (cls, kw) in MODELS.items()}


# ---------------------------------------------------------------- learning
@pytest.mark.parametrize("name", list(MODELS))
def test_each_baseline_learns_the_bar_angle(fitted, data, name):
    X, y, Xq, yq = data
    est = fitted[name]
    net = est.net_.body if name == "mdn" else est.net_
    assert isinstance(net, PilotNet) and net.image_shape == (1, 16, 16)
    naive_mse = np.mean((yq - y.mean()) ** 2)
    naive_nll = np.mean(-stats.norm.logpdf(yq, y.mean(), y.std()))
    mse = np.mean((est.predict(Xq) - yq) ** 2)
    d = est.predict_distribution(Xq)
    assert len(d) == 200 and np.all(np.isfinite(d.mean)) and np.all(d.var > 0)
    if name == "mdn":
        assert mse < 0.5 * naive_mse, (mse, naive_mse)
        assert np.mean(nll(d, yq)) < naive_nll - 0.5, (np.mean(nll(d, yq)), naive_nll)
    else:
        assert mse < 0.1 * naive_mse, (name, mse, naive_mse)


# ---------------------------------------------------------------- input scaling
def test_scalar_input_standardisation(fitted, data):
    """x_mean_, x_scale_ hold ONE mean and sd over all pixels of the training images (ddof 0): the
    rows trained on, i.e. without the held-out share of validated fitting (`dubito.early_stopping`)."""
    from dubito._estimator import seeds_from
    from dubito.early_stopping import holdout_split

    X, _, Xq, _ = data
    est = fitted["deterministic"]
    X = X[holdout_split(len(X), est.validation_fraction, seeds_from(est.random_state, 5)[4])[0]]
    assert est.x_mean_.shape == est.x_scale_.shape == (256,)
    np.testing.assert_array_equal(est.x_mean_, np.full(256, X.mean()))
    np.testing.assert_array_equal(est.x_scale_, np.full(256, X.std()))
    np.testing.assert_allclose(est._standardise(Xq), (Xq - X.mean()) / X.std(), rtol=1e-14, atol=1e-14)
    # constant images: centre only (sd := 1), as a constant column is in the tabular path
    const = DeterministicRegressor(**{**CNN, "epochs": 1, "image_shape": (2, 2), "validation_fraction": 0.0})
    const.fit(np.full((10, 4), 0.5), np.arange(10.0))
    np.testing.assert_array_equal(const.x_scale_, np.ones(4))
    np.testing.assert_array_equal(const.x_mean_, np.full(4, 0.5))
    # the tabular path keeps per-column scaling
    mlp = DeterministicRegressor(epochs=1, hidden=(4,), progress=False, random_state=0).fit(X[:, :5] * [1, 2, 3, 4, 5],
                                                                                          X[:, 0])
    assert len(np.unique(mlp.x_scale_)) == 5


# ---------------------------------------------------------------- persistence
@pytest.mark.parametrize("name", list(MODELS))
def test_save_load_round_trip(fitted, data, name, tmp_path):
    _, _, Xq, _ = data
    est = fitted[name]
    path = tmp_path / f"{name}.safetensors"
    est.save(path)
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    params = json.loads(header["__metadata__"]["settings"])["params"]
    assert params["network"] == "cnn" and params["image_shape"] == [16, 16]  # JSON keeps a list
    back = type(est).load(path)
    assert back.get_params() == est.get_params()
    assert back.image_shape == (16, 16) and back.network == "cnn"
    np.testing.assert_array_equal(back.predict(Xq), est.predict(Xq))
    a, b = est.predict_distribution(Xq), back.predict_distribution(Xq)
    np.testing.assert_array_equal(a.mean, b.mean)
    np.testing.assert_array_equal(a.var, b.var)


def test_three_axis_image_shape_gives_the_same_model(fitted, data):
    X, y, Xq, _ = data
    three = DeterministicRegressor(**{**CNN, "image_shape": (1, 16, 16)}).fit(X, y)
    np.testing.assert_array_equal(three.predict(Xq), fitted["deterministic"].predict(Xq))


# ---------------------------------------------------------------- MC dropout with conv masks
def test_mc_dropout_batched_passes_equal_a_loop_over_masks(fitted, data):
    _, _, Xq, _ = data
    est = fitted["mc_dropout"]
    masks = est.sample_masks()
    assert [tuple(m.shape[1:]) for m in masks[:5]] == [(24, 6, 6), (36, 1, 1), (48, 1, 1), (64, 1, 1), (64, 1, 1)]
    batched = est.predict_draws(Xq[:15], masks=masks)
    loop = np.stack([est.predict_draws(Xq[:15], masks=[m[t : t + 1] for m in masks])[0] for t in range(20)])
    assert batched.shape == (20, 15)
    np.testing.assert_array_equal(batched, loop)
    assert np.all(batched.std(axis=0) > 0)  # the conv and dense masks make the passes differ


# ---------------------------------------------------------------- chunks and the network factory
def test_chunk_width_counts_the_conv_layers_and_chunking_keeps_predictions(fitted, data, monkeypatch):
    _, _, Xq, _ = data
    est = fitted["deterministic"]
    assert est._row_width(256) == activation_width((1, 16, 16)) == 900  # conv 3's unfolded input
    big = DeterministicRegressor(network="cnn", image_shape=(1, 64, 64))
    assert big._row_width(4096) == 24 * 25 * 13 * 13  # conv 2's unfolded input, not the 4096 pixels
    assert DeterministicRegressor(hidden=(7, 3))._row_width(5) == 7  # tabular: unchanged
    whole = est.predict(Xq)
    monkeypatch.setattr(det_module, "_CHUNK_ELEMENTS", 3 * 900)  # 3 rows per chunk
    assert [c.shape[0] for c in est._chunks(est._standardise(Xq[:7]))] == [3, 3, 1]
    np.testing.assert_allclose(est.predict(Xq), whole, rtol=1e-12, atol=1e-12)


def test_make_net_reads_hidden_from_the_argument_or_settings_hidden():
    class WithFeatureLayer(DeterministicRegressor):  # as the IC-NLM adds its n_features layer
        def _settings_hidden(self):
            return (*super()._settings_hidden(), 7)

    est = WithFeatureLayer(hidden=(20,), network="cnn", image_shape=(12, 12))
    s = est._settings()
    net = est._make_net(s, 144, 1, 0.0, torch.Generator().manual_seed(0), torch.float64)
    assert isinstance(net, PilotNet) and net.hidden == (20, 7)
    assert net.features(torch.zeros(3, 144, dtype=torch.float64)).shape == (3, 7)
    assert est._make_net(s, 144, 4, 0.2, hidden=(5,)).hidden == (5,)
    mlp = DeterministicRegressor(hidden=(6,))
    m = mlp._make_net(mlp._settings(), 9, 2, 0.1)
    assert isinstance(m, MLP) and (m.n_features, m.hidden, m.out_features, m.dropout) == (9, (6,), 2, 0.1)


def test_mlp_ignores_image_shape(data):
    X, y, Xq, _ = data
    kw = dict(hidden=(8,), epochs=2, progress=False, random_state=0)
    a = DeterministicRegressor(**kw).fit(X[:, :4], y).predict(Xq[:, :4])
    b = DeterministicRegressor(image_shape=(2, 2), **kw).fit(X[:, :4], y).predict(Xq[:, :4])
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("cls", [DeterministicRegressor, MCDropoutRegressor, MixtureDensityRegressor])
def test_bad_network_settings(cls, data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="network='cnn' needs image_shape=\\(C, H, W\\)"):
        cls(network="cnn", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="image_shape \\(1, 8, 8\\) has C\\*H\\*W = 64 values but X has 256 columns"):
        cls(network="cnn", image_shape=(8, 8), progress=False).fit(X, y)
    with pytest.raises(ValueError, match="network must be one of \\['cnn', 'mlp'\\], got 'rnn'"):
        cls(network="rnn", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="image_shape must be \\(C, H, W\\) or \\(H, W\\) of positive ints"):
        cls(network="cnn", image_shape=(16, -16), progress=False).fit(X, y)
    with pytest.raises(ValueError, match="image_shape must be \\(C, H, W\\) or \\(H, W\\) of positive ints"):
        cls(image_shape="16x16", progress=False).fit(X, y)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("name", list(MODELS))
def test_cuda_fits_and_predicts_on_the_device(data, name):
    X, y, Xq, yq = data
    cls, kw = MODELS[name]
    est = cls(**{**CNN, **kw, "device": "cuda"}).fit(X, y)
    assert next(est.net_.parameters()).device.type == "cuda"
    assert np.mean((est.predict(Xq) - yq) ** 2) < 0.5 * np.mean((yq - y.mean()) ** 2)
