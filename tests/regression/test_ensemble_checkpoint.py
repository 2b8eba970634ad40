"""DeepEnsembleRegressor's training checkpoint: an interrupted fit resumes to the same numbers."""

import numpy as np
import pytest
import torch

from dubito.data.synthetic import toy2
from dubito.regression import DeepEnsembleRegressor
from dubito.regression import ensemble_training as ensemble

# 9 epochs so that the halving schedule (last 5 epochs) starts after the interruption point
KW = dict(n_members=3, hidden=(16, 8), epochs=9, batch_size=32, lr=1e-2, lr_drop="halving", progress=False,
          random_state=7, validation_fraction=0.0)


@pytest.fixture(scope="module")
def data():
    X, y, _ = toy2(n=100, seed=0)
    return X, y


class _Interrupt(Exception):
    pass


def _interrupt_after(monkeypatch, n_epochs: int):
    """Make epoch n_epochs + 1 of the next fit raise, as a kill between epochs would: every
    epoch starts by drawing the members' permutations."""
    calls = {"n": 0}
    real = ensemble.member_permutations

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > n_epochs:
            raise _Interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ensemble, "member_permutations", flaky)


def _same_fit(a, b):
    assert np.array_equal(a.loss_curve_, b.loss_curve_)
    for p, q in zip(a.net_.state_dict().values(), b.net_.state_dict().values()):
        assert torch.equal(p, q)
    assert np.array_equal(a.gammas_, b.gammas_)


def test_resume_after_an_interruption_gives_the_uninterrupted_fit(data, tmp_path, monkeypatch):
    """Killed in epoch 6 (last checkpoint after 4, every 2), resume=True ends bit for bit where an
    uninterrupted 9-epoch fit ends: weights, loss curve, gammas and predictive."""
    X, y = data
    full = DeepEnsembleRegressor(**KW).fit(X, y)
    with monkeypatch.context() as m:
        _interrupt_after(m, 5)
        with pytest.raises(_Interrupt):
            DeepEnsembleRegressor(**KW, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y)
    assert [p.name for p in tmp_path.iterdir()] == ["deep_ensemble.safetensors"]  # no temporary files left
    with monkeypatch.context() as m:  # resuming redoes epoch 5 only: 5 more epochs in all
        _interrupt_after(m, 5)
        resumed = DeepEnsembleRegressor(**KW, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y, resume=True)
    _same_fit(resumed, full)
    a, b = full.predict_distribution(X[:7]), resumed.predict_distribution(X[:7])
    assert np.array_equal(a.mean, b.mean) and np.array_equal(a.var, b.var)
    # a finished checkpoint: resume returns the fitted ensemble without training again
    with monkeypatch.context() as m:
        _interrupt_after(m, 0)
        again = DeepEnsembleRegressor(**KW, checkpoint_dir=tmp_path, checkpoint_every=2).fit(X, y, resume=True)
    _same_fit(again, full)


def test_resume_refuses_other_data_or_settings_and_needs_a_folder_and_seed(data, tmp_path):
    X, y = data
    kw = dict(KW, epochs=2, checkpoint_dir=tmp_path)
    DeepEnsembleRegressor(**kw).fit(X, y)
    with pytest.raises(ValueError, match="different model, data or settings.*data"):
        DeepEnsembleRegressor(**kw).fit(X, y + 1.0, resume=True)
    with pytest.raises(ValueError, match=r"lr: checkpoint 0\.01 vs this fit 0\.02"):
        DeepEnsembleRegressor(**{**kw, "lr": 0.02}).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        DeepEnsembleRegressor(**{**kw, "checkpoint_dir": None}).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="integer random_state"):
        DeepEnsembleRegressor(**{**kw, "random_state": None}).fit(X, y, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every"):
        DeepEnsembleRegressor(**{**kw, "checkpoint_every": 0}).fit(X, y)
    (tmp_path / "deep_ensemble.safetensors").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable safetensors"):
        DeepEnsembleRegressor(**kw).fit(X, y, resume=True)
    # no checkpoint yet: resume starts afresh and equals a plain fit
    fresh = DeepEnsembleRegressor(**{**kw, "checkpoint_dir": tmp_path / "new"}).fit(X, y, resume=True)
    plain = DeepEnsembleRegressor(**{**kw, "checkpoint_dir": None}).fit(X, y)
    _same_fit(fresh, plain)


def test_a_checkpointing_fit_equals_a_plain_one(data, tmp_path):
    """Writing checkpoints draws no random numbers and changes nothing."""
    X, y = data
    _same_fit(DeepEnsembleRegressor(**KW, checkpoint_dir=tmp_path, checkpoint_every=3).fit(X, y),
              DeepEnsembleRegressor(**KW).fit(X, y))
