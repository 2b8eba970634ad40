"""Persistence of KFACLaplace (safetensors + JSON, no pickle; issue 19 §1's round trip).

Oracle: the fitted posterior itself. The loaded one must give the same predictive probabilities
bit for bit (same random_state, same device: the Cholesky factors are rebuilt from the saved A and
G by the same code and the weight draws are seeded), the same factors, layers and fitted scalars;
a corrupted, foreign or inconsistent file raises one ValueError. The network passed to ``load`` is
freshly initialised (other weights than the fitted one), so equal predictions also show that the
saved weights were loaded. Data: scikit-learn's 8x8 digits, 300 rows to fit, 40 to query.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from dubito.classification import KFACLaplace, MCDropoutClassifier
from dubito.io import load_tensors, save_tensors


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    idx = np.random.default_rng(0).permutation(len(y))
    return X[idx[:300]], y[idx[:300]], X[idx[300:340]]


def _mlp(seed: int, dtype=torch.float64) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 24), nn.ReLU(), nn.Dropout(0.2), nn.Linear(24, 16), nn.ReLU(),
                         nn.Linear(16, 10)).to(dtype)


@pytest.fixture(scope="module")
def trained(digits):
    X, y, _ = digits
    net = _mlp(0)
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    for _ in range(60):
        opt.zero_grad()
        nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()
    return net.eval()


def _assert_same_posterior(a: KFACLaplace, b: KFACLaplace, Xq) -> None:
    assert b.layers_ == a.layers_
    for name in a.layers_:
        assert torch.equal(a.A_[name], b.A_[name]) and torch.equal(a.G_[name], b.G_[name]), name
        assert torch.equal(a.posterior_precision(name), b.posterior_precision(name)), name
    for name in ("n_fit_", "n_classes_", "scale_", "damping_", "delta_", "predict_seed_", "image_shape_",
                 "n_features_in_", "prior_precision_", "log_likelihood_", "log_marginal_likelihood_"):
        assert getattr(a, name) == getattr(b, name), name
    if a.log_likelihood_ is not None:  # the evidence is rebuilt from the saved factors and weights
        assert b.log_marginal_likelihood() == pytest.approx(a.log_marginal_likelihood(), rel=1e-12)
    np.testing.assert_array_equal(a.classes_, b.classes_)
    for rs in (None, 5):
        pa, pb = a.predict_distribution(Xq, random_state=rs), b.predict_distribution(Xq, random_state=rs)
        np.testing.assert_array_equal(pa.probs, pb.probs)
        np.testing.assert_array_equal(pa.mutual_information, pb.mutual_information)
    np.testing.assert_array_equal(a.map_logits(Xq), b.map_logits(Xq))


@pytest.mark.parametrize("kw", [dict(layers=2), dict(layers="last", scale="n", damping_mode="direct", fisher="exact"),
                                dict(layers=None, mc_dropout=True, fisher="empirical", prior_precision=3.0)])
def test_round_trip_of_a_torch_module_predicts_bit_identically(digits, trained, tmp_path, kw):
    X, y, Xq = digits
    la = KFACLaplace(copy.deepcopy(trained), n_samples=12, random_state=2, **kw).fit(X, y)
    path = tmp_path / "la.safetensors"
    la.save(path)
    fresh = _mlp(99)  # other weights: the file's must replace them
    original = {k: v.clone() for k, v in fresh.state_dict().items()}
    assert not torch.equal(original["0.weight"], trained.state_dict()["0.weight"])
    back = KFACLaplace.load(path, network=fresh)
    assert {k: v for k, v in back.get_params().items() if k != "model"} == \
        {k: v for k, v in la.get_params().items() if k != "model"}
    _assert_same_posterior(la, back, Xq)
    assert all(torch.equal(v, original[k]) for k, v in fresh.state_dict().items())  # the argument is unchanged
    # a callable returning the architecture works as well
    _assert_same_posterior(la, KFACLaplace.load(path, network=lambda: _mlp(7)), Xq)


def test_round_trip_of_an_mc_dropout_classifier_needs_no_network(digits, tmp_path):
    X, y, Xq = digits
    est = MCDropoutClassifier(dropout="concrete", network="cnn", image_shape=(1, 8, 8), features=8, hidden=(12, 12),
                              epochs=2, batch_size=64, n_samples=4, validation_fraction=0.0, random_state=1).fit(X, y)
    la = KFACLaplace(est, layers=2, mc_dropout=True, n_samples=6, random_state=0).fit(X, y)
    path = tmp_path / "la_cdp.safetensors"
    la.save(path)
    back = KFACLaplace.load(path)
    assert isinstance(back.model, MCDropoutClassifier) and back.model.get_params() == est.get_params()
    np.testing.assert_array_equal(back.model.x_mean_, est.x_mean_)
    _assert_same_posterior(la, back, Xq)
    with pytest.raises(ValueError, match="built-in"):
        KFACLaplace.load(path, network=_mlp(0))


def test_float32_module_round_trip_and_dtype_mismatch(digits, trained, tmp_path):
    X, y, Xq = digits
    net32 = copy.deepcopy(trained).float()
    la = KFACLaplace(net32, layers=2, n_samples=8, random_state=4).fit(X, y)
    path = tmp_path / "la32.safetensors"
    la.save(path)
    _assert_same_posterior(la, KFACLaplace.load(path, network=_mlp(3, torch.float32)), Xq)
    with pytest.raises(ValueError, match="dtype it was fitted in"):
        KFACLaplace.load(path, network=_mlp(3, torch.float64))


def test_corrupted_foreign_and_inconsistent_files_raise(digits, trained, tmp_path):
    X, y, _ = digits
    path = tmp_path / "la.safetensors"
    with pytest.raises(ValueError, match="not fitted"):
        KFACLaplace(trained).save(path)
    la = KFACLaplace(copy.deepcopy(trained), layers=2, n_samples=4, random_state=0).fit(X, y)
    la.save(path)
    raw = path.read_bytes()
    tensors, settings = load_tensors(path, "KFACLaplace")
    tensors = {k: v.clone() for k, v in tensors.items()}  # not views of the file, which is rewritten below
    with pytest.raises(ValueError, match=r"torch module \(Sequential\).*network="):
        KFACLaplace.load(path)
    with pytest.raises(ValueError, match="inconsistent contents"):  # another architecture
        KFACLaplace.load(path, network=nn.Sequential(nn.Linear(64, 10)).double())
    with pytest.raises(ValueError, match="nn.Module or a callable"):
        KFACLaplace.load(path, network="mlp")
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        KFACLaplace.load(path, network=_mlp(0))
    path.write_bytes(b"\x80\x04 pickled? no" * 20)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        KFACLaplace.load(path, network=_mlp(0))
    save_tensors(path, {"x": torch.zeros(2)}, "MCDropoutClassifier", {})
    with pytest.raises(ValueError, match="holds a MCDropoutClassifier"):
        KFACLaplace.load(path, network=_mlp(0))
    bad = dict(tensors, **{"A.0": torch.eye(5, dtype=torch.float64)})  # a factor of the wrong shape
    save_tensors(path, bad, "KFACLaplace", settings)
    with pytest.raises(ValueError, match="inconsistent tensor shapes"):
        KFACLaplace.load(path, network=_mlp(0))
    missing = {k: v for k, v in tensors.items() if k != "G.1"}
    save_tensors(path, missing, "KFACLaplace", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        KFACLaplace.load(path, network=_mlp(0))
    renamed = copy.deepcopy(settings)
    renamed["fitted"]["layers"][0] = "1"  # a ReLU, not an nn.Linear
    save_tensors(path, tensors, "KFACLaplace", renamed)
    with pytest.raises(ValueError, match="not an nn.Linear"):
        KFACLaplace.load(path, network=_mlp(0))
    nosettings = copy.deepcopy(settings)
    del nosettings["fitted"]["delta"]
    save_tensors(path, tensors, "KFACLaplace", nosettings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        KFACLaplace.load(path, network=_mlp(0))


def test_kfac_derives_from_the_one_base_and_uses_its_persistence(digits, trained, tmp_path, capsys):
    """Issue 19: KFACLaplace is a `DubitoClassifier`; save / load are the base's (through _state /
    _from_state) and predict is the base's argmax of predict_proba. The progress bar changes nothing."""
    from dubito._estimator import DubitoClassifier, DubitoEstimator

    X, y, Xq = digits
    la = KFACLaplace(copy.deepcopy(trained), layers="last", n_samples=5, random_state=3).fit(X, y)
    assert isinstance(la, DubitoClassifier)
    assert KFACLaplace.save is DubitoEstimator.save and KFACLaplace.predict is DubitoClassifier.predict
    path = tmp_path / "la.safetensors"
    la.save(path)
    back = KFACLaplace.load(path, network=_mlp(4))
    assert isinstance(back, DubitoClassifier)
    np.testing.assert_array_equal(back.predict_proba(Xq), la.predict_proba(Xq))
    np.testing.assert_array_equal(back.predict(Xq), la.classes_[la.predict_proba(Xq).argmax(axis=1)])
    shown = KFACLaplace(copy.deepcopy(trained), layers="last", n_samples=5, random_state=3, progress=True).fit(X, y)
    assert torch.equal(shown.A_[shown.layers_[0]], la.A_[la.layers_[0]])
    assert capsys.readouterr().out == ""
