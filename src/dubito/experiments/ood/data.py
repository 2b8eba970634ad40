"""The experiment's data: ood-wave and the UCI sets on the paper's one split, standardised, with the OOD box nu."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dubito.data import load
from dubito.data.ood_box import UniformBox
from dubito.data.ood_synthetic import (
    OOD_INTERVAL,
    Standardiser,
    paper_split,
    standardise_split,
)
from dubito.experiments.common import SplitArrays
from dubito.experiments.ood.vocab import SIGMA_L, SYNTHETIC, size_class

# ---------------------------------------------------------------------------------- data


@dataclass
class _Data(SplitArrays):  # X and y standardised
    y_scale: float     # s_y: training target sd (1 on ood-wave)
    sigma_l: float
    box: Any           # UniformBox of nu (standardised input space)
    size: str
    facts: dict
    raw_train: tuple[np.ndarray, np.ndarray] | None = None


def _box(low, high):

    return UniformBox(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64))


def _load(dataset: str) -> _Data:

    size = size_class(dataset)
    if dataset == SYNTHETIC:
        ds = load(SYNTHETIC)
        X_tr, y_tr, X_te, y_te = ds.split(0)
        st = Standardiser.identity(1)  # spec §4: no standardisation
        box = _box([OOD_INTERVAL[0]], [OOD_INTERVAL[1]])
        split_desc = ds.meta["splits"]
        Xs_tr, ys_tr, Xs_te, ys_te = X_tr, y_tr, X_te, y_te
    else:
        ds = load(dataset)
        tr, te = paper_split(ds.n_samples)
        Xs_tr, ys_tr, Xs_te, ys_te, st = standardise_split(ds.X[tr], ds.y[tr], ds.X[te], ds.y[te])

        box = UniformBox.from_data(Xs_tr)  # [C]: the box of the standardised training inputs (spec §1)
        split_desc = "train_test_split(arange(n), test_size=0.1, random_state=42) (the paper's one split)"
    facts = dict(n_train=len(ys_tr), n_test=len(ys_te), n_features=int(Xs_tr.shape[1]),
                 y_scale=float(st.y_scale), y_mean=float(st.y_mean), sigma_l=SIGMA_L[dataset], size=size,
                 split=split_desc, box_low=np.round(np.asarray(box.low, dtype=float), 4).tolist(),
                 box_high=np.round(np.asarray(box.high, dtype=float), 4).tolist())
    return _Data(Xs_tr, ys_tr, Xs_te, ys_te, float(st.y_scale), SIGMA_L[dataset], box, size, facts,
                 (Xs_tr, ys_tr) if dataset == SYNTHETIC else None)
