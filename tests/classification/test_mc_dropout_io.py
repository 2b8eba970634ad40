"""Persistence of MCDropoutClassifier and DeepEnsembleClassifier (safetensors + JSON, no pickle).

Oracle: the saved model itself. A loaded model must give bit-identical predictive probabilities
(same random_state and device), equal get_params and the same fitted attributes; a corrupted,
foreign or inconsistent file raises ValueError. Tiny nets, 2 epochs, on a 300-row subset of
scikit-learn's 8x8 digits.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from dubito.classification import DeepEnsembleClassifier, MCDropoutClassifier
from dubito.io import save_tensors

SMALL = dict(features=8, hidden=(12, 12), epochs=2, batch_size=64, n_samples=6, image_shape=(1, 8, 8))


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    return X[idx[:300]], y[idx[:300]], X[idx[300:340]]


def _same_fitted(a, b):
    for name in ("x_mean_", "x_scale_", "loss_curve_", "validation_curve_", "rate_history_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("n_features_in_", "n_classes_", "image_shape_", "n_train_", "best_epoch_", "stopped_by_", "predict_seed_",
                 "dropout_rates_"):
        assert getattr(a, name) == getattr(b, name), name
    np.testing.assert_array_equal(a.classes_, b.classes_)


@pytest.mark.parametrize("network", ["mlp", "cnn"])
@pytest.mark.parametrize("dropout", ["none", "bernoulli", "concrete", "multidrop"])
def test_round_trip_predicts_bit_identically(digits, tmp_path, dropout, network):
    X, y, Xq = digits
    est = MCDropoutClassifier(dropout=dropout, network=network, p=0.2, random_state=3, **SMALL).fit(X, y)
    path = tmp_path / "m.safetensors"
    est.save(path)
    back = MCDropoutClassifier.load(path)
    assert back.get_params() == est.get_params()
    _same_fitted(est, back)
    for rs in (None, 7):
        a = est.predict_distribution(Xq, random_state=rs)
        b = back.predict_distribution(Xq, random_state=rs)
        np.testing.assert_array_equal(a.probs, b.probs)
        np.testing.assert_array_equal(est.sample_logits(Xq, random_state=rs), back.sample_logits(Xq, random_state=rs))
    np.testing.assert_array_equal(est.predict(Xq), back.predict(Xq))
    # the state dicts agree entry by entry (BatchNorm buffers, dropout logits included)
    sa, sb = est.net_.state_dict(), back.net_.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    meta = header["__metadata__"]
    assert meta["dubito_class"] == "MCDropoutClassifier"
    assert json.loads(meta["settings"])["params"]["dropout"] == dropout


def test_load_leaves_the_global_rng_alone_and_takes_a_device(digits, tmp_path):
    X, y, _ = digits
    est = MCDropoutClassifier(dropout="concrete", random_state=1, **SMALL).fit(X, y)
    est.save(tmp_path / "m.safetensors")
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    back = MCDropoutClassifier.load(tmp_path / "m.safetensors", device="cpu")
    assert torch.equal(torch.rand(3), before)
    assert back.device == "cpu" and next(back.net_.parameters()).device.type == "cpu"


def test_corrupted_foreign_and_unfitted_files_raise(digits, tmp_path):
    X, y, _ = digits
    est = MCDropoutClassifier(dropout="bernoulli", random_state=0, **SMALL).fit(X, y)
    path = tmp_path / "m.safetensors"
    with pytest.raises(ValueError, match="not fitted"):
        MCDropoutClassifier(**SMALL).save(path)
    est.save(path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        MCDropoutClassifier.load(path)
    path.write_bytes(b"\x80\x04 pickled? no" * 20)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        MCDropoutClassifier.load(path)
    # a dubito file of another class
    save_tensors(path, {"x": torch.zeros(2)}, "DeterministicRegressor", {})
    with pytest.raises(ValueError, match="holds a DeterministicRegressor"):
        MCDropoutClassifier.load(path)
    # the right class but missing tensors / settings
    est.save(path)
    tensors, settings = est._state()
    del tensors["x_mean"]
    save_tensors(path, tensors, "MCDropoutClassifier", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        MCDropoutClassifier.load(path)
    tensors, settings = est._state()
    tensors["net.head.weight"] = torch.zeros(3, 3)  # a weight of the wrong shape or name
    save_tensors(path, tensors, "MCDropoutClassifier", settings)
    with pytest.raises(ValueError, match="inconsistent contents"):
        MCDropoutClassifier.load(path)
    tensors, settings = est._state()
    settings["fitted"]["n_features_in"] = 10
    save_tensors(path, tensors, "MCDropoutClassifier", settings)
    with pytest.raises(ValueError, match="inconsistent"):
        MCDropoutClassifier.load(path)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.body(x))


@pytest.mark.parametrize("insert", [False, True])
def test_user_network_needs_the_architecture_at_load(digits, tmp_path, insert):
    X, y, Xq = digits
    torch.manual_seed(0)
    module = _Net()
    original = {k: v.clone() for k, v in module.state_dict().items()}
    kw = dict(dropout="concrete", insert_dropout=True) if insert else dict(dropout="bernoulli")
    est = MCDropoutClassifier(network=module, epochs=2, n_samples=5, random_state=2, **kw).fit(X, y)
    path = tmp_path / "user.safetensors"
    est.save(path)
    settings = json.loads(json.loads(
        path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")])["__metadata__"]["settings"])
    assert settings["params"]["network"] is None and settings["fitted"]["user_network"] == "_Net"
    with pytest.raises(ValueError, match=r"user network \(_Net\).*network="):
        MCDropoutClassifier.load(path)
    back = MCDropoutClassifier.load(path, network=module)
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict_distribution(Xq).probs, est.predict_distribution(Xq).probs)
    # the module passed in is not changed (its copy gets the weights)
    assert all(torch.equal(v, original[k]) for k, v in module.state_dict().items())
    # a callable returning the architecture works as well
    back2 = MCDropoutClassifier.load(path, network=_Net)
    np.testing.assert_array_equal(back2.predict_distribution(Xq).probs, est.predict_distribution(Xq).probs)
    # a built-in network's file refuses a network argument
    MCDropoutClassifier(dropout="none", random_state=0, **SMALL).fit(X, y).save(tmp_path / "b.safetensors")
    with pytest.raises(ValueError, match="built-in"):
        MCDropoutClassifier.load(tmp_path / "b.safetensors", network=module)


def test_ensemble_round_trip(digits, tmp_path):
    X, y, Xq = digits
    ens = DeepEnsembleClassifier(MCDropoutClassifier(dropout="multidrop", **SMALL), n_members=2,
                                 random_state=4).fit(X, y)
    path = tmp_path / "ens.safetensors"
    ens.save(path)
    back = DeepEnsembleClassifier.load(path)
    assert back.n_members == 2 and back.random_state == 4
    assert back.estimator.get_params() == ens.estimator.get_params()
    assert len(back.members_) == 2
    for a, b in zip(ens.members_, back.members_):
        assert a.get_params() == b.get_params()
        _same_fitted(a, b)
    for rs in (None, 5):
        np.testing.assert_array_equal(back.predict_distribution(Xq, random_state=rs).probs,
                                      ens.predict_distribution(Xq, random_state=rs).probs)
    np.testing.assert_array_equal(back.classes_, ens.classes_)
    assert back.n_features_in_ == ens.n_features_in_
    with pytest.raises(ValueError, match="holds a DeepEnsembleClassifier"):
        MCDropoutClassifier.load(path)
    raw = path.read_bytes()
    path.write_bytes(raw[:100])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        DeepEnsembleClassifier.load(path)
    # the default estimator (None) round-trips too
    ens0 = DeepEnsembleClassifier(n_members=1, random_state=0)
    ens0.set_params(estimator=None)
    ens0.members_ = [ens.members_[0]]
    ens0.classes_, ens0.n_features_in_ = ens.classes_, ens.n_features_in_
    ens0.save(path)
    back0 = DeepEnsembleClassifier.load(path)
    assert back0.estimator is None
    np.testing.assert_array_equal(back0.predict_proba(Xq), ens0.predict_proba(Xq))


def test_ensemble_of_other_members_cannot_be_saved(digits, tmp_path):
    class Other(MCDropoutClassifier):
        pass

    X, y, _ = digits
    ens = DeepEnsembleClassifier(Other(dropout="none", **SMALL), n_members=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="MCDropoutClassifier members only"):
        ens.save(tmp_path / "x.safetensors")


def test_both_derive_from_the_one_base_and_use_its_persistence(digits, tmp_path):
    """Issue 19: MCDropoutClassifier and DeepEnsembleClassifier are `DubitoClassifier`s; save / load
    are the base's (through _state / _from_state), and predict is the base's argmax of predict_proba."""
    from dubito._estimator import DubitoClassifier, DubitoEstimator

    X, y, Xq = digits
    est = MCDropoutClassifier(dropout="bernoulli", random_state=5, **SMALL).fit(X, y)
    ens = DeepEnsembleClassifier(MCDropoutClassifier(dropout="concrete", **SMALL), n_members=2, random_state=1).fit(X, y)
    for model in (est, ens):
        cls = type(model)
        assert isinstance(model, DubitoClassifier)
        assert cls.save is DubitoEstimator.save and cls.load.__func__ is DubitoEstimator.load.__func__
        assert cls.predict is DubitoClassifier.predict
        path = tmp_path / f"{cls.__name__}.safetensors"
        model.save(path)
        back = cls.load(path)
        assert isinstance(back, DubitoClassifier)
        np.testing.assert_array_equal(back.predict_proba(Xq), model.predict_proba(Xq))
        np.testing.assert_array_equal(back.predict(Xq), model.predict(Xq))
        np.testing.assert_array_equal(model.predict(Xq), model.classes_[model.predict_proba(Xq).argmax(axis=1)])


def test_progress_bar_changes_nothing(digits, capsys):
    """The shared epoch loop's progress bar (stderr) leaves the fit as it was."""
    X, y, Xq = digits
    kw = dict(dropout="concrete", random_state=2, **{**SMALL, "epochs": 3})
    quiet = MCDropoutClassifier(**kw).fit(X, y)
    shown = MCDropoutClassifier(progress=True, **kw).fit(X, y)
    np.testing.assert_array_equal(quiet.loss_curve_, shown.loss_curve_)
    np.testing.assert_array_equal(quiet.validation_curve_, shown.validation_curve_)
    np.testing.assert_array_equal(quiet.predict_proba(Xq), shown.predict_proba(Xq))
    assert capsys.readouterr().out == ""
