"""The experiment's data: cell dataset names (synthetic repeats, UCI random and Gal splits) -> standardised train/test arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dubito._standardise import column_scaling
from dubito.data import deepnoise_synthetic as syn
from dubito.data import load
from dubito.experiments.base import Preset
from dubito.experiments.common import SplitArrays, uci_unavailable
from dubito.experiments.deepnoise.vocab import (
    GAL,
    KIND_SHORT,
    N_REPEATS_PAPER,
    N_SPLITS_PAPER,
    UCI_SETS,
)

# ---------------------------------------------------------------------------------- datasets


@dataclass(frozen=True)
class DatasetSpec:
    """What a dataset name means: ``kind`` "synthetic" (generator ``noise``, ``n`` training
    pairs) or "uci" (``name`` in `UCI_SETS`, ``standard`` splits or seeded random ones)."""

    kind: str
    name: str
    noise: str | None = None
    n: int | None = None
    standard: bool = False


def parse_dataset(dataset: str) -> DatasetSpec:
    """``het-1000`` -> synthetic heteroscedastic, N = 1000; ``yacht`` / ``yacht-gal`` -> UCI."""
    prefix, _, rest = dataset.partition("-")
    if prefix in KIND_SHORT and rest.isdigit():
        return DatasetSpec("synthetic", dataset, KIND_SHORT[prefix], int(rest))
    base = dataset[: -len(GAL)] if dataset.endswith(GAL) else dataset
    if base in UCI_SETS:
        return DatasetSpec("uci", base, standard=dataset.endswith(GAL))
    raise ValueError(
        f"unknown deepnoise dataset {dataset!r}: expected het-<N>, skew-<N>, multi-<N>, "
        f"one of {', '.join(UCI_SETS)} or the same with the suffix {GAL!r} (standard splits)"
    )


def _n_splits(dataset: str) -> int:
    spec = parse_dataset(dataset)
    return N_REPEATS_PAPER if spec.kind == "synthetic" else N_SPLITS_PAPER[spec.name]


def _group(dataset: str) -> str:
    spec = parse_dataset(dataset)
    if spec.kind == "synthetic":
        return "synthetic"
    return "uci-gal" if spec.standard else "uci"


def _unavailable(preset: Preset) -> dict[str, str]:
    """UCI sets of the preset that are neither local (DUBITO_DATA, cache) nor downloadable."""
    names = {d: parse_dataset(d) for d in preset.datasets}
    bases = tuple(sorted({s.name for s in names.values() if s.kind == "uci"}))
    if not bases:
        return {}
    missing = uci_unavailable(bases)
    return {d: missing[s.name] for d, s in names.items() if s.kind == "uci" and s.name in missing}


@dataclass
class _Data(SplitArrays):
    spec: DatasetSpec
    x_eval: np.ndarray | None = None       # synthetic: the 100 evaluation inputs (100, 1)
    q_eval: np.ndarray | None = None       # and their 500 true quantiles (100, 500)
    facts: dict | None = None


def _standardise_x(X_tr: np.ndarray, X_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training mean and population sd; a constant column gets sd := 1 ([C] standardize)."""
    mean, sd = column_scaling(X_tr)
    return (X_tr - mean) / sd, (X_te - mean) / sd


def _load(dataset: str, split: int) -> _Data:
    spec = parse_dataset(dataset)
    if spec.kind == "synthetic":

        X_tr, y_tr = syn.training_set(spec.noise, spec.n, int(split))
        X_te, y_te = syn.test_set(spec.noise, spec.n, int(split))
        x_eval, q_eval = syn.eval_points(spec.noise)
        facts = dict(noise=spec.noise, repeat=int(split), n_train=int(len(y_tr)), n_test=int(len(y_te)),
                     n_eval=int(len(x_eval)))
        return _Data(X_tr, y_tr, X_te, y_te, spec, x_eval[:, None], q_eval, facts)

    if spec.standard:
        ds = load(spec.name)
    else:
        ds = load(spec.name, splits="random", n_splits=N_SPLITS_PAPER[spec.name], test_fraction=0.1, seed=0)
    X_tr, y_tr, X_te, y_te = ds.split(int(split))
    X_tr, X_te = _standardise_x(X_tr, X_te)
    facts = dict(splits="standard (Gal)" if spec.standard else "random 90/10, seed 0", n_train=int(len(y_tr)),
                 n_test=int(len(y_te)), n_features=int(X_tr.shape[1]), y_sd_train=float(np.std(y_tr)))
    return _Data(X_tr, y_tr, X_te, y_te, spec, facts=facts)
