"""DeepEnsembleRegressor(lr_drop="plateau"): when every member is out of patience, their best
weights come back and training goes on from a fresh Adam at a tenth of the rate, once.

Oracle: the same run composed by hand from two plain early-stopped `train_members` calls (the
second from the first's best weights, a new Adam at lr x PLATEAU_FACTOR, a stopper that starts
from the first's best held-out losses, the epochs left), bit for bit."""

import numpy as np
import pytest
import torch

from dubito.data.synthetic import toy2
from dubito.early_stopping import EarlyStopping
from dubito.nn.batched import BatchedGaussianMLP
from dubito.regression import DeepEnsembleRegressor
from dubito.regression import ensemble_training as training

L, EPOCHS, PATIENCE, LR = 3, 200, 15, 1e-2


@pytest.fixture(scope="module")
def tensors():
    X, y, _ = toy2(n=160, seed=1)
    X = torch.as_tensor((X - X.mean(0)) / X.std(0), dtype=torch.float32)
    y = torch.as_tensor((y - y.mean()) / y.std(), dtype=torch.float32)
    return X[:120], y[:120], (X[120:], y[120:])


def _net(p):
    return BatchedGaussianMLP(L, p, (16, 8), generators=training.member_generators(5, L))


def _train(net, gens, X, y, validation, *, lr, epochs, stopper, lr_drop):
    return training.train_members(net, X, y, generators=gens, lr=lr, weight_decay=1e-4, batch_size=32,
                                  epochs=epochs, lr_drop=lr_drop, validation=validation, stopper=stopper)


def test_a_plateau_run_is_two_early_stopped_runs_back_to_back(tensors):
    X, y, validation = tensors
    net = _net(X.shape[1])
    stopper = EarlyStopping(PATIENCE, L)
    curve = _train(net, training.member_generators(6, L), X, y, validation, lr=LR, epochs=EPOCHS, stopper=stopper,
                   lr_drop="plateau")

    ref, gens = _net(X.shape[1]), training.member_generators(6, L)  # the same streams again
    first = EarlyStopping(PATIENCE, L)
    c1 = _train(ref, gens, X, y, validation, lr=LR, epochs=EPOCHS, stopper=first, lr_drop="none")
    used = c1.shape[0]
    assert first.done and used < curve.shape[0] < EPOCHS  # it did drop, and stopped again before the cap
    second = EarlyStopping(PATIENCE, L)
    second.best_loss = first.best_loss.copy()
    c2 = _train(ref, gens, X, y, validation, lr=LR * training.PLATEAU_FACTOR, epochs=EPOCHS - used, stopper=second,
                lr_drop="none")
    np.testing.assert_array_equal(curve, np.concatenate([c1, c2]))
    for a, b in zip(net.state_dict().values(), ref.state_dict().values()):
        assert torch.equal(a, b)
    improved = second.best_epoch > 0
    expected = np.where(improved, used + second.best_epoch, first.best_epoch)
    np.testing.assert_array_equal(stopper.best_epoch, expected)
    assert improved.any()  # the lower rate found better held-out weights for some member


def test_without_held_out_rows_plateau_is_a_constant_rate():
    X, y, _ = toy2(n=80, seed=2)
    kw = dict(n_members=2, hidden=(8,), epochs=15, batch_size=16, progress=False, random_state=3,
              validation_fraction=0.0)
    a = DeepEnsembleRegressor(lr_drop="plateau", **kw).fit(X, y)
    b = DeepEnsembleRegressor(lr_drop="none", **kw).fit(X, y)
    for p, q in zip(a.net_.state_dict().values(), b.net_.state_dict().values()):
        assert torch.equal(p, q)


def test_resume_after_the_drop_gives_the_uninterrupted_fit(tmp_path, monkeypatch):
    X, y, _ = toy2(n=150, seed=4)
    kw = dict(n_members=2, hidden=(16, 8), epochs=200, batch_size=32, lr=1e-2, lr_drop="plateau", progress=False,
              random_state=7, patience=3, checkpoint_every=1)
    rates = []
    real = training.set_learning_rate
    with monkeypatch.context() as m:
        m.setattr(training, "set_learning_rate", lambda opt, lr: (rates.append(lr), real(opt, lr)))
        full = DeepEnsembleRegressor(**kw).fit(X, y)
    drop = rates.index(min(rates))  # 0-based epoch of the first lower rate
    assert set(rates) == {1e-2, 1e-2 * training.PLATEAU_FACTOR} and 0 < drop < len(rates) < 200
    assert full.stopped_by_ == "patience"

    class Interrupt(Exception):
        pass

    calls = {"n": 0}
    perms = training.member_permutations

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] > drop + 2:
            raise Interrupt
        return perms(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(training, "member_permutations", flaky)
        with pytest.raises(Interrupt):
            DeepEnsembleRegressor(**kw, checkpoint_dir=tmp_path).fit(X, y)
    resumed = DeepEnsembleRegressor(**kw, checkpoint_dir=tmp_path).fit(X, y, resume=True)
    np.testing.assert_array_equal(resumed.loss_curve_, full.loss_curve_)
    np.testing.assert_array_equal(resumed.best_epoch_, full.best_epoch_)
    for p, q in zip(resumed.net_.state_dict().values(), full.net_.state_dict().values()):
        assert torch.equal(p, q)
