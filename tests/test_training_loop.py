"""`dubito.training_loop.run_epochs`: the shared epoch loop, against hand-computed stopping epochs."""

import re

import numpy as np
import pytest
import torch

from dubito.training_loop import module_snapshots, run_epochs


def _feed(values):
    it = iter(values)
    return lambda: [next(it)]


def test_stops_after_patience_and_restores_the_best_epoch():
    net = torch.nn.Linear(1, 1, bias=False)
    keep, restore = module_snapshots(net)

    def train_epoch(epoch):
        with torch.no_grad():
            net.weight.fill_(float(epoch + 1))  # weight = epoch number (from 1)
        return 10.0 - epoch

    held_out = [5.0, 4.0, 3.0, 3.5, 3.2, 3.1, 9.0, 9.0]  # best at epoch 3; 3 epochs without improving
    record = run_epochs(train_epoch, epochs=8, description="t", progress=False, validate=_feed(held_out),
                        patience=3, keep_best=keep, restore_best=restore)
    assert record.stopped_by == "patience"
    assert record.best_epoch.tolist() == [3]
    np.testing.assert_array_equal(record.loss_curve, [10, 9, 8, 7, 6, 5])
    np.testing.assert_array_equal(record.validation_curve[:, 0], held_out[:6])
    assert float(net.weight) == 3.0  # the weights of epoch 3


def test_cap_without_validation_and_with_a_unit_still_improving():
    record = run_epochs(lambda e: float(e), epochs=4, description="t", progress=False)
    assert (record.stopped_by, record.best_epoch.tolist(), record.validation_curve.shape) == ("cap", [4], (0, 1))
    record = run_epochs(lambda e: 0.0, epochs=4, description="t", progress=False, patience=2,
                        validate=_feed([4.0, 3.0, 2.0, 1.0]))
    assert (record.stopped_by, record.best_epoch.tolist()) == ("cap", [4])


def test_units_stop_on_their_own_and_training_ends_when_all_are_done():
    losses = iter([[1.0, 5.0], [2.0, 4.0], [2.0, 3.0], [2.0, 3.5], [2.0, 3.6]])
    record = run_epochs(lambda e: 0.0, epochs=10, description="t", progress=False, n_units=2, patience=2,
                        validate=lambda: next(losses))
    assert record.best_epoch.tolist() == [1, 3]
    assert record.stopped_by == "patience" and record.loss_curve.size == 5
    assert record.validation_curve.shape == (5, 2)


def test_on_plateau_gets_the_units_out_of_patience_and_the_ones_it_keeps_go_on():
    """Unit 0 is out of patience after epoch 3 and is given one more chance; unit 1 after epoch 4,
    refused. Unit 0's count starts again (epochs 4-5 without improving), so training ends after 5."""
    losses = iter([[1.0, 1.0], [2.0, 0.5], [2.0, 0.6], [2.0, 0.7], [2.0, 0.8], [2.0, 0.9], [0.1, 0.1]])
    calls = []

    def on_plateau(out):
        calls.append(out.tolist())
        again = out & np.array([len(calls) == 1, False])
        return again

    record = run_epochs(lambda e: 0.0, epochs=10, description="t", progress=False, n_units=2, patience=2,
                        validate=lambda: next(losses), on_plateau=on_plateau)
    assert calls == [[True, False], [False, True], [True, True]]
    assert record.stopped_by == "patience" and record.loss_curve.size == 5
    assert record.best_epoch.tolist() == [1, 2]


@pytest.mark.parametrize("start", [0, 2])
def test_resume_continues_the_curve_and_calls_after_epoch(start):
    seen = []
    record = run_epochs(lambda e: float(e), epochs=4, description="t", progress=False, start_epoch=start,
                        loss_curve=[float(e) for e in range(start)], after_epoch=lambda e, s, c: seen.append(e))
    assert seen == list(range(start, 4))
    np.testing.assert_array_equal(record.loss_curve, [0, 1, 2, 3])


def test_a_stop_reason_ends_training_with_that_reason_and_restores_the_best():
    """A schedule's own end (e.g. HyVI's "min_lr") stops the loop at that epoch, with or without
    held-out rows; with them the best state is still restored."""
    restored = []
    record = run_epochs(lambda e: 0.0, epochs=10, description="t", progress=False, patience=5,
                        validate=_feed([3.0, 1.0, 2.0, 2.5]), restore_best=lambda: restored.append(True),
                        stop_reason=lambda e: "min_lr" if e == 3 else None)
    assert (record.stopped_by, record.loss_curve.size, record.best_epoch.tolist(), restored) == ("min_lr", 4, [2], [True])
    record = run_epochs(lambda e: 0.0, epochs=10, description="t", progress=False,
                        stop_reason=lambda e: "min_lr" if e == 6 else None)
    assert (record.stopped_by, record.loss_curve.size) == ("min_lr", 7)


def test_a_non_finite_or_exploding_loss_stops_training_naming_the_learning_rate():
    from dubito.training_loop import DIVERGED, NAIVE_GAUSSIAN_NLL, check_divergence

    assert NAIVE_GAUSSIAN_NLL == pytest.approx(0.5 * np.log(2 * np.pi * np.e), rel=1e-15)
    check_divergence(5.0, 0, "net", 1e-3, naive_loss=1.0)  # a sensible first epoch
    check_divergence(DIVERGED * 1.0, 0, "net", 1e-3, naive_loss=0.5)  # at the bound: max(naive, 1) = 1
    check_divergence(1e300, 0, "net", 1e-3)  # no naive scale (a summed loss): only non-finite stops
    with pytest.raises(FloatingPointError, match=r"net: the training loss is 1.001e\+04 in epoch 3, over 10000 x the "
                                                 r"1 of predicting the mean: the optimiser diverged; lower the learning "
                                                 r"rate \(lr=10\)"):
        check_divergence(DIVERGED * 1.001, 2, "net", 10.0, naive_loss=1.0)
    with pytest.raises(FloatingPointError, match=r"the training loss is nan in epoch 1: the optimiser diverged"):
        check_divergence(float("nan"), 0, "net", None)
    epochs_run = []

    def train_epoch(epoch):
        epochs_run.append(epoch)
        return [0.5, 0.4, float("inf"), 0.3][epoch]

    with pytest.raises(FloatingPointError, match="loss is inf in epoch 3"):
        run_epochs(train_epoch, epochs=4, description="toy", progress=False, lr=0.1)
    assert epochs_run == [0, 1, 2]


def test_a_spike_that_training_recovers_from_is_not_a_divergence():
    from dubito.training_loop import DIVERGED, RECOVERED

    big = 2 * DIVERGED

    def losses(values):
        return lambda epoch: values[epoch]

    # spikes followed by a healthy epoch, as the uci protein ensemble at lr 0.01 (epochs 23 and 31 at 214
    # and 1.4e4, then 0.16): training goes on
    spiky = [0.5, big, 0.4, big, RECOVERED, 0.3]
    record = run_epochs(losses(spiky), epochs=len(spiky), description="toy", progress=False, naive_loss=1.0)
    assert record.loss_curve.size == len(spiky)
    # not back within RECOVERED x naive in the next epoch (MC dropout at lr 10: 4.0e14, then 4.7e8)
    stuck = [0.5, big, RECOVERED * 1.01, 0.3]
    with pytest.raises(FloatingPointError, match=r"loss is 10.1 in epoch 3 after 2e\+04 in epoch 2, over 10000 x the 1 "
                                                 r"of predicting the mean: the optimiser diverged; lower the learning "
                                                 r"rate \(lr=1\)"):
        run_epochs(losses(stuck), epochs=len(stuck), description="toy", progress=False, naive_loss=1.0, lr=1.0)
    # above the bound in the last epoch: the weights it leaves are those of the spike
    with pytest.raises(FloatingPointError, match="in epoch 3, over 10000"):
        run_epochs(losses([0.5, 0.4, big]), epochs=3, description="toy", progress=False, naive_loss=1.0)


@pytest.mark.parametrize("name,lr", [("DeterministicRegressor", 1e6), ("MixtureDensityRegressor", 10.0),
                                     ("DeepEnsembleRegressor", 10.0), ("MCDropoutRegressor", 10.0)])
def test_estimators_with_a_diverging_learning_rate_stop_with_one_clear_error(name, lr):
    # issue 22, part 8: lr=1e6 and MDN(lr=10) returned absurd finite predictions without a word
    # (measured first-epoch losses on this data: nan, 8.8e6, 7.2e7, 4.0e14)
    import dubito.regression as regression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=200)
    est = getattr(regression, name)(lr=lr, epochs=20, progress=False, random_state=0)
    with pytest.raises(FloatingPointError, match=r"the optimiser diverged; lower the learning rate \(lr=" + re.escape(f"{lr:g})")):
        est.fit(X, y)
