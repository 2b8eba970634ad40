"""dubito.early_stopping: the held-out rows, the stopping rule and the best-state copy, against
brute-force references."""

import math

import numpy as np
import pytest
import torch

from dubito.early_stopping import (
    AUTO_CAP_STEPS,
    AUTO_PATIENCE_STEPS,
    DEFAULT_EPOCHS,
    DEFAULT_PATIENCE,
    EarlyStopping,
    best_copy,
    check_epochs,
    check_patience,
    check_validation_fraction,
    copy_best_members,
    holdout_split,
    resolve_budget,
    steps_per_epoch,
)
from dubito.nn.batched import BatchedGaussianMLP


@pytest.mark.parametrize("n, fraction", [(10, 0.1), (442, 0.1), (37, 0.25), (5, 0.3), (1000, 0.49)])
def test_holdout_split_sizes_partition_and_seed(n, fraction):
    train, val = holdout_split(n, fraction, seed=3)
    assert val.size == math.ceil(fraction * n)
    assert np.array_equal(np.sort(np.r_[train, val]), np.arange(n))  # a partition of the rows
    assert np.all(np.diff(train) > 0) and np.all(np.diff(val) > 0)  # sorted
    again = holdout_split(n, fraction, seed=3)
    assert np.array_equal(again[1], val)
    assert any(not np.array_equal(holdout_split(n, fraction, seed=s)[1], val) for s in range(4, 8))


def test_holdout_split_draws_every_row_alike():
    """Over 4,000 seeds each of 20 rows is held out with frequency 2/20 (binomial sd 0.0047;
    tolerance 5 sd)."""
    counts = np.zeros(20)
    for seed in range(4000):
        counts[holdout_split(20, 0.1, seed)[1]] += 1
    np.testing.assert_allclose(counts / 4000, 0.1, atol=5 * math.sqrt(0.1 * 0.9 / 4000))


def test_holdout_split_zero_fraction_keeps_every_row():
    train, val = holdout_split(7, 0.0, seed=0)
    assert np.array_equal(train, np.arange(7)) and val.size == 0


def test_stratified_holdout_takes_a_share_of_each_class_and_keeps_one_to_train():
    classes = np.r_[np.zeros(50, int), np.ones(10, int), np.full(2, 2)]
    train, val = holdout_split(classes.size, 0.2, seed=1, classes=classes)
    held = np.bincount(classes[val], minlength=3)
    assert held.tolist() == [10, 2, 1]  # ceil(0.2 n_c), at most n_c - 1
    assert np.all(np.bincount(classes[train], minlength=3) >= 1)
    with pytest.raises(ValueError, match=r"at least 2 rows of every class.*class\(es\) \[1\] have 1"):
        holdout_split(5, 0.2, seed=0, classes=np.array([0, 0, 1, 2, 2]))


def test_holdout_split_refuses_fewer_training_rows_than_the_batch():
    with pytest.raises(ValueError, match=r"holds out 3 of 30 rows and leaves 27 to train on, fewer than batch_size=32"):
        holdout_split(30, 0.1, seed=0, batch_size=32)
    assert holdout_split(30, 0.1, seed=0, batch_size=27)[0].size == 27


@pytest.mark.parametrize("value, match", [(0.5, r"\[0, 0.5\)"), (-0.1, ">= 0"), (float("nan"), "validation_fraction"),
                                          ("0.1", "validation_fraction"), (True, "validation_fraction")])
def test_check_validation_fraction(value, match):
    with pytest.raises(ValueError, match=match):
        check_validation_fraction(value)


def test_check_patience():
    assert check_patience(3) == 3
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(ValueError, match="patience"):
            check_patience(bad)


def test_check_patience_and_epochs_take_auto_only_where_allowed():
    assert check_patience("auto", allow_auto=True) == "auto"
    assert check_epochs("auto", allow_auto=True) == "auto" and check_epochs(7) == 7
    for check, name in ((check_patience, "patience"), (check_epochs, "epochs")):
        with pytest.raises(ValueError, match=name):
            check("auto")
        for bad in ("Auto", "steps", 0, 1.5):
            with pytest.raises(ValueError, match=name):
                check(bad, allow_auto=True)


@pytest.mark.parametrize("n, batch", [(1, 64), (63, 64), (64, 64), (65, 64), (249, 64), (5972, 64), (100, 1)])
def test_steps_per_epoch_counts_the_last_short_batch(n, batch):
    assert steps_per_epoch(n, batch) == len(range(0, n, min(batch, n)))


@pytest.mark.parametrize("n, batch", [(30, 64), (249, 64), (409, 64), (1165, 64), (5972, 64), (40000, 64), (300, 8)])
def test_resolve_budget_auto_is_the_longer_of_epochs_and_steps(n, batch):
    """Brute force: the smallest whole number of epochs with at least the step budget, or the epoch
    default, whichever is larger; integers pass through; no held-out rows: the epoch cap."""
    steps = len(range(0, n, min(batch, n)))

    def epochs_for(target):
        e = 1
        while e * steps < target:
            e += 1
        return e

    patience, epochs = resolve_budget("auto", "auto", n, batch, held_out=True)
    assert patience == max(DEFAULT_PATIENCE, epochs_for(AUTO_PATIENCE_STEPS))
    assert epochs == max(DEFAULT_EPOCHS, epochs_for(AUTO_CAP_STEPS))
    assert patience * steps >= AUTO_PATIENCE_STEPS and epochs * steps >= AUTO_CAP_STEPS
    assert resolve_budget("auto", "auto", n, batch, held_out=False)[1] == DEFAULT_EPOCHS
    assert resolve_budget(7, 9, n, batch, held_out=True) == (7, 9)


def test_resolve_budget_keeps_the_epoch_defaults_on_large_sets():
    # kin8nm's standard training rows less the held-out tenth: 94 steps an epoch at batch 64
    assert resolve_budget("auto", "auto", 5972, 64, held_out=True) == (DEFAULT_PATIENCE, DEFAULT_EPOCHS)
    # yacht's: 249 rows, 4 steps an epoch
    assert resolve_budget("auto", "auto", 249, 64, held_out=True) == (250, 5000)


def _reference(losses: np.ndarray, patience: int):
    """Brute force: epochs run and each unit's best epoch (1-based) of the rule in plain loops."""
    k = losses.shape[1]
    best, best_epoch, bad = [math.inf] * k, [0] * k, [0] * k
    for t, row in enumerate(losses, start=1):
        for j in range(k):
            if row[j] < best[j]:
                best[j], best_epoch[j], bad[j] = row[j], t, 0
            else:
                bad[j] += 1
        if all(b >= patience for b in bad):
            return t, best_epoch
    return losses.shape[0], best_epoch


@pytest.mark.parametrize("seed", range(6))
def test_early_stopping_matches_the_brute_force_rule(seed):
    rng = np.random.default_rng(seed)
    k, patience = int(rng.integers(1, 4)), int(rng.integers(1, 6))
    # noisy U-shaped held-out curves, with NaNs sprinkled in (never an improvement)
    t = np.arange(60)[:, None]
    losses = (t - rng.integers(5, 40, size=k)) ** 2 / 100 + rng.normal(0, 0.5, size=(60, k))
    losses[rng.random(losses.shape) < 0.05] = np.nan
    stopper = EarlyStopping(patience, k)
    for row in losses:
        stopper.update(row)
        if stopper.done:
            break
    epochs_run, best_epoch = _reference(np.where(np.isnan(losses), np.inf, losses), patience)
    assert len(stopper.curve) == epochs_run
    assert stopper.best_epoch.tolist() == best_epoch
    np.testing.assert_array_equal(stopper.best_loss, [np.nanmin(losses[:epochs_run, j]) for j in range(k)])


def test_early_stopping_state_round_trip_continues_identically():
    losses = np.random.default_rng(0).normal(size=(30, 2)).cumsum(0)
    a = EarlyStopping(4, 2)
    for row in losses[:10]:
        a.update(row)
    b = EarlyStopping.from_state(a.state())
    for row in losses[10:]:
        assert np.array_equal(a.update(row), b.update(row))
        assert a.done == b.done
    assert a.state() == b.state()
    with pytest.raises(ValueError, match="expected 2 held-out losses, got 3"):
        a.update([1.0, 2.0, 3.0])


def test_copy_best_members_copies_only_the_improved_rows():
    torch.manual_seed(0)
    net = BatchedGaussianMLP(3, 2, (4,))
    best = best_copy(net)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    copy_best_members(best, net, np.array([False, True, False]))
    for b, p in zip(best.parameters(), net.parameters()):
        assert torch.equal(b[1], p[1])  # member 1: the new weights
        torch.testing.assert_close(b[[0, 2]], p[[0, 2]] - 1.0, rtol=0, atol=1e-6)  # members 0 and 2: the old ones
    single = torch.nn.Linear(2, 3)
    kept = best_copy(single)
    with torch.no_grad():
        single.weight.add_(1.0)
    copy_best_members(kept, single, np.array([True]))
    assert torch.equal(kept.weight, single.weight)
    with pytest.raises(ValueError, match="no leading axis of 2 units"):
        copy_best_members(best_copy(single), single, np.array([True, False]))
