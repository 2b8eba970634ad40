"""The presets (smoke, budget, paper, paper-full), the metrics and the `Experiment`; the notes are NOTES.md beside this file."""

from __future__ import annotations

from pathlib import Path

from dubito.experiments.base import (
    Experiment,
    MetricSpec,
    Preset,
)
from dubito.experiments.common import uci_unavailable
from dubito.experiments.ood.cell import run_cell
from dubito.experiments.ood.paper import _paper_numbers
from dubito.experiments.ood.report import report_sections
from dubito.experiments.ood.vocab import (
    DATASETS,
    HMC_DATASETS,
    HYVI,
    PAPER,
    SIZE,
    SYNTHETIC,
)

# ---------------------------------------------------------------------------------- presets

_EVAL_PAPER = dict(n_predictors=1000, n_ood=10_000, n_param_entropy=1000, n_entropy_draws=100)
_HYVI_PAPER = dict(prior_sd=0.5, latent_dim=5, generator_hidden=(20, 40), n_ll_samples=100, n_kl_samples=500,
                   lr=0.005, lr_factor=0.7, min_lr=1e-4, **_EVAL_PAPER)
_MCD_PAPER = dict(dropout=0.05, lr=1e-3, epochs=2000, **_EVAL_PAPER, synthetic=dict(full_batch=True))
_ENS_PAPER = dict(n_members=5, optimizer="sgd", momentum=0.9, lr=0.01, adam_lr=1e-3, epochs=1000, **_EVAL_PAPER,
                  synthetic=dict(epochs=3000), large=dict(epochs=500))
_HMC_PAPER = dict(prior_sd=0.5, num_warmup=1000, num_samples=500, num_chains=2, target_accept_prob=0.8,
                  max_tree_depth=10, **_EVAL_PAPER, datasets=list(HMC_DATASETS))


def _methods(hyvi: dict, mcd: dict, ens: dict, hmc: dict) -> dict[str, dict]:
    out = {m: dict(hyvi) for m in ("nn-hyvi", "funn-hyvi")}
    out["mfvi"] = dict(hyvi, patience_factor=2)  # spec §3: MFVI needed patience x2 [P]
    out["funn-mfvi"] = dict(hyvi)
    out["mc-dropout"] = dict(mcd)
    out["deterministic-ensemble"] = dict(ens)
    out["nuts"] = dict(hmc)
    return out


PAPER_METHODS = _methods(_HYVI_PAPER, _MCD_PAPER, _ENS_PAPER, _HMC_PAPER)

def _with(base: dict, sizes: dict | None = None, **kw) -> dict:
    """``base`` updated by ``kw``, with the per-size overrides of ``sizes`` merged into base's (not replacing them)."""
    out = dict(base, **kw)
    for k, v in (sizes or {}).items():
        out[k] = dict(out.get(k, {}) or {}, **v)
    return out


_EVAL_BUDGET = dict(n_predictors=1000, n_ood=10_000, n_param_entropy=1000, n_entropy_draws=10)
#: spec §6 plan: <= 300 epochs, patience 10, T = 100 (UCI; ood-wave keeps its T = 50)
_SIZE_BUDGET = {k: dict(patience=10, max_epochs=300, **({"n_points": 100} if k != "synthetic" else {}))
                for k in SIZE}
BUDGET_METHODS = _methods(
    _with(_HYVI_PAPER, _SIZE_BUDGET, n_ll_samples=50, n_kl_samples=200, **_EVAL_BUDGET),
    _with(_MCD_PAPER, _SIZE_BUDGET, epochs=1000, **_EVAL_BUDGET),
    _with(_ENS_PAPER, _SIZE_BUDGET, **_EVAL_BUDGET),
    _with(_HMC_PAPER, _SIZE_BUDGET, num_warmup=300, num_samples=500, max_tree_depth=8, **_EVAL_BUDGET),
)

_EVAL_SMOKE = dict(n_predictors=100, n_ood=2000, n_param_entropy=100, n_entropy_draws=2)
_SIZE_SMOKE = {k: dict(patience=2, max_epochs=3, n_points=20, epochs=3) for k in SIZE}
SMOKE_METHODS = _methods(
    _with(_HYVI_PAPER, _SIZE_SMOKE, n_ll_samples=8, n_kl_samples=40, **_EVAL_SMOKE),
    _with(_MCD_PAPER, _SIZE_SMOKE, **_EVAL_SMOKE),
    _with(_ENS_PAPER, _SIZE_SMOKE, **_EVAL_SMOKE),
    _with(_HMC_PAPER, _SIZE_SMOKE, num_warmup=15, num_samples=25, max_tree_depth=3, **_EVAL_SMOKE),
)


class _OODExperiment(Experiment):
    """`Experiment` whose methods may name the datasets they run on (``settings["datasets"]``):
    HMC only on ood-wave and the small sets, as the paper (its Table 1 has NA on the large ones)."""

    def cells(self, preset, datasets=None, methods=None):
        out = super().cells(preset, datasets, methods)
        return [c for c in out if "datasets" not in c.settings or c.dataset in c.settings["datasets"]]


def _n_splits(dataset: str) -> int:
    return 1  # the paper's one split


def _unavailable(preset: Preset) -> dict[str, str]:
    return uci_unavailable(d for d in preset.datasets if d != SYNTHETIC)


METRICS = (
    MetricSpec("auroc", "AUROC", "higher", "OOD (10k nu samples) vs train ∪ test, score sigma(x)"),
    MetricSpec("rmse", "RMSE", "lower", "original units, mean of the predictors"),
    MetricSpec("lpp", "LPP", "higher", "original units (spec §4)"),
    MetricSpec("lpp_legacy", "LPP, sigma_l = 0", "higher", "ensemble only: [C]'s formula"),
    MetricSpec("lpp_formula", "LPP formula", "closer to lpp",
               "-½ ln(2π sigma_l²) - ln s_y - RMSE²/(2 sigma_l² s_y²) (spec §2.8)"),
    MetricSpec("h_param", "H param", "higher", "k-NN entropy (k = 1) of the parameter samples"),
    MetricSpec("h_pred", "H pred", "higher", "function-space entropy, mean over draws of X ~ nu^T"),
    MetricSpec("sigma_train", "mean sigma train", "lower", "standardised units"),
    MetricSpec("sigma_ood", "mean sigma OOD", "higher", "standardised units"),
    MetricSpec("sigma_ratio", "sigma ratio (finding 1)", "higher", "ood-wave only"),
    MetricSpec("sigma_ratio_far", "sigma ratio [-4,-2]", "higher", "ood-wave only (spec test 14: > 2)"),
    MetricSpec("epochs", "epochs", "lower", "HyVI: run until lr <= min_lr; HMC: warm-up + draws per chain"),
    MetricSpec("fit_seconds", "fit seconds", "lower", "CPU, one thread; not comparable to Table 6 (GPU)"),
)


#: what the report prints after the tables; kept as Markdown beside the code
NOTES = (Path(__file__).parent / "NOTES.md").read_text(encoding="utf-8")

EXPERIMENT = _OODExperiment(
    name="ood",
    title="OOD detection for regression: parameter vs predictor entropy (Pequignot et al.)",
    paper=PAPER,
    presets={
        "smoke": Preset(
            name="smoke",
            description="pipeline test (about a minute): ood-wave and yacht, every method with a few epochs "
            "and 100 predictors, 2 entropy draws of T = 20",
            datasets=(SYNTHETIC, "yacht"),
            methods=SMOKE_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "budget": Preset(
            name="budget",
            description="spec §6 plan: S_LL 50, KL 200 + 200, T 100, <= 300 epochs, patience 10; MC dropout "
            "1,000 epochs; HMC 300 warm-up + 500 draws x 2 chains (tree depth <= 8); 1,000 predictors, "
            "10 entropy draws; ood-wave and the eight UCI sets, one seed (HMC on ood-wave and the small sets)",
            datasets=DATASETS,
            methods=BUDGET_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "paper": Preset(
            name="paper",
            description="spec §2-§3 values (S_LL 100, KL 500 + 500, T 200, <= 2000 epochs (3000 on ood-wave), "
            "1,000 predictors, 100 entropy draws), all nine sets, ONE seed (the paper: 3) for the 2-core budget; "
            "HMC reduced (NUTS 1,000 warm-up + 500 draws x 2 chains); estimated 11-65 CPU hours, about 19 at "
            "~600 epochs (NOTES)",
            datasets=DATASETS,
            methods=PAPER_METHODS,
            seeds=(0,),
            splits=(0,),
        ),
        "paper-full": Preset(
            name="paper-full",
            description="the paper preset with the paper's 3 runs (seeds 0-2 of the one split): about 3 x the "
            "paper preset's cost (35-190 CPU hours, ~57 at ~600 epochs)",
            datasets=DATASETS,
            methods=PAPER_METHODS,
            seeds=(0, 1, 2),
            splits=(0,),
        ),
    },
    metrics=METRICS,
    paper_numbers=_paper_numbers(),
    run_cell=run_cell,
    n_splits=_n_splits,
    unavailable=_unavailable,
    notes=NOTES,
    report_sections=report_sections,
    # the paper's four variational rows are HyperVIRegressor's (family, space) pairs (vocab.HYVI); its
    # "Ensemble" is five MSE-trained `deterministic` nets
    builds_on={**{m: "hyvi" for m in HYVI}, "deterministic-ensemble": "deterministic"},
)
