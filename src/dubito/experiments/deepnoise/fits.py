"""Method -> fitted estimator with the cell's settings (B-DeepNoise, its paper-code protocol, DeepNoise-SGD, BP/DE, VI, BNN, DMC)."""

from __future__ import annotations

import math
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np

import dubito.regression.deepnoise as dn
from dubito.experiments.base import Cell
from dubito.experiments.deepnoise.data import _Data
from dubito.experiments.deepnoise.vocab import DMC_GRID, DMC_VALIDATION
from dubito.methods import build
from dubito.metrics import nll
from dubito.regression.deepnoise import SGD_FOLDS

# ---------------------------------------------------------------------------------- methods


def _epochs(n: int, s: Mapping[str, Any]) -> int:
    """Epochs from a step budget: max(min_epochs, ceil(min_steps / batches per epoch)), at most
    max_epochs (``epochs`` in the settings wins when given)."""
    if s.get("epochs"):
        return int(s["epochs"])
    per_epoch = math.ceil(n / int(s["batch_size"]))
    e = max(int(s.get("min_epochs", 1)), math.ceil(int(s.get("min_steps", 0)) / per_epoch))
    return int(min(e, int(s.get("max_epochs", 10**9))))


def _arch(s: Mapping[str, Any]) -> dict:
    return dict(hidden=tuple(int(h) for h in s["hidden"]), activation=str(s["activation"]))


def _fit_ensemble(method: str, **members):
    """BP (``mean-variance``: one member) and DE (``ensemble-standard``: 5 members), no correction."""
    def fit(d: _Data, s: dict, device: str, progress: bool, seed: int):

        epochs = _epochs(len(d.y_tr), s)
        est = build(method, **members, **_arch(s), lr=float(s["lr"]), weight_decay=float(s["weight_decay"]),
                    batch_size=int(s["batch_size"]), epochs=epochs, lr_drop="none", validation_fraction=0.0,
                    device=device, random_state=seed, progress=progress).fit(d.X_tr, d.y_tr)
        return est, dict(epochs=epochs, final_train_nll=[float(v) for v in est.loss_curve_[-1]])
    return fit


def _fit_vi(d: _Data, s: dict, device: str, progress: bool, seed: int):

    epochs = _epochs(len(d.y_tr), s)
    est = build("mfvi", **_arch(s), prior_sd=float(s["prior_sd"]), n_samples=int(s["n_samples"]), epochs=epochs,
                lr=float(s["lr"]), batch_size=int(s["batch_size"]), validation_fraction=0.0, device=device,
                random_state=seed, progress=progress).fit(d.X_tr, d.y_tr)
    return est, dict(epochs=epochs)


def _fit_bnn(d: _Data, s: dict, device: str, progress: bool, seed: int):

    extra = {"max_tree_depth": int(s["max_tree_depth"])} if s.get("max_tree_depth") else {}
    est = build("nuts", **_arch(s), num_warmup=int(s["num_warmup"]), num_samples=int(s["num_samples"]),
                num_chains=int(s["num_chains"]), prior_sd=float(s["prior_sd"]), random_state=seed, device=device,
                progress=progress, **extra).fit(d.X_tr, d.y_tr)
    return est, dict(diagnostics=_plain(getattr(est, "diagnostics_", {})))


def _fit_dmc(d: _Data, s: dict, device: str, progress: bool, seed: int):
    """p from `DMC_GRID` by the NLL on a held-out share of the training rows, then a refit."""

    grid = tuple(float(p) for p in s.get("grid", DMC_GRID))

    def make(p, n):
        return build("mc-dropout", dropout=p, n_samples=int(s["n_samples"]), noise="residual", **_arch(s),
                     lr=float(s["lr"]), weight_decay=float(s["weight_decay"]), batch_size=int(s["batch_size"]),
                     epochs=_epochs(n, s), validation_fraction=0.0, device=device, random_state=seed,
                     progress=progress)

    scores = {}
    if len(grid) > 1:
        rng = np.random.default_rng([seed, 11])
        n = len(d.y_tr)
        val = np.zeros(n, dtype=bool)
        val[rng.choice(n, size=max(2, int(round(DMC_VALIDATION * n))), replace=False)] = True
        for p in grid:
            est = make(p, int((~val).sum())).fit(d.X_tr[~val], d.y_tr[~val])
            scores[p] = float(np.mean(nll(est.predict_distribution(d.X_tr[val]), d.y_tr[val])))
        best = min(grid, key=lambda p: scores[p])
    else:
        best = grid[0]
    est = make(best, len(d.y_tr)).fit(d.X_tr, d.y_tr)
    return est, dict(dropout=best, validation_nll={str(k): v for k, v in scores.items()},
                     epochs=_epochs(len(d.y_tr), s))


def _checkpoint_dir(cell: Cell) -> Path | None:
    """Where a long Gibbs cell checkpoints (``checkpoint_every`` in its settings), so that a cell
    interrupted and run again resumes its chains: ``$DUBITO_CACHE`` (or ~/.cache/dubito)
    ``/deepnoise-checkpoints/<preset>/<dataset>/<method>/split<k>-seed<s>``."""
    if not cell.settings.get("checkpoint_every"):
        return None
    root = Path(os.environ.get("DUBITO_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dubito")
    return root / "deepnoise-checkpoints" / cell.preset / cell.dataset / cell.method / f"split{cell.split}-seed{cell.seed}"


def _sgd_epochs(n: int, s: Mapping[str, Any]) -> int:
    """Epochs of the SGD inits: ``sgd_epochs``, or ``sgd_steps`` Adam steps turned into epochs of
    the training fold each chain's SGD net sees (4/5 of the rows: `DeepNoiseRegressor`'s 5-fold
    split, [C]) in batches of `DeepNoiseSGDRegressor`'s default 1,000 rows. A step costs the same
    at every N, so a step budget keeps the init's cost flat in N (at N = 1000 one epoch is one step)."""
    if s.get("sgd_steps"):

        rows = math.ceil(n * (SGD_FOLDS - 1) / SGD_FOLDS)
        return max(1, math.ceil(int(s["sgd_steps"]) / math.ceil(rows / 1000)))
    return int(s["sgd_epochs"])


def _fit_deepnoise(paper_code: bool):
    def fit(d: _Data, s: dict, device: str, progress: bool, seed: int, checkpoint: Path | None = None):

        kw = dict(_arch(s), sgd_epochs=_sgd_epochs(len(d.y_tr), s), n_jobs=int(s.get("n_jobs", 1)),
                  random_state=seed, device=device, progress=progress)
        if paper_code:
            kw = {**dict(dn.PAPER_CODE_SETTINGS), **kw}
            for key in ("n_chains", "n_keep", "n_realizations"):
                if key in s:
                    kw[key] = s[key]
        else:
            kw.update(n_chains=int(s["n_chains"]), n_burnin=int(s["n_burnin"]), n_keep=int(s["n_keep"]),
                      thin=int(s["thin"]), init=str(s.get("init", "sgd")), n_realizations=int(s["n_realizations"]),
                      latent_batch_size=s.get("latent_batch_size"))
        resume = False
        if checkpoint is not None:
            kw.update(checkpoint_dir=str(checkpoint), checkpoint_every=int(s["checkpoint_every"]))
            resume = checkpoint.is_dir() and any(checkpoint.iterdir())
        est = build("deepnoise", **kw)
        if resume:
            try:
                est.fit(d.X_tr, d.y_tr, resume=True)
            except ValueError as exc:  # a checkpoint of other settings or code: start afresh
                warnings.warn(f"B-DeepNoise: checkpoint in {checkpoint} not resumable ({exc}); starting afresh",
                              RuntimeWarning, stacklevel=2)
                shutil.rmtree(checkpoint, ignore_errors=True)
                resume = False
                est = build("deepnoise", **kw).fit(d.X_tr, d.y_tr)
        else:
            est.fit(d.X_tr, d.y_tr)
        info = dict(settings_used={k: v for k, v in kw.items() if k not in ("progress", "device")},
                    resumed=bool(resume), diagnostics=_plain(getattr(est, "diagnostics_", {})))
        return est, info
    return fit


def _fit_sgd(d: _Data, s: dict, device: str, progress: bool, seed: int):

    est = build("deepnoise-sgd", **_arch(s), n_noise_samples=int(s["n_noise_samples"]), lr=float(s["lr"]),
                batch_size=int(s["batch_size"]), epochs=int(s["epochs"]), random_state=seed, validation_fraction=0.0,
                device=device, progress=progress).fit(d.X_tr, d.y_tr)
    return est, dict(epochs=int(s["epochs"]))


#: method (its `dubito.methods` name; ``deepnoise-paper-code`` is B-DeepNoise with the authors' protocol)
#: -> fit
_FITS = {
    "deepnoise": _fit_deepnoise(False),
    "deepnoise-paper-code": _fit_deepnoise(True),
    "deepnoise-sgd": _fit_sgd,
    "mean-variance": _fit_ensemble("mean-variance"),
    "ensemble-standard": _fit_ensemble("ensemble-standard", n_members=5),
    "mfvi": _fit_vi,
    "nuts": _fit_bnn,
    "mc-dropout": _fit_dmc,
}


def _predict(est, X: np.ndarray, method: str, n_realizations: int | None):
    if method.startswith("deepnoise") and method != "deepnoise-sgd" and n_realizations:
        return est.predict_distribution(X, n_realizations=int(n_realizations))
    return est.predict_distribution(X)


def _plain(value: Any) -> Any:
    """A JSON-able copy (arrays -> lists, tensors -> lists, others -> str)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return str(value)
