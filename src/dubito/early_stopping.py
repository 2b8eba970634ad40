r"""Validated fitting: a held-out share of the training rows, and early stopping on its NLL.

Every estimator that trains by gradient steps takes ``validation_fraction`` (the share of the
*training* rows held out; never the test split) and ``patience``. After each epoch it scores
the held-out rows by their negative log-likelihood; a unit (the network, or each member of an
ensemble trained together) that has not improved its best held-out NLL for ``patience``
epochs is done, training ends when every unit is done or at the epoch cap, and each unit's
weights are restored to its best epoch. The held-out rows are not refitted afterwards: a refit
on train + validation would need a rule for its own length (the best epoch grows with the
data) and would double the cost, for 1/9 more rows at the default share.

Defaults and their sources:

* ``DEFAULT_VALIDATION_FRACTION = 0.1``: scikit-learn's ``MLPRegressor(validation_fraction=0.1)``
  and ``HistGradientBoostingRegressor``.
* ``DEFAULT_PATIENCE = 20`` epochs: Keras' and scikit-learn's conventions are 10 epochs
  (``n_iter_no_change``); held-out NLL on a few dozen rows (diabetes: 40) is noisy, and 20
  restored a better state than 10 on diabetes and the small UCI sets (docs/design.md).

Budgets counted in optimiser steps (``patience="auto"``, ``epochs="auto"``; the deep ensemble's
and MC dropout's defaults): on a small set an epoch is a handful of steps (a yacht standard split
trains on 249 rows: 4 steps at batch 64), so 20 epochs of patience and a 500-epoch cap stop
networks that are still improving. "auto" resolves, once the training rows are known, to whichever
is longer of the epoch default and ``AUTO_PATIENCE_STEPS = 1000`` / ``AUTO_CAP_STEPS = 20000``
optimiser steps; sets of a few thousand rows (kin8nm and larger: about 100 steps an epoch at batch
64, 200 at 32) keep 20 and 500. Chosen on validation rows (benchmarks/ensemble_budget.py,
docs/results/ensemble-budget.md).

The held-out rows are drawn with their own random stream (`holdout_split`), so they do not
change the networks' initialisation or mini-batch order.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from dubito._validation import check_float, check_int

__all__ = [
    "AUTO_CAP_STEPS",
    "AUTO_PATIENCE_STEPS",
    "DEFAULT_EPOCHS",
    "DEFAULT_PATIENCE",
    "DEFAULT_VALIDATION_FRACTION",
    "STOPPED_BY",
    "EarlyStopping",
    "best_copy",
    "check_epochs",
    "check_patience",
    "check_training_target",
    "check_validation_fraction",
    "copy_best_members",
    "holdout_split",
    "regression_holdout",
    "resolve_budget",
    "steps_per_epoch",
]

DEFAULT_VALIDATION_FRACTION = 0.1
DEFAULT_PATIENCE = 20
#: The epoch cap that "auto" starts from (the deep ensemble's default before "auto").
DEFAULT_EPOCHS = 500
AUTO_PATIENCE_STEPS = 1000
AUTO_CAP_STEPS = 20000

#: Why training ended: "patience" (every unit went ``patience`` epochs without improving its
#: held-out NLL), "cap" (the epoch cap came first, or there was no held-out share) or "min_lr"
#: (a learning-rate schedule reached its floor first: HyVI's plateau schedule).
STOPPED_BY = ("patience", "cap", "min_lr")

#: Key mixed into the seed of the held-out draw, so it is a stream of its own.
_HOLDOUT_STREAM = 0x76616C  # "val"


def check_validation_fraction(value) -> float:
    """``validation_fraction`` in [0, 0.5): 0 trains on every row with no early stopping."""
    fraction = check_float(value, "validation_fraction", min_value=0.0)
    if fraction >= 0.5:
        raise ValueError(
            f"validation_fraction must lie in [0, 0.5) (a held-out share of the training rows), got {fraction}")
    return fraction


def check_patience(value, *, allow_auto: bool = False) -> int | str:
    """``patience``: epochs without a better held-out NLL before a unit stops (>= 1), or "auto"
    where the estimator counts it in steps (`resolve_budget`)."""
    if allow_auto and isinstance(value, str) and value == "auto":
        return value
    return check_int(value, "patience", min_value=1)


def check_epochs(value, *, allow_auto: bool = False) -> int | str:
    """``epochs``: the epoch cap (>= 1), or "auto" where the estimator counts it in steps."""
    if allow_auto and isinstance(value, str) and value == "auto":
        return value
    return check_int(value, "epochs", min_value=1)


def steps_per_epoch(n_rows: int, batch_size: int) -> int:
    """Optimiser steps in one epoch: ceil(n_rows / batch_size), the last batch possibly smaller."""
    return max(1, math.ceil(n_rows / max(1, min(batch_size, n_rows))))


def resolve_budget(patience, epochs, n_rows: int, batch_size: int, *, held_out: bool) -> tuple[int, int]:
    """(patience, epochs) in epochs, with "auto" counted in optimiser steps as well.

    patience "auto" = max(DEFAULT_PATIENCE, ceil(AUTO_PATIENCE_STEPS / s)); epochs "auto" =
    max(DEFAULT_EPOCHS, ceil(AUTO_CAP_STEPS / s)) with held-out rows, DEFAULT_EPOCHS without (no
    rule would stop a fixed-length fit), where s = `steps_per_epoch` (n_rows, batch_size).
    Integers pass through.
    """
    steps = steps_per_epoch(n_rows, batch_size)
    if patience == "auto":
        patience = max(DEFAULT_PATIENCE, math.ceil(AUTO_PATIENCE_STEPS / steps))
    if epochs == "auto":
        epochs = max(DEFAULT_EPOCHS, math.ceil(AUTO_CAP_STEPS / steps)) if held_out else DEFAULT_EPOCHS
    return int(patience), int(epochs)


def holdout_split(n: int, fraction: float, seed: int, *, batch_size: int | None = None,
                  classes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train_rows, validation_rows) of ``n`` rows, ceil(fraction * n) held out.

    The rows are a uniform draw from ``numpy.random.default_rng([seed, _HOLDOUT_STREAM])``.
    With ``classes`` (integer labels, (n,)) the draw is stratified: each class gives
    ceil(fraction * n_c) rows, and every class must keep one training row. ``fraction = 0``
    returns (all rows, no rows). Refused with one ValueError: a held-out share that leaves
    fewer training rows than ``batch_size``, or a class with a single row.
    """
    rows = np.arange(n)
    if fraction == 0:
        return rows, rows[:0]
    rng = np.random.default_rng([int(seed) % 2**63, _HOLDOUT_STREAM])
    if classes is None:
        held = rng.permutation(n)[: math.ceil(fraction * n)]
    else:
        classes = np.asarray(classes)
        labels, counts = np.unique(classes, return_counts=True)
        single = labels[counts < 2]
        if single.size:
            raise ValueError(
                f"validation_fraction={fraction} needs at least 2 rows of every class (one to train on, one to "
                f"hold out); class(es) {single.tolist()} have 1: set validation_fraction=0 or add rows")
        held = np.concatenate([
            rng.permutation(np.flatnonzero(classes == c))[: min(math.ceil(fraction * k), k - 1)]
            for c, k in zip(labels, counts)
        ])
    mask = np.zeros(n, dtype=bool)
    mask[held] = True
    n_train = n - int(mask.sum())
    if batch_size is not None and n_train < batch_size:
        raise ValueError(
            f"validation_fraction={fraction} holds out {int(mask.sum())} of {n} rows and leaves {n_train} to train "
            f"on, fewer than batch_size={batch_size}: lower batch_size or validation_fraction (0 trains on every row)")
    return rows[~mask], rows[mask]


def check_training_target(y_train: np.ndarray, fraction: float, min_samples: int) -> None:
    """Refuse (one ValueError) a held-out draw that leaves fewer than ``min_samples`` training rows
    or a constant y on them: the target is standardised by its sd on the rows trained on."""
    if y_train.size < min_samples or np.ptp(y_train) == 0:
        raise ValueError(f"validation_fraction={fraction} leaves {y_train.size} training row(s) with "
                         f"{len(np.unique(y_train))} distinct y value(s); at least {min_samples} rows and a "
                         "non-constant y are needed: lower validation_fraction or add rows")


def regression_holdout(y: np.ndarray, fraction: float, seed: int, *, min_samples: int,
                       batch_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(train_rows, validation_rows) of a regression target ``y`` (`holdout_split`), refusing a draw
    that leaves too few training rows or a constant target on them (`check_training_target`)."""
    train_rows, val_rows = holdout_split(len(y), fraction, seed, batch_size=batch_size)
    check_training_target(y[train_rows], fraction, min_samples)
    return train_rows, val_rows


class EarlyStopping:
    """Best held-out loss per unit, and when to stop.

    ``update(losses)`` takes the epoch's held-out losses, one per unit, and returns the mask of
    the units that improved (loss < best - ``min_delta``; NaN never improves): the caller keeps
    those units' weights (`copy_best_members`). A unit is done after ``patience`` epochs without
    improving; ``done`` is True when every unit is. ``best_epoch`` counts epochs from 1.
    """

    def __init__(self, patience: int, n_units: int = 1, min_delta: float = 0.0):
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.best_loss = np.full(n_units, np.inf)
        self.best_epoch = np.zeros(n_units, dtype=np.int64)
        self.bad_epochs = np.zeros(n_units, dtype=np.int64)
        self.curve: list[list[float]] = []

    def update(self, losses) -> np.ndarray:
        losses = np.asarray(losses, dtype=np.float64).reshape(-1)
        if losses.shape != self.best_loss.shape:
            raise ValueError(f"expected {self.best_loss.size} held-out losses, got {losses.size}")
        self.curve.append(losses.tolist())
        improved = losses < self.best_loss - self.min_delta  # False for NaN
        self.best_loss[improved] = losses[improved]
        self.best_epoch[improved] = len(self.curve)
        self.bad_epochs = np.where(improved, 0, self.bad_epochs + 1)
        return improved

    @property
    def done(self) -> bool:
        return bool(np.all(self.out_of_patience))

    @property
    def out_of_patience(self) -> np.ndarray:
        """Mask of the units that have gone ``patience`` epochs without improving."""
        return self.bad_epochs >= self.patience

    def reset_patience(self, units) -> None:
        """Start the count of epochs without improvement again for the ``units`` (a mask; a
        learning-rate drop on a plateau); their best losses stay, so they keep only what beats them."""
        self.bad_epochs = np.where(np.asarray(units, dtype=bool), 0, self.bad_epochs)

    def state(self) -> dict:
        """JSON-able state, to resume from a training checkpoint (`from_state`)."""
        return dict(patience=self.patience, min_delta=self.min_delta, best_loss=self.best_loss.tolist(),
                    best_epoch=self.best_epoch.tolist(), bad_epochs=self.bad_epochs.tolist(), curve=self.curve)

    def restore(self, state: dict) -> None:
        """Continue from a `state` (a resumed training checkpoint)."""
        self.patience, self.min_delta = int(state["patience"]), float(state["min_delta"])
        self.best_loss = np.asarray(state["best_loss"], dtype=np.float64)
        self.best_epoch = np.asarray(state["best_epoch"], dtype=np.int64)
        self.bad_epochs = np.asarray(state["bad_epochs"], dtype=np.int64)
        self.curve = [list(map(float, row)) for row in state["curve"]]

    @classmethod
    def from_state(cls, state: dict) -> EarlyStopping:
        stopper = cls(state["patience"], len(state["best_loss"]), state["min_delta"])
        stopper.restore(state)
        return stopper


def copy_best_members(best: torch.nn.Module, net: torch.nn.Module, improved: np.ndarray) -> None:
    """Copy into ``best`` the weights of the units of ``net`` that improved.

    One unit (``improved`` of size 1): every parameter and buffer. Several: the modules hold the
    units stacked on each tensor's first axis (`dubito.nn.batched`), and rows ``improved`` are
    copied. ``best`` starts as ``copy.deepcopy(net)`` (`best_copy`).
    """
    improved = np.asarray(improved, dtype=bool)
    if not improved.any():
        return
    with torch.no_grad():
        for (name, b), t in zip(best.state_dict(keep_vars=True).items(), net.state_dict(keep_vars=True).values()):
            if improved.size == 1:
                b.copy_(t)
            elif t.dim() == 0 or t.shape[0] != improved.size:
                raise ValueError(f"{name} has shape {tuple(t.shape)}: no leading axis of {improved.size} units")
            else:
                rows = torch.as_tensor(improved, device=t.device)
                b[rows] = t[rows]


def best_copy(net: torch.nn.Module) -> torch.nn.Module:
    """A detached copy of ``net`` to hold the best weights (`copy_best_members`)."""
    return copy.deepcopy(net)
