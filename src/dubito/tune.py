r"""Hyper-parameters chosen by held-out NLL, with Optuna: `tune(estimator, X, y)`.

Protocol (never the test split):

1. A share ``tuning_fraction`` (default 0.2) of the rows given is held out, seeded by
   ``random_state`` (stratified by class for a classifier; `dubito.early_stopping.holdout_split`).
2. Each trial draws the parameters of the estimator's declared ``search_space`` (or ``space``;
   `dubito.search_space`) with Optuna's TPE sampler, fits a clone on the other rows (the
   estimator still holds out its own ``validation_fraction`` of them to stop early), and
   scores the mean negative log-likelihood of the held-out rows,
   -(1/m) sum_j log p(y_j | x_j) (user units; for a classifier `metrics.classification.nll`).
   A fit that raises or scores a non-finite NLL is a failed trial, not an error.
3. The best trial's parameters are refitted on *all* the rows given (train + tuning rows):
   the parameters do not depend much on 20 % more rows, and the rows are worth more to the
   model than to a held-out score; the refit keeps its own early-stopping share.

Seeded and resumable: the sampler of the k-th counted trial is seeded by (``random_state``, k),
so a study's suggestions depend only on its history; with ``storage`` (an SQLite file or an
SQLAlchemy URL) every finished trial is stored as it ends, and a second call with the same
storage resumes: trials left running by an interrupted process are marked failed and not
counted, and the study finishes with the same choice as an uninterrupted one (the fits are
seeded too). A stored study of another estimator, space or data is refused.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from sklearn.base import clone, is_classifier
from sklearn.utils import _safe_indexing

from dubito import io
from dubito._validation import check_bool, check_float, check_int
from dubito.early_stopping import holdout_split
from dubito.metrics.classification import nll
from dubito.search_space import Choice, Float, Int, check_space
from dubito.training_checkpoint import data_digest, settings_difference

__all__ = ["TuneResult", "tune"]

#: Default number of trials: Optuna's TPE starts with 10 random ones (n_startup_trials), so 20
#: gives it 10 guided ones.
DEFAULT_TRIALS = 20

#: Default held-out share of the rows given to `tune` (the usual 80/20 split).
DEFAULT_TUNING_FRACTION = 0.2


@dataclass
class TuneResult:
    """What `tune` found: ``estimator`` (refitted on all rows with ``best_params``),
    ``best_score`` (its trial's held-out NLL per row), every trial as a dict (number, state,
    params, nll, seconds, error), and where the study lives."""

    estimator: Any
    best_params: dict
    best_score: float
    trials: list[dict] = field(default_factory=list)
    study_name: str = ""
    storage: str | None = None


def _storage_url(storage) -> str | None:
    if storage is None:
        return None
    text = str(storage)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _space_json(space: dict) -> dict:
    out = {}
    for name, dim in space.items():
        if isinstance(dim, Choice):
            out[name] = {"choice": [Choice.label(o) for o in dim.options]}
        else:
            out[name] = {type(dim).__name__.lower(): [dim.low, dim.high], "log": dim.log}
    return out


def _suggest(trial, space: dict) -> dict:
    params = {}
    for name, dim in space.items():
        if isinstance(dim, Float):
            params[name] = trial.suggest_float(name, dim.low, dim.high, log=dim.log)
        elif isinstance(dim, Int):
            params[name] = trial.suggest_int(name, dim.low, dim.high, log=dim.log)
        else:
            params[name] = dim.value(trial.suggest_categorical(name, [Choice.label(o) for o in dim.options]))
    return params


def _decoded(params: dict, space: dict) -> dict:
    """A stored trial's parameters with Choice labels turned back into their options."""
    return {k: space[k].value(v) if isinstance(space[k], Choice) else v for k, v in params.items()}


def _held_out_nll(model, X, y) -> float:
    pred = model.predict_distribution(X)
    if is_classifier(model):

        return float(nll(pred, y))
    return float(-np.mean(pred.log_prob(np.asarray(y, dtype=np.float64))))


def _counted(trial) -> bool:
    """A trial that counts towards ``n_trials``: finished, or failed by its own fit (not left
    running by an interrupted process)."""

    return trial.state == TrialState.COMPLETE or (trial.state == TrialState.FAIL and "error" in trial.user_attrs)


def tune(estimator, X, y, *, space: dict | None = None, n_trials: int = DEFAULT_TRIALS,
         tuning_fraction: float = DEFAULT_TUNING_FRACTION, storage=None, study_name: str | None = None,
         random_state: int = 0, progress: bool = True) -> TuneResult:
    """Choose the estimator's hyper-parameters by held-out NLL and refit (module docstring).

    ``estimator``: an unfitted dubito estimator (its other settings are kept); ``space``: None
    (its ``search_space``) or a dict parameter -> `Float` / `Int` / `Choice`; ``n_trials``:
    trials to count in the study (a resumed study runs only those missing); ``storage``: None
    (in memory) or an SQLite path / SQLAlchemy URL to keep and resume the study;
    ``random_state``: seeds the held-out rows, the sampler and, where the estimator's own
    ``random_state`` is None, its fits.
    """

    space = check_space(estimator, space)
    n_trials = check_int(n_trials, "n_trials", min_value=1)
    tuning_fraction = check_float(tuning_fraction, "tuning_fraction", min_value=0.0)
    if not 0 < tuning_fraction < 0.5:
        raise ValueError(f"tuning_fraction must lie in (0, 0.5), got {tuning_fraction}")
    random_state = check_int(random_state, "random_state", min_value=0)
    check_bool(progress, "progress")
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y_arr.shape}")
    n = y_arr.shape[0]
    n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
    if n_rows != n:
        raise ValueError(f"X and y have inconsistent numbers of rows: {n_rows} and {n}")
    params = estimator.get_params(deep=False)
    base = clone(estimator)
    if "random_state" in params and params["random_state"] is None:
        base.set_params(random_state=random_state)
    fit_rows, tune_rows = holdout_split(n, tuning_fraction, random_state,
                                        classes=y_arr if is_classifier(estimator) else None)
    X_fit, y_fit = _safe_indexing(X, fit_rows), y_arr[fit_rows]
    X_tune, y_tune = _safe_indexing(X, tune_rows), y_arr[tune_rows]

    settings = {
        "estimator": type(estimator).__name__,
        "params": io.json_params(base),
        "space": _space_json(space),
        "tuning_fraction": tuning_fraction,
        "random_state": random_state,
        "data": data_digest(np.asarray(X, dtype=np.float64), y_arr.astype(np.float64)
                            if not is_classifier(estimator) else y_arr.astype(np.int64)),
    }
    settings = json.loads(json.dumps(settings))
    url = _storage_url(storage)
    study_name = study_name or f"dubito-tune-{type(estimator).__name__}"
    store = url if url is not None else optuna.storages.InMemoryStorage()
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(study_name=study_name, storage=store, direction="minimize", load_if_exists=True)
        saved = study.user_attrs.get("settings")
        if saved is None:
            study.set_user_attr("settings", settings)
        elif saved != settings:
            raise ValueError(f"study {study_name!r} in {url} was run with other settings and cannot be resumed: "
                             f"{settings_difference(saved, settings)}; use another study_name or storage")
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
            study.tell(t.number, state=TrialState.FAIL)  # left by an interrupted run: not counted
        _run_trials(study, store, study_name, base, space, n_trials, random_state,
                    (X_fit, y_fit, X_tune, y_tune), progress)
        done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        if not done:
            errors = {t.user_attrs.get("error") for t in study.get_trials(deepcopy=False) if _counted(t)}
            raise ValueError(f"every trial of {study_name!r} failed: {sorted(e for e in errors if e)}")
        best = min(done, key=lambda t: (t.value, t.number))
        trials = [dict(number=t.number, state=t.state.name, params=_decoded(t.params, space),
                       nll=t.value, seconds=t.user_attrs.get("seconds"), error=t.user_attrs.get("error"))
                  for t in study.get_trials(deepcopy=False)]
    finally:
        optuna.logging.set_verbosity(verbosity)
    best_params = _decoded(best.params, space)
    final = clone(base).set_params(**best_params).fit(X, y)
    return TuneResult(final, best_params, float(best.value), trials, study_name, url)


def _run_trials(study, store, study_name, base, space, n_trials, random_state, data, progress) -> None:
    """Ask / fit / score / tell until ``n_trials`` trials count; the k-th counted trial's
    sampler is TPE seeded by (random_state, k), so suggestions depend only on the history."""

    X_fit, y_fit, X_tune, y_tune = data
    k = sum(_counted(t) for t in study.get_trials(deepcopy=False))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), disable=not progress) as bar:
        task = bar.add_task(f"tune {type(base).__name__}", total=n_trials, completed=min(k, n_trials))
        while k < n_trials:
            seed = int(np.random.SeedSequence([random_state, k]).generate_state(1)[0])
            sampler = optuna.samplers.TPESampler(seed=seed)
            study = optuna.load_study(study_name=study_name, storage=store, sampler=sampler)
            trial = study.ask()
            params = _suggest(trial, space)
            start = time.perf_counter()
            try:
                model = clone(base).set_params(**params).fit(X_fit, y_fit)
                score = _held_out_nll(model, X_tune, y_tune)
                if not math.isfinite(score):
                    raise ValueError(f"held-out NLL is {score}")
            except (ValueError, RuntimeError, FloatingPointError, ArithmeticError) as exc:
                trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:500])
                trial.set_user_attr("seconds", time.perf_counter() - start)
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                trial.set_user_attr("seconds", time.perf_counter() - start)
                study.tell(trial, score)
            k += 1
            best = study.best_value if any(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False)) \
                else float("nan")
            bar.update(task, advance=1, description=f"tune {type(base).__name__} best NLL {best:.4g}")
