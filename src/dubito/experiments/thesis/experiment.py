"""The presets (smoke, paper), the metrics and the `Experiment`; the notes are NOTES.md beside this file."""

from __future__ import annotations

from pathlib import Path

from dubito.data.fashion_mnist import fashion_mnist_available
from dubito.experiments.base import (
    Experiment,
    Preset,
)
from dubito.experiments.thesis.cell import run_cell
from dubito.experiments.thesis.paper import _paper_numbers
from dubito.experiments.thesis.report import report_sections
from dubito.experiments.thesis.vocab import (
    BETA_FACTORS,
    BUILDS_ON,
    ENSEMBLES,
    METRICS,
    PAPER,
    PER_CLASS,
    SINGLE,
    T_SWEEP,
)

# ---------------------------------------------------------------------------------- presets

_LAPLACE_GRID = dict(scales=(1.0, 10.0, 100.0, 1000.0, "n"), dampings=(0.1, 1.0, 5.0, 10.0, 15.0, 20.0, 50.0, 100.0))


def _methods(common: dict, members, autolabel: dict) -> dict:
    out = {m: dict(common) for m in SINGLE}
    for e in ENSEMBLES:
        out[e] = dict(common, member_seeds=list(members), seeds=[0])
    out["autolabel"] = dict(common, autolabel=autolabel)
    return out


_SMOKE_COMMON = dict(
    data=dict(seed=0, augment=4, n_per_letter=4, n_patches=200, strength=0.5),
    network="mlp", features=32, hidden=[32, 32, 32], epochs=4, batch_size=128, patience=3, n_samples=10, p=0.1,
    laplace=dict(n_fit=500, n_val=300, n_samples=10, n_samples_grid=5, scales=[1.0, "n"], dampings=[1.0, 15.0]),
    # max_exact as the paper preset's (exact up to 5 objects, loopy BP for 6): a quarter faster than 1,000
    crf=dict(n_train=300, n_val=60, n_test=80, max_exact=100_000, sweep=[0.0, 0.5, 4.0, 32.0], grid=[0.0, 0.5, 2.0],
             # the weak-context variant on fewer scenes and two sweep points (the smoke's time is mostly the CRF)
             weak=dict(n_val=30, n_test=40, sweep=[0.0, 32.0])),
    t_sweep=[5, 10, 20], beta=dict(factors=[10.0], seeds=[0]),
)
SMOKE_METHODS = _methods(_SMOKE_COMMON, (0, 1), dict(base="cdp", fractions=[0.5], epochs=1, n_source=1000, n_val=300,
                                                     per_class=list(PER_CLASS), manual_curve=[0.1, 1.0]))

_PAPER_COMMON = dict(
    data=dict(seed=0, n_source=20000, n_target=3000, n_source_test=2000, n_ood=2000, strength=0.5),
    network="cnn", features=256, hidden=[256, 256, 256], epochs=20, batch_size=128, patience=5, n_samples=50, p=0.1,
    # the spec's 5 x 8 grid costs ~9 min per model here (13 s per point); 3 x 4 of its points (NOTES)
    laplace=dict(n_fit=5000, n_val=2000, n_samples=50, n_samples_grid=10, scales=(1.0, 100.0, "n"),
                 dampings=(0.1, 1.0, 15.0, 100.0)),
    crf=dict(n_train=2000, n_val=500, n_test=1000, max_exact=100_000),
    t_sweep=list(T_SWEEP), beta=dict(factors=list(BETA_FACTORS), seeds=[0]),
)
PAPER_METHODS = _methods(_PAPER_COMMON, (0, 1, 2), dict(base="cdp", fractions=[0.2, 0.5], epochs=5, n_source=10000,
                                                         n_val=2000, per_class=list(PER_CLASS),
                                                         manual_curve=[0.1, 1.0]))


class _ThesisExperiment(Experiment):
    """Ensemble cells run once (seed 0): their members are the preset's seed models."""

    def cells(self, preset, datasets=None, methods=None):
        out = super().cells(preset, datasets, methods)
        return [c for c in out if "seeds" not in c.settings or c.seed in c.settings["seeds"]]


def _unavailable(preset: Preset) -> dict[str, str]:
    out = {}
    if "fashion-mnist" in preset.datasets:

        if not fashion_mnist_available():
            out["fashion-mnist"] = ("Fashion-MNIST files not found (install the Debian package dataset-fashion-mnist, "
                                    "or let dubito.data.load('fashion-mnist') download them)")
    return out


#: what the report prints after the tables; kept as Markdown beside the code
NOTES = (Path(__file__).parent / "NOTES.md").read_text(encoding="utf-8")

EXPERIMENT = _ThesisExperiment(
    name="thesis",
    title="Uncertainty-based improvement of a visual classifier (Feng 2019): Table 4.1, Laplace, auto-labelling, CRF",
    paper=PAPER,
    presets={
        "smoke": Preset(
            name="smoke",
            description="pipeline test (about a minute): sklearn 8x8 digits, MLP 32-wide, 4 epochs, T = 10, one seed "
            "(ensembles of seeds 0-1), tiny Laplace grid, 80 test scenes (40 in weak context), T sensitivity at "
            "5 / 10 / 20, β x 10 only",
            datasets=("digits",),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="Fashion-MNIST (20k source images, 3k target objects x 3 views, 2k + 2k OOD), 2-conv CNN + "
            "3 x 256 head, <= 20 epochs, T = 50, 3 seeds, Laplace grid s in {1, 100, N} x d in {0.1, 1, 15, 100} "
            "(12 of the spec's 40 points), 1,000 test scenes (strong and weak context), T sensitivity at 10 / 20 / "
            "50 / 100, relaxed vs hard sampler, β x {0.1, 10} (seed 0), class-balanced auto-labelling and the manual "
            "labels saved (manual at q in {0.1, 0.2, 0.5, 1}); about 3.2 CPU hours on one thread (NOTES)",
            datasets=("fashion-mnist",),
            methods=PAPER_METHODS,
            seeds=(0, 1, 2),
            splits=(0,),
        ),
    },
    metrics=METRICS,
    paper_numbers=_paper_numbers(),
    run_cell=run_cell,
    n_splits=lambda dataset: 1,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
    builds_on=BUILDS_ON,
)
