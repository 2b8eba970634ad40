"""The calibration share of a training set: rows held out of the fit so that a recalibration
(`Recalibrator`, `conformal_interval`) sees data the model did not train on, as split conformal
prediction requires (Vovk, Gammerman & Shafer 2005, §4.1; Papadopoulos et al. 2002)."""

from __future__ import annotations

import numpy as np

__all__ = ["CAL_FRACTION", "calibration_split"]

#: Default share held out for calibration: 20 %, as in MAPIE's and crepes' split-conformal examples.
#: At 95 % the conformal guarantee needs 2/(1 - 0.95) - 1 = 39 calibration points.
CAL_FRACTION = 0.2


def calibration_split(n: int, fraction: float = CAL_FRACTION, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, calibration rows) of ``n`` rows, each sorted: a random ``fraction`` (at least one
    row, at most n - 1) drawn with ``np.random.default_rng(seed)`` (an int or a sequence of ints)."""
    n = int(n)
    fraction = float(fraction)
    if not 0 < fraction < 1:
        raise ValueError(f"the calibration fraction must lie strictly between 0 and 1, got {fraction}")
    if n < 2:
        raise ValueError(f"a calibration split needs at least 2 rows, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_cal = min(n - 1, max(1, int(round(fraction * n))))
    return np.sort(perm[n_cal:]), np.sort(perm[:n_cal])
