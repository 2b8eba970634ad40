"""dubito.nn.feature_layer: the features of a user's network for the post-hoc ``wrap`` estimators.

Oracle: a hand-written forward of a small MLP (the same weights, float64) to 1e-12 (``x @ W.T + b`` and
nn.Linear's fused addmm may round differently); hook against hook exactly. Fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dubito.nn.feature_layer import (
    features_and_targets,
    find_feature_layer,
    input_batches,
    layer_features,
    loader_arrays,
)


def _mlp(dtype=torch.float64):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 5), nn.Tanh(), nn.Linear(5, 1)).to(dtype)


def _by_hand(model, X):
    """The last hidden layer, tanh(W2 relu(W1 x + b1) + b2), written out."""
    x = torch.as_tensor(X, dtype=torch.float64)
    w1, b1, w2, b2 = model[0].weight, model[0].bias, model[2].weight, model[2].bias
    with torch.no_grad():
        return torch.tanh(torch.relu(x @ w1.T + b1) @ w2.T + b2)


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(37, 3))


def test_default_layer_is_the_input_of_the_last_linear(X):
    model = _mlp()
    name, module, where = find_feature_layer(model)
    assert (name, where) == ("4", "input") and module is model[4]
    psi = layer_features(model, None, X, batch_size=5)  # several batches, one partial
    assert psi.dtype == torch.float64 and psi.device.type == "cpu" and psi.shape == (37, 5)
    np.testing.assert_allclose(psi.numpy(), _by_hand(model, X).numpy(), rtol=0, atol=1e-12)


def test_a_name_or_a_module_gives_its_output(X):
    model = _mlp()
    assert find_feature_layer(model, "3")[1:] == (model[3], "output")
    assert find_feature_layer(model, model[3])[0] == "3"
    by_name = layer_features(model, "3", X)
    by_module = layer_features(model, model[3], X)
    np.testing.assert_array_equal(by_name.numpy(), by_module.numpy())
    np.testing.assert_allclose(by_name.numpy(), _by_hand(model, X).numpy(), rtol=0, atol=1e-12)
    with torch.no_grad():  # the output of the first ReLU
        np.testing.assert_array_equal(layer_features(model, "1", X).numpy(), model[:2](torch.as_tensor(X)).numpy())


def test_nested_names_and_the_model_mode_is_restored(X):
    torch.manual_seed(1)
    model = nn.Sequential()
    model.add_module("body", nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Dropout(0.5)))
    model.add_module("head", nn.Linear(6, 2))
    model.double().train()
    assert find_feature_layer(model)[0] == "head"
    psi = layer_features(model, None, X)
    with torch.no_grad():  # eval mode: dropout off
        ref = torch.relu(model.body[0](torch.as_tensor(X)))
    np.testing.assert_allclose(psi.numpy(), ref.numpy(), rtol=0, atol=1e-12)
    assert all(m.training for m in model.modules())  # restored, module by module
    model.body.eval()
    layer_features(model, "body.1", X)
    assert model.training and not model.body.training and not model.body[2].training


def test_numpy_tensor_and_dataloader_give_identical_features(X):
    model = _mlp(torch.float32)
    ref = layer_features(model, None, X)  # float64 numpy -> the model's float32
    xt = torch.as_tensor(X)  # a float64 tensor is cast the same way
    np.testing.assert_array_equal(layer_features(model, None, xt).numpy(), ref.numpy())
    np.testing.assert_array_equal(layer_features(model, None, xt.float()).numpy(), ref.numpy())
    y = torch.arange(37.0)
    for rows, loader in ((37, DataLoader(TensorDataset(xt), batch_size=37)),
                         (10, DataLoader(TensorDataset(xt), batch_size=10)),
                         (4, DataLoader(TensorDataset(xt, y), batch_size=4))):
        # the same batches (float32 BLAS results may differ by the batch shape, ~1e-7 here)
        np.testing.assert_array_equal(layer_features(model, None, loader).numpy(),
                                      layer_features(model, None, X, batch_size=rows).numpy())
    np.testing.assert_allclose(layer_features(model, None, X, batch_size=4).numpy(), ref.numpy(), rtol=0, atol=1e-6)
    # a shuffling loader keeps its (x, y) pairs in features_and_targets ...
    shuffled = DataLoader(TensorDataset(xt, y), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    psi, targets = features_and_targets(model, None, shuffled)
    order = targets.astype(int)
    assert sorted(order.tolist()) != order.tolist()  # it did shuffle
    np.testing.assert_allclose(psi.numpy(), ref.numpy()[order], rtol=0, atol=1e-6)
    # ... and is refused where the rows must match the caller's
    with pytest.raises(ValueError, match="shuffle=False"):
        layer_features(model, None, shuffled)
    psi, targets = features_and_targets(model, "3", X, y)
    np.testing.assert_array_equal(targets, np.arange(37.0))
    assert len(list(input_batches(model, X, batch_size=10))) == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_model_and_cuda_inputs(X):
    model = _mlp().cuda()
    psi = layer_features(model, None, torch.as_tensor(X).cuda())
    assert psi.device.type == "cpu"
    np.testing.assert_allclose(psi.numpy(), _by_hand(model.cpu(), X).numpy(), rtol=1e-12, atol=1e-12)


def test_loader_arrays():
    X = np.arange(20.0).reshape(10, 2)
    y = np.arange(10)
    a, b = loader_arrays(DataLoader(TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=3))
    np.testing.assert_array_equal(a, X)
    np.testing.assert_array_equal(b, y)
    a, b = loader_arrays(DataLoader(TensorDataset(torch.as_tensor(X)), batch_size=4))
    np.testing.assert_array_equal(a, X)
    assert b is None
    a, b = loader_arrays(torch.as_tensor(X, dtype=torch.float32).requires_grad_(), torch.as_tensor(y))
    np.testing.assert_array_equal(a, X)
    assert a.dtype == np.float32 and b.dtype == np.int64
    a, b = loader_arrays(X, y)
    assert a is not None and b.shape == (10,)
    with pytest.raises(ValueError, match="same number of rows"):
        loader_arrays(X, y[:9])
    with pytest.raises(ValueError, match="do not pass y as well"):
        loader_arrays(DataLoader(TensorDataset(torch.as_tensor(X)), batch_size=4), y)
    with pytest.raises(ValueError, match="numpy array, a torch tensor or a DataLoader"):
        loader_arrays("data.csv")
    with pytest.raises(ValueError, match="numpy array, a torch tensor or a DataLoader"):
        loader_arrays({"x": X})


def test_errors(X):
    model = _mlp()
    with pytest.raises(ValueError, match=r"layer 'fc2' is not a submodule of the model; available names: 0, 1, 2, 3, 4"):
        find_feature_layer(model, "fc2")
    with pytest.raises(ValueError, match="not a submodule"):
        find_feature_layer(model, nn.Linear(8, 5))
    with pytest.raises(ValueError, match="the model itself"):
        find_feature_layer(model, model)
    with pytest.raises(ValueError, match="no nn.Linear"):
        find_feature_layer(nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten()))
    with pytest.raises(ValueError, match="layer must be None"):
        find_feature_layer(model, 3)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        find_feature_layer(lambda x: x)
    with pytest.raises(ValueError, match="available names: .*\\(20 more\\)"):  # a few names, not all 32
        find_feature_layer(nn.Sequential(*[nn.Identity() for _ in range(32)]), "x")
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 1))
    with pytest.raises(ValueError, match=r"shape \(4, 2, 2, 2\).*Flatten"):
        layer_features(conv, "1", np.zeros((4, 1, 4, 4), dtype=np.float32))
    shared = nn.Linear(3, 3)
    twice = nn.Sequential(shared, nn.ReLU(), shared, nn.Linear(3, 1))
    with pytest.raises(ValueError, match="seen 2 times"):
        layer_features(twice, "0", np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="no rows"):
        layer_features(model, None, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="got None"):
        layer_features(model, None, None)
    with pytest.raises(ValueError, match="batch_size"):
        layer_features(model, None, X, batch_size=0)
    with pytest.raises(ValueError, match="y has 5 rows but X has 37"):
        features_and_targets(model, None, X, np.zeros(5))
    with pytest.raises(ValueError, match="yields x only"):
        features_and_targets(model, None, DataLoader(TensorDataset(torch.as_tensor(X)), batch_size=8))
