"""Training the members of `DeepEnsembleRegressor` together (Algorithm 1, step 1, of Hoffmann & Elster).

`train_members` trains L heteroscedastic networks stacked in one `BatchedGaussianMLP` with one Adam
over all parameters, the loss summed over members: Adam and coupled L2 act elementwise, so this is
exactly L independent trainings. Member l draws its initialisation and mini-batch order from its own
generator (`member_generators`), may stop early on its own held-out NLL (`dubito.early_stopping`),
and the run can be checkpointed and resumed (`MemberCheckpoint`, `dubito.training_checkpoint`). The
learning rate follows one of the `LR_DROPS` schedules over the last epochs (`lr_factor`), or drops
to a tenth once every member's held-out NLL has reached a plateau ("plateau").
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from dubito._estimator import seeds_from
from dubito.early_stopping import EarlyStopping, best_copy, copy_best_members
from dubito.graphed_steps import GraphedSteps, prepare_optimizer, reset_optimizer_state, set_learning_rate
from dubito.nn.batched import BatchedGaussianMLP, gaussian_nll, member_permutations
from dubito.training_checkpoint import load_training, save_training
from dubito.training_loop import NAIVE_GAUSSIAN_NLL, run_epochs

__all__ = ["DROP_EPOCHS", "LR_DROPS", "MemberCheckpoint", "lr_factor", "member_generators", "train_members"]

#: Learning-rate schedules (spec pitfall P11), each over the last ``DROP_EPOCHS`` epochs:
#: "halving"         x0.5 in each of the last 5 epochs, cumulative (x0.5 ... x0.03125):
#:                   the paper's real-data schedule (Sec. 4.2 / Table 1).
#: "step"            one x0.1 drop for the last 5 epochs: the paper's toy schedule
#:                   ("drop factor 0.1 for the last five epochs", Sec. 4.1).
#: "step_cumulative" x0.1 in each of the last 5 epochs, cumulative: the other reading of
#:                   the toy sentence (P11).
#: "none"            constant learning rate.
#: "plateau"         on held-out rows: when every member has gone ``patience`` epochs without
#:                   a better held-out NLL, all get their best weights back and go on from a
#:                   fresh Adam at ``PLATEAU_FACTOR`` times the rate, at most ``PLATEAU_DROPS``
#:                   times; then training ends. Constant without held-out rows.
LR_DROPS = ("halving", "step", "step_cumulative", "none", "plateau")
DROP_EPOCHS = 5
#: Keras' ``ReduceLROnPlateau`` factor; one drop (docs/results/ensemble-budget.md, session 21).
PLATEAU_FACTOR = 0.1
PLATEAU_DROPS = 1

#: The class name recorded in a training checkpoint (`dubito.training_checkpoint`).
_CHECKPOINT_KIND = "DeepEnsembleTrainingCheckpoint"


def lr_factor(epoch: int, epochs: int, schedule: str) -> float:
    """Multiplier of the base learning rate in ``epoch`` (0-based) of ``epochs``.

    The drop covers the last ``min(5, epochs - 1)`` epochs (so a run always starts at the
    base rate); the k-th dropped epoch (k = 1, 2, ...) gets 0.5^k ("halving"), 0.1 ("step")
    or 0.1^k ("step_cumulative").
    """
    if schedule not in LR_DROPS:
        raise ValueError(f"lr_drop must be one of {list(LR_DROPS)}, got {schedule!r}")
    n_drop = min(DROP_EPOCHS, epochs - 1)
    k = epoch - (epochs - n_drop) + 1  # 1 in the first dropped epoch
    if schedule in ("none", "plateau") or k < 1:
        return 1.0
    if schedule == "halving":
        return 0.5**k
    if schedule == "step":
        return 0.1
    return 0.1**k  # step_cumulative


def member_generators(random_state, n_members: int) -> list[torch.Generator]:
    """One CPU ``torch.Generator`` per member, member l's seed a function of (seed, l) only.

    ``random_state``: None, an int, or a ``numpy.random.RandomState`` (scikit-learn's
    convention). Because member l's stream does not depend on ``n_members``, the first k
    members of an L-member fit are the members of a k-member fit with the same int seed.
    """
    return [torch.Generator().manual_seed(seed) for seed in seeds_from(random_state, n_members)]


class MemberCheckpoint(NamedTuple):
    """Where and when `train_members` saves its state (`dubito.training_checkpoint`): the
    ``.safetensors`` ``path``, the ``settings`` a resumed run must match, every ``every``
    epochs (and after the last), and whether to ``resume`` from ``path`` when it exists."""

    path: Path
    settings: dict
    every: int
    resume: bool = False


def train_members(
    net: BatchedGaussianMLP,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    generators,
    lr: float,
    weight_decay: float,
    batch_size: int,
    epochs: int,
    lr_drop: str,
    progress: bool = False,
    description: str = "deep ensemble",
    checkpoint: MemberCheckpoint | None = None,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    stopper: EarlyStopping | None = None,
) -> np.ndarray:
    """Train all members of ``net`` together; returns the epoch-mean NLL per member, (epochs run, L).

    Each epoch every member draws its own permutation of the rows from its own generator and
    walks through it in mini-batches of ``batch_size`` (the last one may be smaller). The
    step minimises sum_l mean_{i in batch_l} l_i(theta_l) with one
    ``torch.optim.Adam(weight_decay=weight_decay)`` (coupled L2) over all stacked parameters.

    With ``validation`` = (X_val, y_val) and a ``stopper`` (`dubito.early_stopping`), each
    member's held-out NLL (`gaussian_nll`) is scored after every epoch, each member keeps the
    weights of its best epoch, training ends when every member has gone ``stopper.patience``
    epochs without improving (or at ``epochs``), and ``net`` ends with each member's best
    weights. Member l's rows, order and stopping depend only on its own stream, as without it.
    With ``lr_drop="plateau"``, when every member is out of patience they all get their best
    weights back and go on from a fresh Adam at ``PLATEAU_FACTOR`` times the learning rate, up to
    ``PLATEAU_DROPS`` times: the drop's epoch depends on every member, so the first k members of
    an ensemble are no longer a k-member ensemble.

    With a ``checkpoint`` the weights (and the best weights), Adam's state, the members'
    generators, the curves, the stopper and the plateau drops so far are saved atomically every ``checkpoint.every``
    epochs and at the end; ``checkpoint.resume`` restores them first, so the run ends where an
    uninterrupted one would.
    """
    n = X.shape[0]
    L = net.n_members
    if (validation is None) != (stopper is None):
        raise ValueError("train_members needs both validation rows and a stopper, or neither")
    opt = prepare_optimizer(torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay), X.device)
    curve: list[np.ndarray] = []  # epoch-mean NLL per member, (L,) per epoch
    modules = {"net": net}
    validate = keep_best = restore_best = None
    if stopper is not None:
        modules["best"] = best = best_copy(net)  # in the checkpoint: a resumed run keeps the best weights

        def keep_best(improved):
            copy_best_members(best, net, improved)

        def restore_best():
            net.load_state_dict(best.state_dict())

        @torch.no_grad()
        def validate():
            mean, var, _ = net(validation[0])
            return gaussian_nll(mean, var, validation[1]).double().cpu().numpy()

    drops = [0]  # learning-rate drops on a plateau ("plateau")
    on_plateau = None
    if lr_drop == "plateau" and stopper is not None:

        def on_plateau(out: np.ndarray) -> np.ndarray:
            if not out.all() or drops[0] >= PLATEAU_DROPS:
                return np.zeros_like(out)
            net.load_state_dict(best.state_dict())  # every member's best weights come back
            reset_optimizer_state(opt)
            drops[0] += 1
            return np.ones_like(out)

    parts = dict(modules=modules, optimizer=opt, generators={f"member{l}": g for l, g in enumerate(generators)})
    start = 0
    if checkpoint is not None and checkpoint.resume and checkpoint.path.is_file():
        start, record = load_training(checkpoint.path, _CHECKPOINT_KIND, checkpoint.settings, **parts)
        curve = list(np.asarray(record["curve"], dtype=np.float64).reshape(start, L))
        if stopper is not None:
            stopper.restore(record["stopper"])
        drops[0] = int(record.get("lr_drops", 0))
        prepare_optimizer(opt, X.device)  # the file holds the learning rate as a number

    def step(idx: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        mean, var, _ = net(X[idx])
        per_member = gaussian_nll(mean, var, y[idx])  # (L,)
        per_member.sum().backward()
        opt.step()
        return per_member.detach()

    run_step = GraphedSteps(step, device=X.device)

    def train_epoch(epoch: int) -> float:
        set_learning_rate(opt, lr * lr_factor(epoch, epochs, lr_drop) * PLATEAU_FACTOR ** drops[0])
        perms = member_permutations(n, generators, device=X.device)
        total = torch.zeros(L, dtype=torch.float64, device=X.device)
        for first in range(0, n, batch_size):
            idx = perms[:, first : first + batch_size]  # (L, b): member l's rows
            total += run_step(idx).double() * idx.shape[1]
        curve.append((total / n).cpu().numpy())
        return float(curve[-1].mean())

    def after_epoch(epoch: int, stopper: EarlyStopping | None, _) -> None:
        done = stopper is not None and stopper.done
        if checkpoint is not None and ((epoch + 1) % checkpoint.every == 0 or epoch + 1 == epochs or done):
            record = {"curve": np.asarray(curve).tolist()}
            if stopper is not None:
                record["stopper"] = stopper.state()
            if on_plateau is not None:
                record["lr_drops"] = drops[0]
            save_training(checkpoint.path, _CHECKPOINT_KIND, checkpoint.settings, epoch=epoch + 1,
                          record=record, **parts)

    net.train()
    run_epochs(train_epoch, epochs=epochs, description=f"{description} (L={L})", progress=progress,
               validate=validate, n_units=L, keep_best=keep_best, restore_best=restore_best, stopper=stopper,
               start_epoch=start, loss_curve=[c.mean() for c in curve], after_epoch=after_epoch, lr=lr,
               naive_loss=NAIVE_GAUSSIAN_NLL, on_plateau=on_plateau)
    net.eval()
    return np.asarray(curve, dtype=np.float64).reshape(-1, L)
