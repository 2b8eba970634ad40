"""The epoch loop of `HyperVIRegressor`: Adam steps, the plateau schedule, held-out early stopping,
the training checkpoint and resuming from it (module docstring of `dubito.regression.hyper_vi`,
"Optimisation" and "Validated fitting").

`train` runs the loop, or resumes it from the checkpoint in ``checkpoint_dir``, on the state that
``HyperVIRegressor._prepare`` built, to its end: the held-out rule (``patience``), the schedule's
end (the first epoch run at lr <= ``min_lr``) or ``max_epochs``. An epoch is the estimator's
``_train_epoch`` (every minibatch step), scored by its ``_heldout_nll``; `dubito.training_loop.run_epochs`
keeps the best epoch and `dubito.training_checkpoint` writes the checkpoint atomically.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from dubito.early_stopping import EarlyStopping, copy_best_members
from dubito.regression.hyper_vi_objective import min_nn_distance
from dubito.training_checkpoint import estimator_settings, load_training, save_training
from dubito.training_loop import run_epochs

__all__ = ["restore_best", "train"]

#: The class name recorded in a training checkpoint (`dubito.training_checkpoint`).
_CHECKPOINT_KIND = "HyperVITrainingCheckpoint"


def train(est, state: dict, X, y, resume: bool):
    """Train ``est`` (a `HyperVIRegressor`) from the ``state`` of its ``_prepare(X, y)`` to the end of
    the loop, from its checkpoint when ``resume`` and one exists (a finished one: no more epochs).
    Returns (stopped_by, curves, stopper, t0): what ended it, the per-epoch ``losses``, ``lrs`` and
    ``min_r`` (the collapse monitor), the `EarlyStopping` (None without held-out rows) and the
    ``time.perf_counter()`` the run counts from (earlier by the seconds of an interrupted run)."""
    s = state["settings"]
    ckpt = _checkpoint(est, state, X, y)
    start, record = 0, {"losses": [], "lrs": [], "min_r": [], "finished": False, "seconds": 0.0}
    if resume and ckpt["path"].is_file():
        start, record = load_training(ckpt["path"], _CHECKPOINT_KIND, ckpt["settings"], **ckpt["parts"])
    curves = {"losses": list(record["losses"]), "lrs": list(record["lrs"]), "min_r": list(record["min_r"])}
    t0 = time.perf_counter() - float(record.get("seconds", 0.0))
    stopper = None
    if state["validation"] is not None:
        stopper = EarlyStopping(s["patience"])
        if record.get("stopper"):
            stopper.restore(record["stopper"])
    if record["finished"]:  # a finished checkpoint: no more training
        stopped_by = record["stopped_by"]
        restore_best(state)
    else:
        stopped_by = _run(est, state, ckpt, stopper, start, curves, t0)
    return stopped_by, curves, stopper, t0


def _run(est, state: dict, ckpt: dict, stopper, start: int, curves: dict, t0: float) -> str:
    """The epoch loop (`run_epochs`) from epoch ``start``: Adam steps, the plateau schedule, the
    held-out NLL, checkpoints; extends ``curves`` in place; returns what ended it."""
    s, opt, sched, objective = state["settings"], state["optimizer"], state["scheduler"], state["objective"]
    losses, lrs, min_r = curves["losses"], curves["lrs"], curves["min_r"]

    def train_epoch(epoch: int) -> float:
        lrs.append(float(opt.param_groups[0]["lr"]))
        loss = est._train_epoch(state)
        min_r.append(min_nn_distance(objective.last_q))
        sched.step(loss)
        return loss

    def after_epoch(epoch: int, stopper, curve: np.ndarray) -> None:
        losses[:] = curve.tolist()
        by = ("patience" if stopper is not None and stopper.done else
              "min_lr" if lrs[-1] <= s["min_lr"] * (1 + 1e-9) else
              "cap" if epoch + 1 == s["max_epochs"] else None)
        if ckpt["path"] is not None and ((epoch + 1) % s["checkpoint_every"] == 0 or by is not None):
            record = {"losses": losses, "lrs": lrs, "min_r": min_r, "finished": by is not None, "stopped_by": by,
                      "stopper": None if stopper is None else stopper.state(),
                      "seconds": time.perf_counter() - t0}
            save_training(ckpt["path"], _CHECKPOINT_KIND, ckpt["settings"], epoch=epoch + 1, record=record,
                          **ckpt["parts"])

    def stop_reason(epoch: int) -> str | None:  # the schedule's own end: the first epoch run at lr <= min_lr
        return "min_lr" if lrs[-1] <= s["min_lr"] * (1 + 1e-9) else None

    validated = state["validation"] is not None
    record = run_epochs(
        train_epoch, epochs=s["max_epochs"], description=est._method_name(s), progress=est.progress,
        validate=(lambda: [est._heldout_nll(state)]) if validated else None, patience=s["patience"],
        keep_best=(lambda improved: copy_best_members(state["best"], state["trainable"], improved))
        if validated else None,
        restore_best=(lambda: restore_best(state)) if validated else None,
        stopper=stopper, start_epoch=start, loss_curve=losses, after_epoch=after_epoch, stop_reason=stop_reason)
    losses[:] = record.loss_curve.tolist()
    return record.stopped_by


def restore_best(state: dict) -> None:
    """q (and a learned σ_l) back to the best held-out epoch; nothing without a held-out share."""
    if state["best"] is not None:
        state["trainable"].load_state_dict(state["best"].state_dict())


def _checkpoint(est, state: dict, X, y) -> dict:
    """Where the training checkpoint goes (None without ``checkpoint_dir``), the settings that
    must match to resume (every constructor setting but the progress bar and the checkpoint's
    own, and a digest of the data) and the stateful parts of the loop."""
    modules = {"family": state["objective"].family}
    if "noise_scale" in state["trainable"]:
        modules["noise_scale"] = state["trainable"]["noise_scale"]
    if state["best"] is not None:
        modules["best"] = state["best"]
    parts = {"modules": modules, "optimizer": state["optimizer"], "scheduler": state["scheduler"],
             "generators": {"order": state["order"], "noise": state["noise"]}}
    if est.checkpoint_dir is None:
        return {"path": None, "settings": None, "parts": parts}
    settings = estimator_settings(est, X, y)
    settings["ood_box"] = None if est.ood_box is None else [est.ood_box_.low.tolist(), est.ood_box_.high.tolist()]
    return {"path": Path(est.checkpoint_dir) / "hyper_vi.safetensors", "settings": settings, "parts": parts}
