"""Integer class labels of the classifiers: checked labels 0..K-1 (`check_labels`), scikit-learn's
``classes_`` of the labels seen (`fit_classes`) and labels as indices into fitted classes
(`encode_labels`)."""

from __future__ import annotations

import numpy as np

__all__ = ["check_labels", "encode_labels", "fit_classes"]


def check_labels(y: np.ndarray, n_classes: int | None) -> tuple[np.ndarray, int]:
    """y as int64 labels in 0..K-1 and K (``n_classes``, or max(y) + 1); one ValueError otherwise.

    Refused: labels that are not integers (scikit-learn's "Unknown label type: continuous"),
    negative or >= K, strings (encode them, e.g. ``sklearn.preprocessing.LabelEncoder``), and, when
    K is inferred (``n_classes`` None), a y holding a single class: K = max(y) + 1 would then make
    classes that were never seen, and a network trained on one class predicts it everywhere with
    full confidence, which is no honest answer (scikit-learn's convention for one class present is
    this ValueError, as ``LogisticRegression``). With ``n_classes`` given one class may be present
    (e.g. a few newly labelled rows for ``fine_tune``). `MCDropoutClassifier.fit` without
    ``n_classes`` maps labels as scikit-learn does instead (`fit_classes`).
    """
    y = _integer_labels(y)  # the refusals of non-numeric and continuous labels
    if y.min() < 0:
        raise ValueError(f"y must hold class labels 0..K-1; got a negative label ({int(y.min())})")
    k = int(y.max()) + 1 if n_classes is None else int(n_classes)
    if y.max() >= k:
        raise ValueError(f"y holds labels outside 0..{k - 1} (n_classes={k}): largest label {int(y.max())}")
    if k < 2:
        raise ValueError("y holds a single class (0); a classifier needs K >= 2 classes (set n_classes)")
    if n_classes is None and y.min() == y.max():
        raise ValueError(f"y holds a single class ({int(y[0])}): a classifier needs examples of at least 2 classes; "
                         f"set n_classes=K to train a K-class model on the class present")
    return y, k


def _integer_labels(y) -> np.ndarray:
    """y as int64 class labels (any integers); one ValueError for non-numeric or continuous labels."""
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        first = np.asarray(y, dtype=object).reshape(-1)[:1]
        raise ValueError("y must hold integer class labels; got non-numeric labels "
                         f"(e.g. {first[0] if first.size else None!r}): encode them first, e.g. with "
                         "sklearn.preprocessing.LabelEncoder") from None
    if not np.all(y == np.round(y)):
        raise ValueError("Unknown label type: continuous. y must hold integer class labels; got non-integer "
                         f"values (e.g. {y[y != np.round(y)][0]!r}); for a continuous target use a regressor")
    if np.any(np.abs(y) > 2.0**62):
        raise ValueError("y holds labels beyond +-2**62, which int64 labels cannot hold")
    return y.astype(np.int64)


def fit_classes(y) -> tuple[np.ndarray, np.ndarray]:
    """(classes, codes) as scikit-learn: the distinct integer labels of y, sorted, and each row's
    index among them (labels {0, 5, 10} give 3 classes, not 11). At least two classes (a network
    trained on one predicts it everywhere with full confidence: `check_labels`' reasoning)."""
    classes, codes = np.unique(_integer_labels(y), return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"y holds a single class ({int(classes[0]) if classes.size else None}): a classifier needs "
                         "examples of at least 2 classes; set n_classes=K (labels 0..K-1) to train a K-class model "
                         "on the class present")
    return classes, codes.astype(np.int64).reshape(-1)


def encode_labels(y, classes: np.ndarray) -> np.ndarray:
    """Each label of y as its index in the fitted ``classes``; one ValueError naming a label the
    model was not fitted on."""
    y = _integer_labels(y)
    codes = np.clip(np.searchsorted(classes, y), 0, classes.size - 1)
    unknown = classes[codes] != y
    if np.any(unknown):
        raise ValueError(f"y holds labels the model was not fitted on (e.g. {int(y[unknown][0])}); its classes are "
                         f"{classes.tolist()[:20]}{' ...' if classes.size > 20 else ''}")
    return codes.astype(np.int64)
