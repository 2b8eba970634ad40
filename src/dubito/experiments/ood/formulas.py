"""The paper's formulas: settings per size class, MC dropout's weight decay from [C]'s loss, LPP of mixtures and Gaussians, sigma ratios."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dubito.experiments.ood.vocab import RATIO_REGIONS

# ---------------------------------------------------------------------------------- formulas


def mc_dropout_weight_decay(sigma_l: float, n_train: int, batch_size: int) -> float:
    r"""Our MSE + coupled-L2 weight decay equal to [C]'s loss (spec §3; contract).

    [C]: sum over the batch of (y - f)^2 / (2 sigma_l^2) with Adam weight decay lambda = 0.1 / sqrt(N),
    N = floor(10 n_train / 9) (spec §3: [P]'s 10^(-1/sqrt N) is a typo). Multiplying that loss by
    2 sigma_l^2 / B gives mean (y - f)^2 + (2 sigma_l^2 lambda / B) / 2 ||theta||^2, i.e. torch's
    weight_decay = 2 sigma_l^2 lambda / B on the mean squared error (Adam is invariant to the
    overall scale of the loss up to its eps)."""
    n_full = math.floor(10 * int(n_train) / 9)
    lam = 0.1 / math.sqrt(n_full)
    return 2.0 * float(sigma_l) ** 2 * lam / int(batch_size)


def lpp_mixture(draws: np.ndarray, y: np.ndarray, sigma_l: float, y_scale: float = 1.0) -> float:
    r"""mean_i ln[(1/S) sum_s N(y_i; f_s(x_i), sigma_l^2)] - ln s_y (spec §4; logsumexp, standardised units).

    draws (S, N) and y (N,) in standardised units; ``y_scale`` = s_y maps the density to original units."""

    f = np.asarray(draws, dtype=np.float64)
    r = (np.asarray(y, dtype=np.float64)[None, :] - f) / sigma_l
    logp = -0.5 * r * r - math.log(sigma_l) - 0.5 * math.log(2 * math.pi)
    return float(np.mean(logsumexp(logp, axis=0) - math.log(f.shape[0])) - math.log(y_scale))


def lpp_gaussian(draws: np.ndarray, y: np.ndarray, sigma_l: float, y_scale: float = 1.0) -> float:
    r"""mean_i ln N(y_i; ybar_i, Sigma_i^2 + sigma_l^2) - ln s_y, Sigma^2 the ddof-1 variance of the draws
    (MC dropout and Ensemble, spec §4). ``sigma_l = 0`` is [C]'s ensemble LPP (spec §8.4)."""
    f = np.asarray(draws, dtype=np.float64)
    var = f.var(axis=0, ddof=1) + float(sigma_l) ** 2
    r2 = (np.asarray(y, dtype=np.float64) - f.mean(axis=0)) ** 2
    return float(np.mean(-0.5 * np.log(2 * math.pi * var) - r2 / (2 * var)) - math.log(y_scale))


def sigma_ratio(x: np.ndarray, sigma: np.ndarray, sigma_train: np.ndarray, regions=RATIO_REGIONS) -> float:
    """Mean sigma on the grid points inside ``regions`` over the mean sigma on the training inputs
    (spec §6 finding 1)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    mask = np.zeros(x.shape, dtype=bool)
    for lo, hi in regions:
        mask |= (x >= lo) & (x <= hi)
    return float(np.mean(np.asarray(sigma)[mask]) / np.mean(sigma_train))
