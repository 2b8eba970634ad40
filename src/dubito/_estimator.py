r"""The one base of dubito's estimators: what every regressor and classifier shares.

`DubitoEstimator` (scikit-learn's ``BaseEstimator``) holds

* **seeds** (`seed_base`, `seeds_from`) and the **device** (`check_device`, ``_device()``);
* **input checks** (``_validate_fit`` / ``_validate_predict``: `dubito._validation`, one clear
  ValueError per problem; torch tensors accepted);
* **persistence**: ``save(path)`` writes ``self._state()`` = (tensors, settings) as one
  safetensors file with JSON settings, atomically (`dubito.io`; no pickle), and
  ``load(path, device=None)`` rebuilds through ``cls._from_state(tensors, settings, ...)``; each
  estimator implements only these two hooks. ``_common_fitted()`` / ``_restore_common()``
  carry what every fitted estimator has (``n_features_in_``, ``feature_names_in_``,
  ``n_train_``) and ``_training_fitted()`` / ``_restore_training()`` the record of validated
  fitting (``best_epoch_``, ``stopped_by_``, `dubito.early_stopping`);
* a **progress bar** (`progress_bar`: rich, on stderr, off with ``progress=False``);
* scikit-learn's **tags**: no NaN, no sparse input.

`DubitoRegressor` adds the **standardisation** of X and y by the training rows
(``_fit_scaling``, ``_standardise``, `dubito._standardise`; saved by ``_scaling_tensors`` /
``_restore_scaling``) and the outputs scikit-learn users expect, all read from
``predict_distribution(X)``:

* ``predict(X)`` = the predictive mean; ``predict(X, return_std=True)`` = (mean, std), each (N,),
  as scikit-learn's ``GaussianProcessRegressor.predict``. A subclass that overrides ``predict``
  gets ``return_std`` too (``__init_subclass__`` wraps its override);
* ``predict_interval(X, level=0.95)`` = the equal-tailed central interval, (N, 2) with columns
  (lower, upper); a sequence of L levels gives (N, 2, L), the layout of MAPIE's ``y_pis``;
* ``predict_quantiles(X, q)`` = F^{-1}(q | x), (N, k) for k levels.

`DubitoClassifier` adds ``predict`` = the most probable class of ``predict_proba``, and keeps
``predict_proba`` as scikit-learn's: a fresh, writable float64 (N, K) array whose columns follow
``classes_`` (every subclass override is wrapped to return one); ``predict_log_proba`` = log p̄.

The validation protocol (held-out share, early stopping on held-out NLL) is
`dubito.early_stopping`, and its epoch loop with the progress bar `dubito.training_loop`;
diagnostics of samplers and variational fits are `dubito.inference.convergence`.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state

from dubito import io
from dubito._standardise import column_scaling
from dubito._validation import (
    check_choice,
    check_fitted,
    validate_fit_data,
    validate_predict_data,
)
from dubito.early_stopping import STOPPED_BY

__all__ = [
    "check_stored_size",
    "fitted_number",
    "DubitoClassifier",
    "DubitoEstimator",
    "DubitoRegressor",
    "check_device",
    "progress_bar",
    "seed_base",
    "seeds_from",
]


def seed_base(random_state) -> int:
    """The int a fit derives all its random streams from: ``random_state`` itself when it is an
    int, else one draw of ``check_random_state(random_state)`` (None: fresh entropy)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:  # numpy's SeedSequence says "expected non-negative integer", naming nothing
            raise ValueError(f"random_state must be None, a non-negative int or a numpy RandomState, got {random_state}")
        return int(random_state)
    try:
        return int(check_random_state(random_state).randint(0, 2**31 - 1))
    except ValueError as exc:
        raise ValueError(f"random_state must be None, a non-negative int or a numpy RandomState, got "
                         f"{random_state!r} ({exc})") from None


def seeds_from(random_state, k: int) -> list[int]:
    """k independent 63-bit seeds from ``random_state`` (None, int or numpy RandomState):
    the children of ``numpy.random.SeedSequence(seed_base(random_state))``."""
    children = np.random.SeedSequence(seed_base(random_state)).spawn(k)
    return [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device``; one ValueError for a malformed name, a device type dubito
    does not run on (only 'cpu' and 'cuda': 'mps', 'xla', 'meta', ... are refused up front rather
    than failing inside torch), or CUDA that is absent."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device string such as 'cpu' or 'cuda', got {device!r}: {exc}") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: dubito runs on 'cpu' or 'cuda' (e.g. 'cuda:0'), not on {dev.type!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available here; use device='cpu'")
    return dev


def progress_bar(enabled: bool):
    """A rich ``Progress`` on stderr (description, bar, done/total, elapsed, remaining), disabled
    unless ``enabled``. Use ``with progress_bar(p) as bar: task = bar.add_task(text, total=n)``."""

    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    return Progress(*columns, console=Console(stderr=True), disable=not enabled)


def fitted_number(fitted: dict, key: str, *, default=None, positive: bool = False,
                  nonnegative: bool = False) -> float:
    """A fitted scalar read from a file's settings: a finite number (not a string or a bool), > 0
    or >= 0 where asked; ``default`` where the key is absent (files of older versions). Anything
    else raises RuntimeError, one ValueError naming the file from `load` (issue 22: a
    ``lambda_prior`` of NaN loaded and changed every prediction)."""
    value = fitted.get(key, default) if default is not None else fitted[key]
    if isinstance(value, (str, bool)) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise RuntimeError(f"the fitted {key} is {value!r}, not a finite number")
    if (positive and value <= 0) or (nonnegative and value < 0):
        raise RuntimeError(f"the fitted {key} is {value!r}; a fit gives {'> 0' if positive else '>= 0'}")
    return float(value)


def check_stored_size(tensors: dict, prefix: str, widths, *, copies: int = 1) -> None:
    """Refuse, before building it, a network bigger than the file holds (issue 22: a crafted
    ``hidden=[6000, 6000]`` made load allocate gigabytes before any shape was checked).

    An MLP of layer widths w_0, ..., w_L has at least copies * sum_l (w_l w_{l+1} + w_{l+1})
    parameters, every one saved under ``prefix``; settings that imply more numbers than the file
    stores there raise RuntimeError (one ValueError naming the file from `load`). Python
    integers: no overflow however absurd the widths."""
    w = [int(v) for v in widths]
    if any(v < 1 for v in w) or int(copies) < 1:
        raise RuntimeError(f"impossible network sizes: widths {w}, copies {copies}")
    implied = int(copies) * sum(a * b + b for a, b in zip(w[:-1], w[1:]))
    stored = sum(int(t.numel()) for k, t in tensors.items() if k.startswith(prefix))
    if implied > stored:
        raise RuntimeError(f"the settings describe a network of at least {implied:,} numbers (widths {w}"
                           f"{f' x {copies} copies' if copies != 1 else ''}) but the file stores {stored:,}")


class DubitoEstimator(BaseEstimator):
    """Input checks, device, persistence hooks, progress bar and tags of every dubito estimator."""

    # -------------------------------------------------------------- inputs and device
    def _device(self) -> torch.device:
        """The ``device`` setting, checked (`check_device`)."""
        return check_device(getattr(self, "device", "cpu"))

    def _validate_fit(self, X, y, **kwargs):
        """(X, y) as float numpy arrays, checked (`dubito._validation.validate_fit_data`)."""
        return validate_fit_data(self, X, y, **kwargs)

    def _validate_predict(self, X, fitted_attributes=None) -> np.ndarray:
        """X as a float numpy array, checked against the fit (`validate_predict_data`)."""
        return validate_predict_data(self, X, fitted_attributes=fitted_attributes)

    # -------------------------------------------------------------- persistence
    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) of the fitted model: what `save` writes. settings is JSON-able,
        conventionally ``{"params": io.json_params(self), "fitted": {...}}``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _state")

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "", **kwargs):
        """The estimator rebuilt from `_state`'s output; ``device`` overrides the saved setting;
        ``where`` names the file in errors."""
        raise NotImplementedError(f"{cls.__name__} does not implement _from_state")

    def save(self, path) -> None:
        """Write the fitted model to ``path``: one safetensors file with JSON settings, written
        atomically (`dubito.io`; no pickle)."""
        check_fitted(self)
        tensors, settings = self._state()
        io.save_tensors(path, tensors, type(self).__name__, settings)

    @classmethod
    def load(cls, path, *, device=None, **kwargs):
        """Read a model written by `save`; ``device`` overrides the saved device setting. A
        corrupted, truncated or foreign file raises one ``ValueError`` naming it."""
        tensors, settings = io.load_tensors(path, cls.__name__, device="cpu")
        with io.rebuilding(path, cls.__name__):
            return cls._from_state(tensors, settings, device=device, where=str(path), **kwargs)

    def _common_fitted(self) -> dict:
        """JSON of what every fitted estimator has: n_features_in, feature_names_in, n_train."""
        out = dict(n_features_in=int(self.n_features_in_), feature_names_in=io.feature_names_json(self))
        if hasattr(self, "n_train_"):
            out["n_train"] = int(self.n_train_)
        return out

    def _restore_common(self, fitted: dict) -> int:
        """Inverse of `_common_fitted`; returns n_features_in."""
        n_features, names = fitted["n_features_in"], fitted.get("feature_names_in")
        if isinstance(n_features, bool) or not isinstance(n_features, int) or n_features < 1:
            raise TypeError(f"n_features_in is {n_features!r}, not a positive integer")
        if names and len(names) != n_features:
            raise RuntimeError(f"{len(names)} feature names for {n_features} features")
        self.n_features_in_ = n_features
        io.set_feature_names(self, names)
        if "n_train" in fitted:
            n_train = fitted["n_train"]
            if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
                raise TypeError(f"n_train is {n_train!r}, not a positive integer")
            self.n_train_ = n_train
        return self.n_features_in_

    def _training_fitted(self) -> dict:
        """JSON of the validated-fitting record: best_epoch (int, or a list per member), stopped_by."""
        best = np.asarray(self.best_epoch_)
        return dict(best_epoch=int(best) if best.ndim == 0 else [int(e) for e in best], stopped_by=self.stopped_by_)

    def _budget_fitted(self) -> dict:
        """JSON of the budget the fit used: ``epochs_`` and ``patience_`` ("auto" resolved,
        `dubito.early_stopping.resolve_budget`)."""
        return dict(epochs=int(self.epochs_), patience=int(self.patience_))

    def _restore_budget(self, fitted: dict, settings: dict) -> None:
        """Inverse of `_budget_fitted`; a file written before "auto" budgets has none, and its
        constructor's integers (``settings["epochs"]``, ``settings["patience"]``) were the budget."""
        self.epochs_ = int(fitted_number(fitted, "epochs", default=settings["epochs"], positive=True))
        self.patience_ = int(fitted_number(fitted, "patience", default=settings["patience"], positive=True))

    def _restore_training(self, fitted: dict, tensors: dict, n_epochs_run: int, n_units: int | None = None) -> None:
        """Inverse of `_training_fitted` and of a ``validation_curve`` tensor. A file written before
        validated fitting has none of them: every unit ran to the cap (``n_epochs_run``), no curve."""

        empty = torch.zeros(0) if n_units is None else torch.zeros(0, n_units)
        self.validation_curve_ = tensors.get("validation_curve", empty).double().numpy()
        best = fitted.get("best_epoch", n_epochs_run if n_units is None else [n_epochs_run] * n_units)
        self.best_epoch_ = int(best) if n_units is None else np.asarray(best, dtype=np.int64)
        self.stopped_by_ = check_choice(fitted.get("stopped_by", "cap"), "stopped_by", STOPPED_BY)

    # -------------------------------------------------------------- scikit-learn
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False  # NaN/inf are refused at fit and predict
        tags.input_tags.sparse = False
        return tags


class DubitoRegressor(RegressorMixin, DubitoEstimator):
    """A dubito regressor: standardises X and y by the training rows; ``predict`` is the
    predictive mean. Subclasses implement ``fit`` and ``predict_distribution``."""

    def _fit_scaling(self, X: np.ndarray, y: np.ndarray, scalar_x: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Standardised (X, y); sets x_mean_, x_scale_ (p,), y_mean_, y_scale_ and n_train_.

        Per column for tabular X (`column_scaling`: population sd, constant columns sd 1); with
        ``scalar_x`` (images) ONE mean and sd over all entries of X, stored as (p,) arrays filled
        with them, so the pixels keep their relative values."""
        if scalar_x:
            x_mean = np.full(X.shape[1], X.mean())
            x_scale = np.full(X.shape[1], 1.0 if np.ptp(X) == 0 else X.std())
        else:
            x_mean, x_scale = column_scaling(X)
        self.x_mean_, self.x_scale_ = x_mean, x_scale
        self.y_mean_, self.y_scale_ = float(y.mean()), float(y.std())
        self.n_train_ = int(X.shape[0])
        return (X - x_mean) / x_scale, (y - self.y_mean_) / self.y_scale_

    def _standardise(self, X, fitted_attributes=None) -> np.ndarray:
        """X checked (`_validate_predict`) and standardised by the training scaling."""
        X = self._validate_predict(X, fitted_attributes)
        return (X - self.x_mean_) / self.x_scale_

    def _scaling_tensors(self) -> dict[str, torch.Tensor]:
        """x_mean, x_scale (float64 tensors) and y_mean, y_scale (0-d) for `_state`."""
        return {name: torch.as_tensor(np.asarray(getattr(self, name + "_"), dtype=np.float64))
                for name in ("x_mean", "x_scale", "y_mean", "y_scale")}

    def _restore_scaling(self, tensors: dict, fitted: dict, n_features: int) -> None:
        """Inverse of `_scaling_tensors` (y_mean / y_scale read from ``fitted`` in older files).
        A scaling whose shape is not (n_features,) raises RuntimeError, which `load` reports as
        one ValueError naming the file (`io.rebuilding`)."""
        self.x_mean_ = tensors["x_mean"].double().numpy()
        self.x_scale_ = tensors["x_scale"].double().numpy()
        for name in ("y_mean", "y_scale"):
            value = tensors[name] if name in tensors else fitted[name]
            if isinstance(value, (str, bool)):  # float("1e3") would take a string
                raise TypeError(f"{name} is {value!r}, not a number")
            setattr(self, name + "_", float(value))
        if self.x_mean_.shape != (n_features,) or self.x_scale_.shape != (n_features,):
            raise RuntimeError(f"inconsistent tensor shapes: the input scaling is {self.x_mean_.shape}, not ({n_features},)")
        # a standardisation is finite with positive scales (np.std of the training data; 1 where constant)
        if not (np.all(np.isfinite(self.x_mean_)) and np.all(np.isfinite(self.x_scale_)) and np.all(self.x_scale_ > 0)
                and np.isfinite(self.y_mean_) and np.isfinite(self.y_scale_) and self.y_scale_ > 0):
            raise RuntimeError("the saved standardisation is not finite with positive scales (y_scale "
                               f"{self.y_scale_}, smallest x_scale {self.x_scale_.min() if self.x_scale_.size else None})")

    def __init_subclass__(cls, **kwargs):
        # before scikit-learn's own hook, which reads predict's signature (metadata routing)
        own = cls.__dict__.get("predict")
        if own is not None and "return_std" not in inspect.signature(own).parameters:
            cls.predict = _with_return_std(own)
        super().__init_subclass__(**kwargs)

    def predict(self, X, return_std: bool = False):
        """The predictive mean E[y | x] in the user's units, (N,); with ``return_std=True`` the
        pair (mean, std), each (N,), from one ``predict_distribution(X)`` (scikit-learn's
        ``GaussianProcessRegressor.predict`` convention)."""
        pred = self.predict_distribution(X)
        mean = np.array(pred.mean, dtype=np.float64)
        return (mean, np.array(pred.std, dtype=np.float64)) if return_std else mean

    def predict_interval(self, X, level=0.95, **predict_params) -> np.ndarray:
        r"""Equal-tailed central predictive interval [F^{-1}((1 - level)/2), F^{-1}((1 + level)/2)].

        ``level``: one level in (0, 1) -> (N, 2), columns (lower, upper); a sequence of L levels
        -> (N, 2, L), the layout of MAPIE's ``y_pis``. Default 0.95 (the conventional 95 %).
        Each interval is ``predict_distribution(X, **predict_params).interval(level)``, so it
        equals what `dubito.metrics.coverage` scores.
        """
        levels, scalar = _check_levels(level)
        pred = self.predict_distribution(X, **predict_params)
        out = np.empty((len(pred), 2, levels.size))
        for j, lv in enumerate(levels):
            out[:, 0, j], out[:, 1, j] = pred.interval(float(lv))
        return out[:, :, 0] if scalar else out

    def predict_quantiles(self, X, q, **predict_params) -> np.ndarray:
        """Predictive quantiles F^{-1}(q | x), (N, k) for k levels ``q`` in [0, 1] (a scalar is
        k = 1); 0 and 1 give -inf and +inf. ``predict_distribution(X, **predict_params).quantile``."""
        levels = np.atleast_1d(np.asarray(q, dtype=np.float64))
        if levels.ndim != 1 or levels.size == 0:
            raise ValueError(f"q must be a level or a non-empty 1-D sequence of levels, got shape {np.shape(q)}")
        return np.array(self.predict_distribution(X, **predict_params).quantile(levels), dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False  # a scalar response
        return tags


class DubitoClassifier(ClassifierMixin, DubitoEstimator):
    """A dubito classifier: ``predict`` is the most probable class of ``predict_proba``, as a
    label of ``classes_``. Subclasses implement ``fit`` and ``predict_proba``."""

    def __init_subclass__(cls, **kwargs):
        own = cls.__dict__.get("predict_proba")
        if own is not None and not getattr(own, "_dubito_writable", False):
            cls.predict_proba = _writable_proba(own)
        super().__init_subclass__(**kwargs)

    def predict(self, X) -> np.ndarray:
        """argmax_c p(c | x), as labels of ``classes_``, (N,)."""
        proba = self.predict_proba(X)  # first: it refuses an unfitted estimator (NotFittedError)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X) -> np.ndarray:
        """log p̄(c | x), (N, K), columns as ``classes_``: ``predict_distribution(X).log_probs``
        (exact in log space for logit draws; -inf where p̄ = 0)."""
        return np.array(self.predict_distribution(X).log_probs, dtype=np.float64)


def _check_levels(level) -> tuple[np.ndarray, bool]:
    """Interval levels as a 1-D float64 array, each strictly inside (0, 1), and whether one was given."""
    arr = np.asarray(level, dtype=np.float64)
    scalar = arr.ndim == 0
    arr = np.atleast_1d(arr)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"level must be a float or a non-empty 1-D sequence, got shape {arr.shape}")
    if not np.all((arr > 0) & (arr < 1)):
        raise ValueError(f"each interval level must lie strictly between 0 and 1, got {arr.tolist()}")
    return arr, scalar


def _with_return_std(predict):
    """A subclass's ``predict`` that also takes ``return_std`` (`DubitoRegressor.predict`): with
    it, (mean, std) of ``predict_distribution`` called with the same arguments; without it, the
    override's answer as a writable float64 array."""

    @functools.wraps(predict)
    def wrapper(self, *args, return_std: bool = False, **kwargs):
        if not return_std:
            out = np.asarray(predict(self, *args, **kwargs), dtype=np.float64)
            return out if out.flags.writeable else out.copy()  # scikit-learn hands out writable arrays
        pred = self.predict_distribution(*args, **kwargs)
        return np.array(pred.mean, dtype=np.float64), np.array(pred.std, dtype=np.float64)

    params = list(inspect.signature(predict).parameters.values())
    extra = inspect.Parameter("return_std", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool)
    at = next((i for i, p in enumerate(params) if p.kind == inspect.Parameter.VAR_KEYWORD), len(params))
    wrapper.__signature__ = inspect.signature(predict).replace(parameters=params[:at] + [extra] + params[at:],
                                                               return_annotation=inspect.Signature.empty)
    wrapper.__doc__ = (predict.__doc__ or "").rstrip() + (
        "\n\n``return_std=True``: (mean, std), each (N,), of ``predict_distribution`` (`DubitoRegressor.predict`).")
    return wrapper


def _writable_proba(predict_proba):
    """A subclass's ``predict_proba`` returning a fresh, writable float64 array, as scikit-learn's."""

    @functools.wraps(predict_proba)
    def wrapper(self, *args, **kwargs):
        return np.array(predict_proba(self, *args, **kwargs), dtype=np.float64)

    wrapper._dubito_writable = True
    return wrapper
