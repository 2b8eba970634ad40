"""Names and constants of the OOD experiment: the paper, variant names, data sets and their size classes, sigma_l, evaluation grids."""

from __future__ import annotations

import numpy as np

PAPER = (
    "Y. Pequignot, M. Alain, P. Dagenais, C. Gagne and F. Laviolette (2020), Implicit variational inference: "
    "the parameter and the predictor space, arXiv:2010.12995 (OOD detection for regression), Tables 1, 2, 4, 5"
)

#: method -> variant name (the paper's column names)
VARIANT = {
    "nuts": "HMC",
    "mc-dropout": "MC dropout",
    "deterministic-ensemble": "Ensemble",
    "mfvi": "MFVI",
    "funn-mfvi": "FuNN-MFVI",
    "nn-hyvi": "NN-HyVI",
    "funn-hyvi": "FuNN-HyVI",
}
#: HyperVIRegressor (family, space) of the variational methods (spec §2-§3)
HYVI = {
    "nn-hyvi": ("hypernet", "parameter"),
    "funn-hyvi": ("hypernet", "function"),
    "mfvi": ("mean-field", "parameter"),
    "funn-mfvi": ("mean-field", "function"),
}
SYNTHETIC = "ood-wave"
SMALL = ("boston", "concrete", "energy", "wine", "yacht")
LARGE = ("naval", "power", "protein")
DATASETS = (SYNTHETIC, *SMALL, *LARGE)
#: our dataset name -> the paper's
PAPER_NAME = {"naval": "navalC", "power": "powerplant", SYNTHETIC: "synthetic"}
#: sigma_l, in standardised target units (raw units on ood-wave); spec §2.8 ([P] App. D = [C])
SIGMA_L = {"boston": 2.5, "concrete": 4.5, "energy": 1.4, "wine": 0.5, "yacht": 1.4, "naval": 0.2, "power": 3.1,
           "protein": 4.4, SYNTHETIC: 0.1}
#: per size class: hidden width, activation, batch, patience, T, max epochs (spec §2.1, §2.9, §4, pitfall 17)
SIZE = {
    "synthetic": dict(hidden=50, activation="tanh", batch_size=50, patience=30, n_points=50, max_epochs=3000),
    "small": dict(hidden=50, activation="relu", batch_size=50, patience=30, n_points=200, max_epochs=2000),
    "large": dict(hidden=100, activation="relu", batch_size=500, patience=10, n_points=200, max_epochs=2000),
}
HMC_DATASETS = (SYNTHETIC, *SMALL)  # the paper's HMC column is NA on the large sets
GRID_POINTS = 500
SIGMA_BINS = np.linspace(-4.0, 3.0, 71)  # log10 sigma (standardised units) of the histograms
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: finding-1 regions on ood-wave (spec §6): away from the data and the gap
RATIO_REGIONS = ((-4.0, -1.5), (-0.3, 0.3), (1.5, 2.0))
FAR_REGION = (-4.0, -2.0)  # spec test 14


def size_class(dataset: str) -> str:
    if dataset == SYNTHETIC:
        return "synthetic"
    if dataset in SMALL:
        return "small"
    if dataset in LARGE:
        return "large"
    raise ValueError(f"unknown ood dataset {dataset!r}; available: {', '.join(DATASETS)}")


def _resolve(settings: dict, dataset: str) -> dict:
    """A method's settings for a dataset: the common keys, then the size class's overrides
    (``settings["synthetic" | "small" | "large"]``), then the dataset's (``settings[dataset]``)."""
    size = size_class(dataset)
    out = {k: v for k, v in settings.items() if k not in (*SIZE, *DATASETS, "datasets")}
    out.update(settings.get(size, {}) or {})
    out.update(settings.get(dataset, {}) or {})
    return out
