"""A tiny fake experiment for the report tests (never run: its cells are written by hand).

Datasets: "alpha" (two methods: "ens" with variants DE and EXT, "single" with one variant
"mean"), "beta" (a 1-D toy with a curve_1d artefact), "gone" (unavailable here).
"""

from dubito.experiments.base import CellResult, Experiment, MetricSpec, PaperNumber, Preset

UNAVAILABLE_REASON = "needs gone/data.txt under DUBITO_DATA (not redistributable)"


def run_cell(cell, device="cpu", progress=None) -> CellResult:  # pragma: no cover - never run
    raise NotImplementedError("the report fixture is never run")


def n_splits(dataset: str) -> int:
    return 3


def unavailable(preset) -> dict:
    return {"gone": UNAVAILABLE_REASON} if "gone" in preset.datasets else {}


PAPER_NUMBERS = (
    # alpha DE rmse: ours mean is 1.2, paper 1.0 ± 0.1 -> |diff| 0.2 > 0.1: flagged
    PaperNumber("alpha", "DE", "rmse", 1.0, spread=0.1, source="Table 2"),
    # alpha DE nll: ours 2.0, paper 2.05 ± 0.1 -> |diff| 0.05 <= 0.1: not flagged
    PaperNumber("alpha", "DE", "nll", 2.05, spread=0.1, source="Table 2"),
    # alpha EXT rmse: ours 1.5, paper 1.3, no spread, tolerance 0.15 -> flagged by tolerance
    PaperNumber("alpha", "EXT", "rmse", 1.3, tolerance=0.15, source="Table 3", note="single run"),
    # alpha EXT nll: ours 2.5, paper 2.45, no spread, tolerance 0.1 -> not flagged
    PaperNumber("alpha", "EXT", "nll", 2.45, tolerance=0.1, source="Table 3"),
    # alpha mean (method "single") rmse: ours 3.0, paper 2.0, neither spread nor tolerance -> no flag
    PaperNumber("alpha", "mean", "rmse", 2.0, source="Fig. 4"),
    # a variant we never ran
    PaperNumber("alpha", "MC dropout", "rmse", 0.9, spread=0.05, source="Table 2"),
)

EXPERIMENT = Experiment(
    name="fixture",
    title="Report fixture: a fake experiment",
    paper="Nobody et al. (2099), Journal of Tests",
    presets={
        "paper": Preset(
            name="paper",
            description="the fixture's paper protocol",
            datasets=("alpha", "beta", "gone"),
            methods={"ens": {"epochs": 3, "members": 5}, "single": {}},
            seeds=(0,),
            splits=(0, 1, 2),
        ),
        "quick": Preset(name="quick", description="never stored", datasets=("alpha",), methods={"ens": {}}),
    },
    metrics=(
        MetricSpec("rmse", "RMSE"),
        MetricSpec("nll", "NLL", note="Gaussian negative log-likelihood per point."),
        MetricSpec("cov95", "coverage 95%", better="closer to 0.95"),
    ),
    paper_numbers=PAPER_NUMBERS,
    run_cell=run_cell,
    n_splits=n_splits,
    unavailable=unavailable,
    notes="The fixture's notes: splits are **fake**.",
)
