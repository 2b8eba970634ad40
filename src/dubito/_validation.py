"""Input validation shared by every dubito estimator: one clear error per problem.

Estimators call `validate_fit_data` at the top of ``fit`` and `validate_predict_data` at the
top of ``predict``/``predict_distribution``. Both wrap scikit-learn's ``validate_data`` (so
``n_features_in_``, ``feature_names_in_`` and scikit-learn's estimator checks behave), and
add what scikit-learn leaves out:

* torch tensors (CPU or CUDA, with or without grad) are accepted and converted once;
* ``X`` must be 2-D: a 1-D ``X`` is refused with a short message (scikit-learn's prints the
  whole array);
* strings / non-numeric objects are refused by name;
* a minimum number of rows (``min_samples``; each estimator documents its choice);
* a constant target is refused where the estimator standardises the target (its standard
  deviation would be 0).

``NotFittedError`` is scikit-learn's, re-exported so ``except dubito._validation.NotFittedError``
and ``except sklearn.exceptions.NotFittedError`` are the same thing.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = [
    "NotFittedError",
    "DataTypeError",
    "check_fitted",
    "to_numpy_if_tensor",
    "validate_fit_data",
    "validate_predict_data",
    "check_int",
    "check_float",
    "check_choice",
    "check_bool",
    "check_widths",
]


class DataTypeError(TypeError, ValueError):
    """Non-numeric entries in an object array. Both a ValueError (dubito's "bad input"
    convention) and a TypeError (what NumPy, and hence scikit-learn's checks, raise)."""


def to_numpy_if_tensor(x):
    """A torch tensor (any device, grad or not) -> numpy array; anything else unchanged."""
    if hasattr(x, "detach") and hasattr(x, "cpu") and hasattr(x, "numpy"):
        return x.detach().cpu().numpy()
    return x


def _ndim(x) -> int | None:
    nd = getattr(x, "ndim", None)
    if nd is not None:
        return int(nd)
    if isinstance(x, (list, tuple)):
        try:
            return int(np.ndim(np.asarray(x, dtype=object)))
        except (ValueError, TypeError):
            return None
    return None


def _check_not_strings(x, name: str) -> None:
    dtype = getattr(x, "dtype", None)
    kind = getattr(dtype, "kind", None)
    if kind in ("U", "S"):
        raise ValueError(
            f"{name} holds strings (dtype {dtype}); dubito estimators need numeric data: "
            "encode categorical columns as numbers first"
        )
    if kind == "O" and isinstance(x, np.ndarray):
        try:
            np.asarray(x, dtype=np.float64)
        except TypeError as exc:
            raise DataTypeError(
                f"{name} has dtype object with non-numeric entries ({exc}); dubito estimators "
                "need numeric data"
            ) from None
        except ValueError as exc:
            raise ValueError(
                f"{name} has dtype object with entries that are not numbers ({exc}); dubito "
                "estimators need numeric data"
            ) from None


#: Largest |y| a fit accepts: a variance in y's units is a square, finite in float64 up to ~1e154.
MAX_ABS_Y = 1e150


def validate_fit_data(
    estimator,
    X,
    y,
    *,
    min_samples: int = 2,
    y_numeric: bool = True,
    require_nonconstant_y: bool = True,
    dtype=np.float64,
):
    """Validate training data; return ``(X, y)`` as float numpy arrays, X (n, p), y (n,).

    Sets ``estimator.n_features_in_`` (and ``feature_names_in_`` for DataFrames).
    Raises ``ValueError`` naming the problem: NaN/inf, mismatched lengths, 1-D ``X``,
    strings, fewer than ``min_samples`` rows, zero features, a constant ``y``
    (when ``require_nonconstant_y``). A sparse ``X`` raises scikit-learn's ``TypeError``.
    """
    name = type(estimator).__name__
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None")
    X = to_numpy_if_tensor(X)
    y = to_numpy_if_tensor(y)
    nd = _ndim(X)
    if nd is not None and nd != 2 and not hasattr(X, "tocsr"):
        raise ValueError(
            f"X must be 2-D (n_samples, n_features), got a {nd}-D array of shape "
            f"{np.shape(X)}. Reshape your data: X.reshape(-1, 1) for a single feature"
        )
    _check_not_strings(X, "X")
    _check_not_strings(y, "y")
    X, y = validate_data(
        estimator,
        X,
        y,
        reset=True,
        dtype=dtype,
        y_numeric=y_numeric,
        ensure_min_samples=min_samples,
        ensure_all_finite=True,
        multi_output=False,
    )
    y = np.asarray(y, dtype=np.float64)
    largest = float(np.max(np.abs(y))) if y.size else 0.0
    if largest > MAX_ABS_Y:  # issue 22: y x 1e200 fitted, then every prediction failed on an infinite variance
        raise ValueError(
            f"y reaches {largest:.3g} in absolute value: a predictive variance in y's units (the square of that "
            f"scale) overflows float64 beyond about 1e154; rescale y (e.g. divide it by 1e{int(np.log10(largest))}) "
            "and scale the predictions back"
        )
    if require_nonconstant_y and np.ptp(y) == 0:
        raise ValueError(
            f"y is constant (every value is {float(y[0])!r}): {name} standardises the target by its "
            "standard deviation, which is 0; there is nothing to learn"
        )
    return X, y


def validate_predict_data(estimator, X, *, dtype=np.float64, fitted_attributes=None):
    """Validate inputs at prediction time: fitted first, then the same checks as in fit
    plus the number of features seen in fit. Returns X as a float numpy array (n, p)."""
    check_fitted(estimator, fitted_attributes)
    X = to_numpy_if_tensor(X)
    nd = _ndim(X)
    if nd is not None and nd != 2 and not hasattr(X, "tocsr"):
        raise ValueError(
            f"X must be 2-D (n_samples, n_features), got a {nd}-D array of shape "
            f"{np.shape(X)}. Reshape your data: X.reshape(1, -1) for a single sample, "
            "X.reshape(-1, 1) for a single feature"
        )
    _check_not_strings(X, "X")
    return validate_data(estimator, X, reset=False, dtype=dtype, ensure_all_finite=True)


def check_fitted(estimator, attributes=None) -> None:
    """Raise ``NotFittedError`` (a ValueError and AttributeError) if ``estimator`` is unfitted."""
    check_is_fitted(
        estimator,
        attributes,
        msg=(
            "This %(name)s instance is not fitted yet. Call 'fit' with appropriate arguments "
            "before using this estimator."
        ),
    )


# ---------------------------------------------------------------- hyper-parameter checks
# Settings are validated in ``fit`` (scikit-learn's contract: ``__init__`` only stores them).


def check_int(value, name: str, *, min_value: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if min_value is not None and value < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {value}")
    return int(value)


def check_float(
    value, name: str, *, min_value: float | None = None, strictly_positive: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if strictly_positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if min_value is not None and value < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {value}")
    return float(value)


def check_choice(value, name: str, choices) -> str:
    if value not in tuple(choices):
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_widths(value, name: str = "hidden") -> tuple[int, ...]:
    """Layer widths as a tuple of positive ints: an int is one layer, () none."""
    widths = (value,) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else value
    try:
        return tuple(check_int(h, f"{name} widths", min_value=1) for h in widths)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of positive ints, got {value!r}") from None
