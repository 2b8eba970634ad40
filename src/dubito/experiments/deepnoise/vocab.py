"""Names and constants of the B-DeepNoise experiment: the paper, the methods' variant names, the data sets, evaluation sizes."""

from __future__ import annotations

PAPER = (
    "S. D. Zhang, J. Liu and J. Kang (2022), Bayesian deep noise neural networks (B-DeepNoise): "
    "density regression with a closed-form Gibbs sampler, arXiv:2206.05643, Tables 1-2"
)

#: method -> its variant name (the paper's column names where the paper has the method)
VARIANT = {
    "deepnoise": "B-DeepNoise",
    "deepnoise-paper-code": "B-DeepNoise (paper code)",
    "deepnoise-sgd": "DeepNoise-SGD",
    "mean-variance": "BP",
    "mfvi": "VI",
    "nuts": "BNN",
    "mc-dropout": "DMC",
    "ensemble-standard": "DE",
}
#: the paper's baselines (Table 2 has all five, Table 1 all but DMC)
BASELINES_T1 = ("BP", "VI", "BNN", "DE")
BASELINES_T2 = ("BP", "VI", "BNN", "DMC", "DE")
BDN = "B-DeepNoise"

#: short dataset prefix -> generator kind (spec §4.1)
KIND_SHORT = {"het": "heteroscedastic", "skew": "skewed", "multi": "multimodal"}
SYNTHETIC_N = (1000, 2000, 4000)
#: Table 2's order ([P])
UCI_SETS = ("yacht", "boston", "energy", "concrete", "wine", "kin8nm", "power", "naval", "protein")
SMALL_UCI = ("yacht", "boston", "energy", "concrete", "wine")
LARGE_UCI = ("kin8nm", "power", "naval")
GAL = "-gal"  # dataset-name suffix of the standard-split view
N_SPLITS_PAPER = {**{d: 20 for d in UCI_SETS}, "protein": 5}  # [P]/[C]: 20 (protein 5)
N_REPEATS_PAPER = 20                                           # [P] §3.1: "repeated for 20 times"

DMC_GRID = (0.005, 0.01, 0.05, 0.1)  # Gal & Ghahramani's grid (spec §4.3 [R])
DMC_VALIDATION = 0.2                 # share of the training rows held out to choose p
PIT_POINTS = 1000                    # PIT values kept per variant
DEFAULT_DRAWS = 10_000               # predictive draws per test point ([C]: 500 states x 20 realisations, UCI)
MAX_DRAW_ELEMENTS = 10_000_000       # draws x test points held at once (80 MB of float64)
CURVE_POINTS = 200                   # grid of the synthetic band plots
CURVE_TRAIN_POINTS = 1000            # training points shown in them
CURVE_REALIZATIONS = 10              # noise realisations per state for the band plots (4,000 draws of them)
CURVE_MAX_N = 1000                   # band plots for repeat 0 of the N <= 1000 sets only (the paper's Fig. 1)
