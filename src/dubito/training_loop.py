r"""The epoch loop every gradient-trained estimator shares: train, score the held-out rows,
stop early, keep the best state, show a progress bar.

`run_epochs` runs ``train_epoch(epoch)`` up to ``epochs`` times. With ``validate`` (the held-out
NLL of each unit: one network, or each member of an ensemble trained together) it updates an
`dubito.early_stopping.EarlyStopping` after every epoch, calls ``keep_best(improved)`` so the
caller can copy the improved units' state, stops when every unit has gone ``patience`` epochs
without improving, and calls ``restore_best()`` at the end. It returns a `TrainingRecord`
(loss curve, held-out curve, best epoch per unit, stopped by "patience" or "cap"), which
estimators store as ``loss_curve_``, ``validation_curve_``, ``best_epoch_`` and ``stopped_by_``.

`module_snapshots(net)` gives ``keep_best`` / ``restore_best`` for a torch module (units stacked
on the first axis of every tensor for an ensemble, `dubito.early_stopping.copy_best_members`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from dubito._estimator import progress_bar
from dubito.early_stopping import EarlyStopping, best_copy, copy_best_members

__all__ = ["DIVERGED", "RECOVERED", "NAIVE_GAUSSIAN_NLL", "NAIVE_MSE", "TrainingRecord", "check_divergence", "module_snapshots",
           "run_epochs"]

#: An epoch's mean loss above this many times what predicting the mean gives (at least 1) is a
#: diverged optimiser (issue 22: lr=10 gave finite but absurd predictions without a word).
#: Healthy fits on standardised targets start within ~10x of it; the diverged ones measured
#: started 1e6-1e14 times above it.
DIVERGED = 1e4
#: ... unless the next epoch is back within this many times it: one epoch above the bound can be a
#: spike that training recovers from (the uci protein split 1 ensemble at lr 0.01: epochs 23 and 31
#: at 214 and 1.4e4, the next ones at 0.16, a test NLL of 2.82), where a diverged optimiser stays
#: far above (MC dropout at lr 10: 4.0e14, then 4.7e8, then 2.4e3 with constant predictions).
RECOVERED = 10.0

#: Mean loss of the naive prediction on standardised targets (mean 0, variance 1): the MSE of
#: predicting 0 is 1; the Gaussian NLL of N(0, 1) is (1 + log 2 pi) / 2.
NAIVE_MSE = 1.0
NAIVE_GAUSSIAN_NLL = 0.5 * (1.0 + float(np.log(2.0 * np.pi)))


@dataclass
class TrainingRecord:
    """What a training run leaves: ``loss_curve`` (epochs run,) of the training loss;
    ``validation_curve`` (epochs run, units) of the held-out losses ((0, units) without them);
    ``best_epoch`` (units,), counted from 1 (the last epoch without validation); ``stopped_by``
    "patience" or "cap"."""

    loss_curve: np.ndarray
    validation_curve: np.ndarray
    best_epoch: np.ndarray
    stopped_by: str


def module_snapshots(net: torch.nn.Module) -> tuple[Callable[[np.ndarray], None], Callable[[], None]]:
    """(keep_best, restore_best) for `run_epochs` over ``net``'s parameters and buffers."""
    best = best_copy(net)

    def keep_best(improved: np.ndarray) -> None:
        copy_best_members(best, net, improved)

    def restore_best() -> None:
        net.load_state_dict(best.state_dict())

    return keep_best, restore_best


def _exploded(loss: float, naive_loss: float | None) -> bool:
    """A finite loss above `DIVERGED` x max(naive, 1) (False without a naive scale)."""
    return bool(np.isfinite(loss)) and naive_loss is not None and loss > DIVERGED * max(naive_loss, 1.0)


def check_divergence(loss: float, epoch: int, description: str, lr: float | None,
                     naive_loss: float | None = None, *, previous: float | None = None, last: bool = True) -> None:
    """FloatingPointError naming the learning rate when an epoch's training loss is not finite, or
    (given ``naive_loss``, the loss of predicting the mean) when the ``previous`` epoch's loss was
    above `DIVERGED` x max(naive, 1) and this one is not back within `RECOVERED` x it, or this one is
    above the bound and it is the ``last`` epoch (its weights are the spike's)."""
    if not np.isfinite(loss):
        raise FloatingPointError(f"{description}: the training loss is {loss:.4g} in epoch {epoch + 1}: the "
                                 f"optimiser diverged; {_hint(lr)}")
    if naive_loss is None:
        return
    if previous is not None and _exploded(previous, naive_loss) and loss > RECOVERED * max(naive_loss, 1.0):
        raise FloatingPointError(
            f"{description}: the training loss is {loss:.4g} in epoch {epoch + 1} after {previous:.4g} in epoch "
            f"{epoch}, over {DIVERGED:g} x the {naive_loss:.3g} of predicting the mean: the optimiser diverged; "
            + _hint(lr))
    if last and _exploded(loss, naive_loss):
        raise FloatingPointError(f"{description}: the training loss is {loss:.4g} in epoch {epoch + 1}, over "
                                 f"{DIVERGED:g} x the {naive_loss:.3g} of predicting the mean: the optimiser "
                                 f"diverged; {_hint(lr)}")


def _hint(lr: float | None) -> str:
    return "lower the learning rate" + ("" if lr is None else f" (lr={lr:g})")


def run_epochs(
    train_epoch: Callable[[int], float],
    *,
    epochs: int,
    description: str,
    progress: bool,
    validate: Callable[[], Sequence[float]] | None = None,
    patience: int = 20,
    n_units: int = 1,
    keep_best: Callable[[np.ndarray], None] | None = None,
    restore_best: Callable[[], None] | None = None,
    stopper: EarlyStopping | None = None,
    start_epoch: int = 0,
    loss_curve: Sequence[float] = (),
    after_epoch: Callable[[int, EarlyStopping | None, np.ndarray], None] | None = None,
    stop_reason: Callable[[int], str | None] | None = None,
    lr: float | None = None,
    naive_loss: float | None = None,
    on_plateau: Callable[[np.ndarray], np.ndarray] | None = None,
) -> TrainingRecord:
    """Train for at most ``epochs`` epochs, stopping early on the held-out losses of ``validate``.

    ``train_epoch(epoch)`` runs one epoch (0-based) and returns its training loss. ``validate()``
    returns the held-out loss of each of ``n_units`` units (None: no early stopping, every epoch
    runs). ``keep_best(improved)`` is called after each validation with the mask of the units that
    improved; ``restore_best()`` once at the end. A resumed run passes its ``stopper``,
    ``start_epoch`` and the ``loss_curve`` so far; ``after_epoch(epoch, stopper, curve)`` runs after
    every epoch (e.g. to write a training checkpoint). ``stop_reason(epoch)``, when it returns a
    string (e.g. "min_lr": a schedule reached its floor), ends training there with that reason.
    A training loss that is not finite, or (given ``naive_loss``, the per-row loss of predicting
    the mean) above `DIVERGED` times it and not back within `RECOVERED` times it in the next epoch
    (or above it in the last epoch), stops training with a FloatingPointError naming ``lr``
    (`check_divergence`). ``on_plateau(out)`` is called after a validation where some units are out
    of patience (the mask ``out``); it returns the mask of those it gave another chance (say, their
    best state restored and a lower learning rate), whose patience counts start again
    (`EarlyStopping.reset_patience`). Training ends when every unit is out of patience.
    """
    if validate is not None and stopper is None:
        stopper = EarlyStopping(patience, n_units)
    curve = list(map(float, loss_curve))
    reason = None
    with progress_bar(progress) as bar:
        task = bar.add_task(description, total=epochs, completed=start_epoch)
        for epoch in range(start_epoch, epochs):
            if stopper is not None and stopper.done:
                break
            curve.append(float(train_epoch(epoch)))
            check_divergence(curve[-1], epoch, description, lr, naive_loss,
                             previous=curve[-2] if len(curve) > 1 else None, last=epoch == epochs - 1)
            text = f"{description} loss {curve[-1]:.4g}"
            if stopper is not None:
                held_out = np.asarray(validate(), dtype=np.float64).reshape(-1)
                improved = stopper.update(held_out)
                if keep_best is not None:
                    keep_best(improved)
                text += f" held-out {np.nanmean(held_out):.4g}"
                if on_plateau is not None and stopper.out_of_patience.any():
                    again = np.asarray(on_plateau(stopper.out_of_patience.copy()), dtype=bool)
                    if again.any():
                        stopper.reset_patience(again)
                        text += f" plateau: {int(again.sum())} unit(s) go on at a lower learning rate"
                if stopper.done:  # the bar ends full, at the epochs run
                    text += f" stopped, best epoch {int(stopper.best_epoch.max())}"
            if after_epoch is not None:
                after_epoch(epoch, stopper, np.asarray(curve))
            if stop_reason is not None and not (stopper is not None and stopper.done):
                reason = stop_reason(epoch)
            stopped = (stopper is not None and stopper.done) or reason is not None
            bar.update(task, advance=1, description=text, total=epoch + 1 if stopped else epochs)
            if reason is not None:
                break
    if stopper is None:
        return TrainingRecord(np.asarray(curve), np.zeros((0, n_units)), np.full(n_units, len(curve), dtype=np.int64),
                              reason or "cap")
    if restore_best is not None:
        restore_best()
    return TrainingRecord(np.asarray(curve), np.asarray(stopper.curve, dtype=np.float64).reshape(-1, n_units),
                          stopper.best_epoch.copy(), "patience" if stopper.done else reason or "cap")
