"""The experiment's data: driving frames (CarRacing) and UCI sets -> train / test arrays, centre and thresholds."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np

from dubito.data import load
from dubito.experiments.base import Preset
from dubito.experiments.common import SplitArrays, uci_unavailable
from dubito.experiments.icnlm.vocab import (
    DRIVING,
    EXPENSIVE_POINTS,
    GRID_POINTS,
    HIST_BINS,
    NU_POINTS,
    TRAIN_POINTS,
    UCI_SPLITS,
)
from dubito.metrics import matched_thresholds


def data_kind(dataset: str) -> str:
    """"images" for the driving sets, "tabular" otherwise."""
    return "images" if dataset in DRIVING else "tabular"


def _n_splits(dataset: str) -> int:
    """Splits a preset with ``splits=None`` runs: driving's one episode-wise split, UCI's first
    ``len(UCI_SPLITS)`` standard splits (the paper preset's budget, see the notes)."""
    return 1 if dataset in DRIVING else len(UCI_SPLITS)


def _unavailable(preset: Preset) -> dict[str, str]:
    """UCI sets that are neither local nor downloadable; driving sets when gymnasium or Box2D
    (the recorder, also needed to read its cache: the key holds their versions) is missing."""
    out = uci_unavailable(d for d in preset.datasets if d not in DRIVING)
    for name in preset.datasets:
        if name in DRIVING:
            missing = [m for m in ("gymnasium", "Box2D") if importlib.util.find_spec(m) is None]
            if missing:
                out[name] = f"{' and '.join(missing)} not installed (pip install 'dubito[driving]')"
    return out


# ---------------------------------------------------------------------------------- data


@dataclasses.dataclass
class _Data(SplitArrays):
    """One split and what every method of it is evaluated with (identical across methods)."""

    kind: str
    image_shape: tuple | None
    center: float                 # the naive learner's constant
    thresholds: np.ndarray        # (t_I, t_II), mapped
    raw: bool                     # also the paper's raw 6 / 2 degrees
    sub: np.ndarray               # test subsample for the expensive metrics and artefacts
    train_sub: np.ndarray         # training subsample for the in-sample marginal calibration
    grid: np.ndarray              # y-grid of the marginal calibration plots
    edges: np.ndarray             # histogram bins of the test responses
    nu: np.ndarray                # variance thresholds of the error-variance curve
    facts: dict


def _load(dataset: str, split: int, seed: int) -> _Data:

    if dataset in DRIVING:
        ds = load("driving", n_frames=DRIVING[dataset], seed=0, progress=False)
        image_shape = tuple(int(v) for v in ds.meta["frame_shape"])
        center = 0.0
    else:
        ds = load(dataset)
        image_shape = None
    X_tr, y_tr, X_te, y_te = ds.split(int(split))
    if dataset not in DRIVING:
        center = float(y_tr.mean())
    rng = np.random.default_rng([int(seed), int(split), 7])
    sub = np.sort(rng.choice(len(y_te), size=min(EXPENSIVE_POINTS, len(y_te)), replace=False))
    train_sub = np.sort(rng.choice(len(y_tr), size=min(TRAIN_POINTS, len(y_tr)), replace=False))
    lo, hi = float(ds.y.min()), float(ds.y.max())  # the whole data set: the same grid for every split
    pad = 0.1 * (hi - lo)
    grid = np.linspace(lo - pad, hi + pad, GRID_POINTS)
    edges = np.linspace(lo - pad, hi + pad, HIST_BINS + 1)
    nu = np.linspace(0.0, 2.0 * float(np.var(ds.y)), NU_POINTS)
    thresholds = matched_thresholds(y_tr, center)
    facts = dict(n_train=int(len(y_tr)), n_test=int(len(y_te)), n_features=int(X_tr.shape[1]),
                 naive_center=center, thresholds_mapped=[float(t) for t in thresholds],
                 expensive_points=int(len(sub)), train_points=int(len(train_sub)),
                 splits=str(ds.meta.get("splits", "")))
    if dataset in DRIVING:
        facts.update(frames=DRIVING[dataset], frame_shape=list(image_shape), recording_seed=0)
    return _Data(X_tr, y_tr, X_te, y_te, data_kind(dataset), image_shape, center, thresholds, dataset in DRIVING,
                 sub, train_sub, grid, edges, nu, facts)
