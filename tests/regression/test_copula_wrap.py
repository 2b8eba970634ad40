"""ImplicitCopulaRegressor.wrap on a user's network: the feature layer, dead units, the constant unit,
numpy / tensor / DataLoader inputs, save / load (issue 20, part 2).

Oracles: `from_features` on the same psi, built by hand (identical posterior for the same seed:
predictions equal to 1e-12 relative, as tests/regression/test_copula.py), and the fitted model itself
across inputs and a file round trip (bit-identical). Short VI runs; fixed seeds.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dubito import io
from dubito.regression import ImplicitCopulaRegressor

pytestmark = [pytest.mark.filterwarnings("ignore::dubito.inference.diagnostics.ConvergenceWarning"),
              pytest.mark.filterwarnings("ignore:.*feature units.*are constant:RuntimeWarning")]

FAST = dict(vi_max_iter=600, vi_min_iter=100, n_draws=60, random_state=0, progress=False)


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.exp(X[:, 0] + 0.3 * rng.normal(size=n))


def _relu_model():
    """3 -> 8 ReLU -> 6 ReLU -> 1 (float64); units 1 and 4 of the last hidden layer are dead on every x
    (weights 0, bias -1), and with this seed unit 3 is dead on the training rows of `_data` too."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 1)).double()
    with torch.no_grad():
        for k in (1, 4):
            model[2].weight[k] = 0.0
            model[2].bias[k] = -1.0
    return model


def _hand_psi(model, X):
    with torch.no_grad():
        return model[:4](torch.as_tensor(X, dtype=torch.float64)).numpy()


def _wrap(model, X, y, **kw):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ELBO.*")
        warnings.filterwarnings("ignore", category=UserWarning)
        return ImplicitCopulaRegressor.wrap(model, X=X, y=y, **{**FAST, **kw})


def _wrap_positional(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ImplicitCopulaRegressor.wrap(*args, **{**FAST, "constant_feature": False, **kw})


def test_dead_units_are_dropped_with_a_warning_and_at_prediction():
    X, y = _data()
    model = _relu_model()
    psi = _hand_psi(model, X)
    dead = np.flatnonzero(np.ptp(psi, axis=0) == 0)
    assert dead.tolist() == [1, 3, 4]  # the construction
    with pytest.warns(RuntimeWarning, match=r"3 of 6 feature units .* indices \[1, 3, 4\]\); they are dropped"):
        est = ImplicitCopulaRegressor.wrap(model, None, X, y, constant_feature=False, **FAST)
    assert (est.feature_layer_, est.feature_where_, est.layer_width_) == ("4", "input", 6)
    np.testing.assert_array_equal(est.dead_features_, [1, 3, 4])
    assert est.n_features_ == 3
    kept = [0, 2, 5]
    ref = ImplicitCopulaRegressor.from_features(psi[:, kept], y, **FAST)
    np.testing.assert_array_equal(est.train_features_, ref.train_features_)
    Xn, _ = _data(30, seed=1)
    np.testing.assert_array_equal(est.features(Xn), _hand_psi(model, Xn)[:, kept])
    pa, pb = est.predict_distribution(Xn), ref.predict_distribution(features=_hand_psi(model, Xn)[:, kept])
    np.testing.assert_array_equal(pa.grid, pb.grid)
    np.testing.assert_allclose(pa.density, pb.density, rtol=1e-12, atol=0)
    # the paper's path (from_features) still refuses a constant column
    with pytest.raises(ValueError, match=r"column\(s\) \[1, 3, 4\] are constant"):
        ImplicitCopulaRegressor.from_features(psi, y, **FAST)


def test_the_constant_unit_is_the_rms_feature_norm():
    X, y = _data()
    model = _relu_model()
    est = _wrap(model, X, y, constant_feature=True)
    psi = _hand_psi(model, X)[:, [0, 2, 5]]
    c = np.sqrt(np.mean(np.sum(psi ** 2, axis=1)))
    assert est.constant_feature_ == pytest.approx(c, rel=1e-15) and est.n_features_ == 4
    Xn, _ = _data(30, seed=1)
    expected = np.column_stack([_hand_psi(model, Xn)[:, [0, 2, 5]], np.full(30, c)])
    np.testing.assert_allclose(est.features(Xn), expected, rtol=1e-15, atol=0)
    assert np.all(np.isfinite(est.predict(Xn)))


@pytest.mark.parametrize("intercept", [True, False])
def test_the_constant_unit_by_default_only_without_the_random_intercept(intercept):
    X, y = _data()
    model = _relu_model()
    with pytest.warns(RuntimeWarning, match="dropped"):
        est = ImplicitCopulaRegressor.wrap(model, None, X, y, **{**FAST, "intercept": intercept})
    assert (est.constant_feature_ > 0) is (not intercept)
    assert est.n_features_ == 3 + (not intercept) and est.posterior_.intercept is intercept


def test_a_named_layer_or_module_and_bad_arguments():
    X, y = _data()
    model = _relu_model()
    a = _wrap(model, X, y, constant_feature=False)
    with pytest.warns(RuntimeWarning, match="dropped"):
        b = ImplicitCopulaRegressor.wrap(model, model[3], X, y, constant_feature=False, **FAST)
    assert (b.feature_layer_, b.feature_where_) == ("3", "output")
    np.testing.assert_array_equal(a.train_features_, b.train_features_)  # ReLU output = the head's input
    # the data first, as LastLayerLaplaceRegressor.wrap: the same model
    c = _wrap_positional(model, X, y, model[3])
    assert c.feature_layer_ == "3"
    np.testing.assert_array_equal(c.train_features_, b.train_features_)
    with pytest.raises(ValueError, match=r"pass wrap\(model, X, y\)"):
        ImplicitCopulaRegressor.wrap(model, X, y, y)
    with pytest.raises(ValueError, match="not a submodule"):
        ImplicitCopulaRegressor.wrap(model, "fc", X, y)
    with pytest.raises(ValueError, match="constant_feature must be True or False"):
        ImplicitCopulaRegressor.wrap(model, None, X, y, constant_feature="yes")
    with pytest.raises(ValueError, match="y has 10 rows but X has 150"):
        ImplicitCopulaRegressor.wrap(model, None, X, y[:10])
    dead = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1)).double()
    with torch.no_grad():
        dead[0].weight.zero_()
        dead[0].bias.fill_(-1.0)
    with pytest.raises(ValueError, match="all 2 feature units"):
        ImplicitCopulaRegressor.wrap(dead, None, X, y)


def test_numpy_tensor_and_dataloader_inputs_agree():
    X, y = _data()
    model = _relu_model()
    ref = _wrap(model, X, y)
    xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    loader = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    by_tensor = _wrap(model, xt, yt)
    by_loader = _wrap(model, loader, None)
    np.testing.assert_array_equal(by_tensor.train_features_, ref.train_features_)
    # the shuffled loader sees the same rows in another order
    assert not np.array_equal(by_loader.train_features_, ref.train_features_)
    np.testing.assert_array_equal(by_loader.train_features_[np.lexsort(by_loader.train_features_.T)],
                                  ref.train_features_[np.lexsort(ref.train_features_.T)])
    Xn, _ = _data(40, seed=2)
    expected = ref.predict_distribution(Xn)
    for inputs in (torch.as_tensor(Xn), torch.as_tensor(Xn.T.copy()).T.requires_grad_(),  # strided, with grad
                   DataLoader(TensorDataset(torch.as_tensor(Xn)), batch_size=40)):
        got = ref.predict_distribution(inputs)
        np.testing.assert_array_equal(got.grid, expected.grid)
        np.testing.assert_array_equal(got.density, expected.density)
    np.testing.assert_array_equal(by_tensor.predict(Xn), ref.predict(Xn))
    # the loader's fit differs only by the row order of one VI run: close, not identical
    np.testing.assert_allclose(by_loader.predict(Xn), ref.predict(Xn), rtol=0.05)


def _wrapped_file(tmp_path, **kw):
    X, y = _data()
    model = _relu_model()
    est = _wrap(model, X, y, **kw)
    path = tmp_path / "wrapped.safetensors"
    est.save(path)
    return est, model, path


@pytest.mark.parametrize("constant", [True, False])
def test_save_load_keeps_dropped_units_and_predictions(tmp_path, constant):
    est, model, path = _wrapped_file(tmp_path, constant_feature=constant)
    back = ImplicitCopulaRegressor.load(path, model=model)
    np.testing.assert_array_equal(back.dead_features_, [1, 3, 4])
    assert (back.feature_layer_, back.feature_where_, back.layer_width_) == ("4", "input", 6)
    assert back.constant_feature_ == est.constant_feature_ and back.n_features_ == est.n_features_
    Xn, _ = _data(20, seed=3)
    np.testing.assert_array_equal(back.features(Xn), est.features(Xn))
    pa, pb = est.predict_distribution(Xn), back.predict_distribution(Xn)
    np.testing.assert_array_equal(pa.grid, pb.grid)
    np.testing.assert_array_equal(pa.density, pb.density)
    other = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    with pytest.raises(ValueError, match="last nn.Linear is '2'"):
        ImplicitCopulaRegressor.load(path, model=other)


def test_a_file_of_the_earlier_layout_still_loads(tmp_path):
    """A wrapped file as written before wrap dropped units: fitted holds feature_layer only (the
    layer's output, every unit, no constant unit), no dead_features tensor."""
    X, y = _data()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ImplicitCopulaRegressor.wrap(model, "3", X, y, constant_feature=False, **FAST)
    path = tmp_path / "old.safetensors"
    est.save(path)
    tensors, settings = io.load_tensors(path, "ImplicitCopulaRegressor")
    for key in ("feature_where", "layer_width", "constant_feature"):
        del settings["fitted"][key]
    del tensors["dead_features"]
    io.save_tensors(path, tensors, "ImplicitCopulaRegressor", settings)
    back = ImplicitCopulaRegressor.load(path, model=model)
    assert (back.feature_layer_, back.feature_where_, back.layer_width_, back.constant_feature_) == ("3", "output", 4,
                                                                                                    0.0)
    assert back.dead_features_.size == 0
    Xn, _ = _data(10, seed=4)
    np.testing.assert_array_equal(back.predict_distribution(Xn).density, est.predict_distribution(Xn).density)
    # inconsistent contents are one ValueError naming the file
    settings["fitted"]["layer_width"] = 7
    io.save_tensors(path, tensors, "ImplicitCopulaRegressor", settings)
    with pytest.raises(ValueError, match="old.safetensors"):
        ImplicitCopulaRegressor.load(path, model=model)
