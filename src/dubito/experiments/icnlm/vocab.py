"""Names, constants and settings of the IC-NLM experiment: the paper, variant names, data sets, evaluation sizes, the methods' settings per preset."""

from __future__ import annotations

import numpy as np

PAPER = (
    "L. Hoffmann and N. Klein (2023), Marginally calibrated response distributions for end-to-end learning "
    "in autonomous driving, Ann. Appl. Stat. 17, 1740-1763 (arXiv:2110.01050), Table 1, Figs. 5-8"
)

#: The paper's 11 interval levels (spec §3.4 [C]).
LEVELS = (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 0.99)
ICNLM_VARIANTS = ("IC-NLM ridge VI", "IC-NLM ridge NUTS", "IC-NLM horseshoe VI", "IC-NLM horseshoe NUTS")
NO_BAYES = "DNN on z (No Bayes)"
#: "icnlm-tanh": the same model with tanh features (psi in (-1, 1)^p) instead of the paper's ReLU, ours:
#: ReLU features' ||psi||^2, which sets both the copula's mean and its spread (s_i), varied 4.5-21x over
#: the rows, and the IC-NLM predicted worse than its own network (see the notes).
TANH = " · tanh ψ"
MC_PAPER, MC_NOISE = "MC dropout", "MC dropout + noise"
VARIANTS = {
    "icnlm": (*ICNLM_VARIANTS, NO_BAYES),
    "icnlm-tanh": tuple(v + TANH for v in (*ICNLM_VARIANTS, NO_BAYES)),
    "mc-dropout": (MC_PAPER, MC_NOISE),
    "mdn": ("MDN",),
    "deterministic": ("Deterministic",),
    "naive": ("Naive",),
}

#: Driving data sets: name -> frames recorded (seed 0, default recording settings).
DRIVING = {"driving": 30_000, "driving-1k": 1_000}
UCI = ("yacht", "energy", "concrete", "boston")
UCI_SPLITS = (0, 1)

EXPENSIVE_POINTS = 1000   # test points for CRPS, widths and the average density
TRAIN_POINTS = 2000       # training rows for the in-sample marginal calibration (C2)
PIT_POINTS = 1000         # PIT values kept per variant (the same subsample)
GRID_POINTS = 301         # y-grid of the marginal calibration plots
HIST_BINS = 40
NU_POINTS = 101           # variance thresholds of the error-variance curve
SHARES = tuple(np.round(np.linspace(0.05, 1.0, 20), 2))

TABULAR_NOTE = (
    "Tabular networks: Adam lr 1e-3, batch 32, max(60, ceil(3000 / batches per epoch)) epochs, i.e. at least "
    "3,000 Adam steps. The paper's 2.5e-4 x 60 epochs of batch 32 are 82,000 steps on its 43,736 images but "
    "only 540 on yacht's 277 rows; measured on splits 0-1 (deterministic net, test RMSE): yacht 3.1/4.0 at the "
    "paper's settings against 0.75/0.77 at lr 1e-3 with 3,000 steps, energy 1.86/2.06 against 0.47/0.59, "
    "concrete 6.4/5.7 against 5.0/4.9; boston 2.3/2.9 against 2.8/2.7 (no gain). Twice the steps changed "
    "little (yacht 0.71/0.83, energy 0.37/0.58). The same step budget serves all networks (the paper: "
    "MDN up to 150 epochs, the rest 60, stopped by eye)."
)

_TABULAR = dict(lr=1e-3, batch_size=32, min_steps=3000, min_epochs=60)
_IMAGES = dict(network="cnn", lr=2.5e-4, batch_size=32, epochs=60)  # spec §2.2 [C]
# The paper preset's image networks: 10 epochs for every network (the paper 60, MDN 150), MC dropout
# with 50 masks (spec §5: "reduce to <= 200 masks" on a CPU), NUTS 200 + 200, and the posteriors
# fitted on the CPU (small, sequential work) even when the networks train on a GPU: what fits the
# one CPU core per process this reproduction had (IMAGES_NOTE).
_IMAGES_PAPER = dict(_IMAGES, epochs=10)
IMAGES_NOTE = (
    "Driving settings are cut to the compute at hand (one shared CPU core per process; our GPU time ran out "
    "before a driving cell finished: horseshoe NUTS at n = 24,000 costs about 0.6 s per iteration here): "
    "every image network trains 10 epochs of batch 32 (7,500 Adam steps at lr 2.5e-4; the paper 60 epochs, "
    "MDN up to 150), MC dropout uses 50 masks (the paper 1,000; spec §5 suggests <= 200 on a CPU), NUTS "
    "200 warm-up + 200 draws x 2 chains."
)
_POSTERIOR = dict(vi_max_iter=14_000, vi_min_iter=10_000, vi_draws=50, vi_rank=3, nuts_samples=1000,
                  nuts_warmup=1000, nuts_chains=2, grid_size=512, n_draws=1000)
