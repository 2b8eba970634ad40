"""The presets, the metrics and the `Experiment`; the notes are NOTES.md beside this file (a template: its {NAMES} are filled from vocab)."""

from __future__ import annotations

from pathlib import Path

from dubito.experiments.base import (
    Experiment,
    MetricSpec,
    Preset,
)
from dubito.experiments.icnlm.cell import run_cell
from dubito.experiments.icnlm.data import _n_splits, _unavailable
from dubito.experiments.icnlm.paper import _paper_numbers
from dubito.experiments.icnlm.report import report_sections
from dubito.experiments.icnlm.vocab import (
    _IMAGES,
    _IMAGES_PAPER,
    _POSTERIOR,
    _TABULAR,
    EXPENSIVE_POINTS,
    IMAGES_NOTE,
    PAPER,
    TABULAR_NOTE,
    TRAIN_POINTS,
    UCI,
)


def _methods(tab: dict, img: dict, post_tab: dict, post_img: dict, mc_samples: int, mdn_components: int,
             mdn_img_epochs: int, mc_samples_images: int | None = None) -> dict[str, dict]:
    mc_samples_images = mc_samples if mc_samples_images is None else mc_samples_images
    return {
        "icnlm": {"tabular": dict(tab), "images": dict(img), "posterior_tabular": dict(post_tab),
                  "posterior_images": dict(post_img), "n_features": 10},
        "icnlm-tanh": {"tabular": dict(tab, activation="tanh"), "images": dict(img, activation="tanh"),
                       "posterior_tabular": dict(post_tab), "posterior_images": dict(post_img), "n_features": 10},
        "mc-dropout": {"tabular": dict(tab), "images": dict(img), "dropout": 0.05, "n_samples": mc_samples,
                       "n_samples_images": mc_samples_images},
        "mdn": {"tabular": dict(tab), "images": dict(img, epochs=mdn_img_epochs), "n_components": mdn_components},
        "deterministic": {"tabular": dict(tab), "images": dict(img)},
        "naive": {},
    }


PAPER_METHODS = _methods(_TABULAR, _IMAGES_PAPER, dict(_POSTERIOR, nuts_samples=300, nuts_warmup=300),
                         dict(_POSTERIOR, nuts_samples=200, nuts_warmup=200, device="cpu"),
                         mc_samples=1000, mdn_components=50, mdn_img_epochs=10, mc_samples_images=50)
_SMOKE_POSTERIOR = dict(_POSTERIOR, vi_max_iter=800, vi_min_iter=400, nuts_samples=40, nuts_warmup=40,
                        grid_size=128, n_draws=100)
# the smoke presets leave out icnlm-tanh (the icnlm path with another activation; tested on its own)
SMOKE_METHODS = {k: v for k, v in _methods(
    dict(lr=1e-3, batch_size=32, min_steps=60, min_epochs=2), dict(_IMAGES, epochs=2), _SMOKE_POSTERIOR,
    _SMOKE_POSTERIOR, mc_samples=50, mdn_components=5, mdn_img_epochs=2).items() if k != "icnlm-tanh"}


METRICS = (
    MetricSpec("mae", "MAE", "lower"),
    MetricSpec("mse", "MSE", "lower"),
    MetricSpec("acc_I", "Accuracy I (mapped t_I)", "higher", "share of |error| <= t_I (see the notes)"),
    MetricSpec("acc_II", "Accuracy II (mapped t_II)", "higher", "share of |error| <= t_II"),
    MetricSpec("acc_6", "Accuracy at 6 deg (raw)", "higher", "driving only"),
    MetricSpec("acc_2", "Accuracy at 2 deg (raw)", "higher", "driving only"),
    MetricSpec("nll", "NLL", "lower", "not reported by the paper"),
    MetricSpec("crps", "CRPS", "lower", "not reported by the paper; on <= 1,000 test points"),
    MetricSpec("marginal_calibration_gap", "marginal calibration gap (test)", "lower",
               "sup_t |mean_i F_i(t) - G_n(t)| (claim 4)"),
    MetricSpec("train_marginal_gap", "marginal calibration gap (train)", "lower", "in-sample (C2)"),
    MetricSpec("calibration_error", "PIT calibration error", "lower", "mean |PIT ECDF - p| (claim 5)"),
    MetricSpec("coverage_error", "coverage error (11 levels)", "lower", "mean |coverage - level| (claim 6)"),
    MetricSpec("coverage_95", "coverage 95 %", "closer to 0.95"),
    MetricSpec("width_95", "width 95 %", "lower", "read with coverage; on <= 1,000 test points"),
    MetricSpec("var_ratio", "MSE / mean variance", "closer to 1", "> 1: overconfident (claim 7)"),
    MetricSpec("ev_spearman", "rank corr(variance, squared error)", "higher", "error-variance relation (claim 7)"),
    MetricSpec("fit_seconds", "fit seconds", "lower", "network + posterior"),
)


#: what the report prints after the tables: NOTES.md beside the code, a template whose {NAMES} are
#: the settings it quotes
NOTES = (Path(__file__).parent / "NOTES.md").read_text(encoding="utf-8").format(
    IMAGES_NOTE=IMAGES_NOTE, TABULAR_NOTE=TABULAR_NOTE, EXPENSIVE_POINTS=EXPENSIVE_POINTS, TRAIN_POINTS=TRAIN_POINTS)

EXPERIMENT = Experiment(
    name="icnlm",
    title="IC-NLM (Hoffmann & Klein): marginally calibrated steering predictions against MC dropout, MDN and "
    "a deterministic net",
    paper=PAPER,
    presets={
        "smoke": Preset(
            name="smoke",
            description="test of the pipeline (about a minute): yacht split 0, tiny networks and posteriors",
            datasets=("yacht",),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "smoke-driving": Preset(
            name="smoke-driving",
            description="test of the image path: 1,000 driving frames (4 episodes), 2 epochs, tiny posteriors",
            datasets=("driving-1k",),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="driving (30,000 CarRacing frames, CNNs, episode-wise split 0) and UCI yacht, energy, "
            "concrete, boston (splits 0-1, MLPs); IC-NLM x {ridge, horseshoe} x {VI, NUTS} with the paper's ReLU "
            "features and with tanh features (ours), MC dropout, MDN, deterministic, naive",
            datasets=("driving", *UCI),
            methods=PAPER_METHODS,
            seeds=(0,),
            splits=None,  # driving: split 0; UCI: splits 0-1 (_n_splits)
        ),
    },
    metrics=METRICS,
    paper_numbers=_paper_numbers(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
    builds_on={"icnlm-tanh": "icnlm"},  # the IC-NLM on tanh features
)
