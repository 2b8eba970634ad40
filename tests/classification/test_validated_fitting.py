"""Validated fitting of the classifiers (issue 19): a stratified held-out share of the training rows,
early stopping on its NLL, the best epoch's weights kept (`dubito.early_stopping`).

Oracles: the held-out rows drawn again from the documented seed; the held-out NLL recomputed in
numpy (float64 log-softmax of the restored network's logits); the stopping rule replayed by a
loop over the recorded curve; a fit on the training rows alone (validation_fraction=0) for the
epochs the validated fit kept, which must give the same network bit for bit (same seeds: the
held-out rows were never trained on, the scaling comes from the training rows, and the best
epoch's weights were restored). Data: scikit-learn's 8x8 digits, 600 rows, tiny networks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from dubito._estimator import seeds_from
from dubito.classification import DeepEnsembleClassifier, MCDropoutClassifier
from dubito.early_stopping import holdout_split

# lr 1e-2 on 600 rows overfits within a few epochs, so the rule (patience 3) stops well before the cap
FAST = dict(features=32, hidden=(32, 32), n_samples=4, lr=1e-2, batch_size=32, epochs=60, patience=3, random_state=3)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    return X[idx[:600]], y[idx[:600]], X[idx[600:700]]


def _held_out_rows(est, y):
    """The rows the classifier held out, drawn again: the third of seeds_from(random_state, 4), stratified."""
    return holdout_split(len(y), est.validation_fraction, seeds_from(est.random_state, 4)[2], classes=y)


def _numpy_nll(est, X, y) -> float:
    """-(1/N) Σ log softmax(f(x))_y of the fitted mean network (eval mode), the log-softmax in numpy."""
    with torch.no_grad():
        logits = est.net_.eval()(est._tensor(X)).double().numpy()
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def _replay_rule(curve, patience, min_delta=1e-6):
    """(best epoch from 1, stopped by the rule?) of 'stop after `patience` epochs without a drop of more
    than min_delta', by a plain loop."""
    best, best_epoch, bad = math.inf, 0, 0
    for epoch, v in enumerate(curve, start=1):
        if v < best - min_delta:
            best, best_epoch, bad = v, epoch, 0
        else:
            bad += 1
        if bad >= patience:
            return best_epoch, epoch == len(curve)
    return best_epoch, False


@pytest.mark.parametrize("dropout", ["bernoulli", "concrete", "multidrop"])
def test_stops_by_the_rule_and_keeps_the_best_epoch(digits, dropout):
    X, y, Xq = digits
    est = MCDropoutClassifier(dropout=dropout, **FAST).fit(X, y)
    curve = est.validation_curve_
    assert est.stopped_by_ == "patience"
    assert len(curve) == len(est.loss_curve_) == est.best_epoch_ + est.patience < est.epochs
    assert est.rate_history_.shape[0] == len(curve) + 1
    assert _replay_rule(curve, est.patience) == (est.best_epoch_, True)
    train, held = _held_out_rows(est, y)
    # stratified: ceil(0.1 n_c) rows of every class c
    counts = np.bincount(y, minlength=10)
    np.testing.assert_array_equal(np.bincount(y[held], minlength=10), np.ceil(0.1 * counts).astype(int))
    assert est.n_train_ == train.size == len(y) - held.size
    # the kept network scores the curve's minimum on the held-out rows (same float32 logits: 1e-12)
    assert _numpy_nll(est, X[held], y[held]) == pytest.approx(curve.min(), rel=1e-12, abs=0)
    # ... and it is the network trained best_epoch_ epochs on the training rows alone
    alone = MCDropoutClassifier(dropout=dropout, **{**FAST, "epochs": est.best_epoch_},
                                validation_fraction=0.0).fit(X[train], y[train])
    np.testing.assert_array_equal(alone.x_mean_, est.x_mean_)
    np.testing.assert_array_equal(alone.sample_logits(Xq), est.sample_logits(Xq))
    np.testing.assert_array_equal(alone.loss_curve_, est.loss_curve_[: est.best_epoch_])


def test_the_cap_and_no_held_out_share(digits):
    X, y, _ = digits
    capped = MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 4, "patience": 50}).fit(X, y)
    assert capped.stopped_by_ == "cap" and len(capped.validation_curve_) == 4
    assert capped.best_epoch_ == int(np.argmin(capped.validation_curve_)) + 1
    every = MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 4}, validation_fraction=0.0).fit(X, y)
    assert every.stopped_by_ == "cap" and every.validation_curve_.shape == (0,)
    assert every.best_epoch_ == len(every.loss_curve_) == 4 and every.n_train_ == len(y)
    # early_stopping=False holds nothing out and runs every epoch either
    off = MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 4}, early_stopping=False).fit(X, y)
    assert off.n_train_ == len(y) and off.stopped_by_ == "cap"
    np.testing.assert_array_equal(off.loss_curve_, every.loss_curve_)


def test_validation_data_replaces_the_draw(digits):
    """Given validation rows, the held-out share is not drawn: any validation_fraction trains alike
    (the thesis's protocol, which passes validation_fraction=0)."""
    X, y, Xq = digits
    kw = dict(FAST, dropout="concrete")
    a = MCDropoutClassifier(**kw, validation_fraction=0.0).fit(X[:500], y[:500], validation_data=(X[500:], y[500:]))
    b = MCDropoutClassifier(**kw, validation_fraction=0.3).fit(X[:500], y[:500], validation_data=(X[500:], y[500:]))
    assert a.n_train_ == b.n_train_ == 500 and a.stopped_by_ == "patience"
    np.testing.assert_array_equal(a.validation_curve_, b.validation_curve_)
    np.testing.assert_array_equal(a.sample_logits(Xq), b.sample_logits(Xq))
    assert _numpy_nll(a, X[500:], y[500:]) == pytest.approx(a.validation_curve_.min(), rel=1e-12, abs=0)


def test_fine_tune_validates_only_on_given_rows(digits):
    X, y, _ = digits
    est = MCDropoutClassifier(dropout="bernoulli", **FAST).fit(X[:400], y[:400])
    est.fine_tune(X[400:], y[400:], epochs=3, random_state=0)
    assert est.validation_curve_.shape == (0,) and est.stopped_by_ == "cap" and est.best_epoch_ == 3
    assert est.n_train_ == 200
    est.fine_tune(X[400:], y[400:], epochs=40, random_state=0, validation_data=(X[:100], y[:100]))
    assert est.stopped_by_ == "patience"
    assert _replay_rule(est.validation_curve_, est.patience) == (est.best_epoch_, True)
    assert _numpy_nll(est, X[:100], y[:100]) == pytest.approx(est.validation_curve_.min(), rel=1e-12, abs=0)


def test_ensemble_records_each_members_run(digits):
    X, y, _ = digits
    ens = DeepEnsembleClassifier(MCDropoutClassifier(dropout="bernoulli", **FAST), n_members=2, random_state=1)
    ens.fit(X, y)
    assert ens.validation_curve_.shape == (max(len(m.validation_curve_) for m in ens.members_), 2)
    for j, m in enumerate(ens.members_):
        n = len(m.validation_curve_)
        np.testing.assert_array_equal(ens.validation_curve_[:n, j], m.validation_curve_)
        assert np.all(np.isnan(ens.validation_curve_[n:, j]))
        assert ens.best_epoch_[j] == m.best_epoch_
    assert ens.stopped_by_ == ("patience" if all(m.stopped_by_ == "patience" for m in ens.members_) else "cap")
    # each member holds out its own rows (its own seed)
    held = [_held_out_rows(m, y)[1] for m in ens.members_]
    assert not np.array_equal(held[0], held[1])
    # a value set on the ensemble replaces the estimator's in every member
    every = DeepEnsembleClassifier(MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 2}), n_members=2,
                                   validation_fraction=0.0, random_state=1).fit(X, y)
    assert [m.n_train_ for m in every.members_] == [len(y)] * 2 and every.validation_curve_.shape == (0, 2)
    assert every.stopped_by_ == "cap" and list(every.best_epoch_) == [2, 2]
    assert every.estimator.validation_fraction == MCDropoutClassifier().validation_fraction == 0.1  # not changed


def test_defaults_and_round_trip(digits, tmp_path):
    X, y, Xq = digits
    est = MCDropoutClassifier()
    assert (est.validation_fraction, est.patience) == (0.1, 20)
    ens = DeepEnsembleClassifier()
    assert (ens.validation_fraction, ens.patience) == (None, None)  # the estimator's own: 0.1, 20
    fitted = MCDropoutClassifier(dropout="multidrop", **FAST).fit(X, y)
    fitted.save(tmp_path / "m.safetensors")
    back = MCDropoutClassifier.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.validation_curve_, fitted.validation_curve_)
    assert (back.best_epoch_, back.stopped_by_) == (fitted.best_epoch_, fitted.stopped_by_) != (0, None)
    e = DeepEnsembleClassifier(MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 3}), n_members=2,
                               patience=2, random_state=0).fit(X, y)
    e.save(tmp_path / "e.safetensors")
    eb = DeepEnsembleClassifier.load(tmp_path / "e.safetensors")
    assert eb.get_params()["patience"] == 2 and eb.stopped_by_ == e.stopped_by_
    np.testing.assert_array_equal(eb.validation_curve_, e.validation_curve_)
    np.testing.assert_array_equal(eb.best_epoch_, e.best_epoch_)
    np.testing.assert_array_equal(eb.predict_proba(Xq), e.predict_proba(Xq))


def test_a_file_from_before_validated_fitting_loads(digits, tmp_path):
    """Old files hold the held-out curve as ``val_nll_curve`` and no ``stopped_by``."""
    from dubito.io import save_tensors

    X, y, Xq = digits
    est = MCDropoutClassifier(dropout="bernoulli", **{**FAST, "epochs": 3}).fit(X, y)
    tensors, settings = est._state()
    tensors["val_nll_curve"] = tensors.pop("validation_curve")
    del settings["fitted"]["stopped_by"]
    save_tensors(tmp_path / "old.safetensors", tensors, "MCDropoutClassifier", settings)
    back = MCDropoutClassifier.load(tmp_path / "old.safetensors")
    np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)
    assert back.stopped_by_ == "cap"
    np.testing.assert_array_equal(back.predict_proba(Xq), est.predict_proba(Xq))


def test_bad_validation_settings_raise_one_clear_error(digits):
    X, y, _ = digits
    small = dict(features=8, hidden=(8,), epochs=1)
    for value in (0.5, -0.1, 1.2):
        with pytest.raises(ValueError, match="validation_fraction"):
            MCDropoutClassifier(validation_fraction=value, **small).fit(X, y)
        with pytest.raises(ValueError, match="validation_fraction"):
            DeepEnsembleClassifier(MCDropoutClassifier(**small), n_members=1, validation_fraction=value).fit(X, y)
    with pytest.raises(ValueError, match="patience"):
        MCDropoutClassifier(patience=0, **small).fit(X, y)
    with pytest.raises(ValueError, match="patience"):
        DeepEnsembleClassifier(MCDropoutClassifier(**small), n_members=1, patience=0).fit(X, y)
    # 100 rows hold out ceil(0.1 n_c) of each class and leave fewer than batch_size=128 to train on
    left = 100 - int(np.ceil(0.1 * np.bincount(y[:100])).sum())
    with pytest.raises(ValueError, match=rf"leaves {left} to train on, fewer than batch_size=128"):
        MCDropoutClassifier(**small).fit(X[:100], y[:100])
    MCDropoutClassifier(**small, batch_size=left).fit(X[:100], y[:100])  # exactly enough rows
    MCDropoutClassifier(**small, validation_fraction=0.0).fit(X[:100], y[:100])  # no share, no constraint
    one = np.r_[np.flatnonzero(y != 9)[:60], np.flatnonzero(y == 9)[:1]]  # class 9 has a single row
    with pytest.raises(ValueError, match=r"at least 2 rows of every class.*\[9\]"):
        MCDropoutClassifier(**small, batch_size=16).fit(X[one], y[one])
    with pytest.raises(ValueError, match="no validation_fraction parameter"):
        DeepEnsembleClassifier(_NoValidation(), n_members=1, validation_fraction=0.1).fit(X, y)


class _NoValidation(MCDropoutClassifier):
    """A member class without validation_fraction / patience parameters."""

    def __init__(self, dropout="bernoulli", epochs=1, random_state=None):
        super().__init__(dropout=dropout, epochs=epochs, random_state=random_state)

    def get_params(self, deep=True):
        return {"dropout": self.dropout, "epochs": self.epochs, "random_state": self.random_state}
