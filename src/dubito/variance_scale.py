r"""One variance scale for a Gaussian- or Student-t-mixture predictive, fitted on held-out rows.

Deep ensembles of individually calibrated members are under-confident: the members' errors are
partly independent, so the ensemble mean is better than each member while the mixture keeps
each member's own variance (Rahaman & Thiery 2021, "Uncertainty quantification and deep
ensembles", NeurIPS; they recommend calibrating the pooled predictive). The remedy here is
sigma scaling (Laves et al. 2020, "Well-calibrated regression uncertainty in medical imaging
with deep learning", MIDL) of the pooled mixture: every component variance times one c > 0,

    p_c(y | x) = sum_l w_l N(y; m_l(x), c v_l(x))

(for a `StudentTMixture` the components are Student-t with variance c v_l(x), the same df),

with c the maximum a posteriori value under a log-normal prior, on the m held-out rows:

    c = argmin_c  - sum_j log p_c(y_j | x_j) + (log c)^2 / (2 tau^2),   tau = `PRIOR_SD`.

The prior keeps c near 1 when the held-out rows are few (diabetes: 36 rows, c 0.75-1.09) and
lets many rows move it far (naval split 0, 1,074 rows: c = 0.082, the members' variance heads being
about three times the ensemble's errors there). tau = 0.5 was chosen on development data only,
never on the UCI benchmark: diabetes splits 0-9 and Friedman #1 (n = 3,000, noise sd 0.05 and 1,
seeds 0-2), where tau 0.25 / 0.5 / 1 / no prior moved the mean test NLL against c = 1 by
-0.008 / -0.009 / -0.009 / -0.009 (diabetes) and -0.026 / -0.024 / -0.022 / -0.021 (Friedman, sd
0.05); 0.5 is the middle of that flat range (a factor e^{+-1} at two prior sd).

The estimators fit c on the rows that also chose their stopping epoch, which makes c a little small:
on validation rows a c from fresh rows was 1.25x the MDN's and 1.21x the ensemble's, worth 0.02 NLL,
while stopping and scaling on separate halves of the held-out share lost more than that
(docs/results/heldout-scale-optimism.md), so one share does both.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.student import StudentTMixture

__all__ = ["AUTO_MIN_HELDOUT_ROWS", "AUTO_VARIANCE_SCALINGS", "PRIOR_SD", "VARIANCE_SCALINGS", "fit_variance_scale",
           "scale_mixture", "scale_spread", "scales_on"]

#: An estimator's ``variance_scaling``: "heldout" fits c on its held-out rows (1 without them);
#: "none" keeps c = 1; "auto" (MC dropout's default) is "heldout" from ``AUTO_MIN_HELDOUT_ROWS``
#: held-out rows up and "none" below.
VARIANCE_SCALINGS = ("heldout", "none")
AUTO_VARIANCE_SCALINGS = ("auto",) + VARIANCE_SCALINGS
#: MC dropout's scale on the validation rows of the first 3 standard splits (sessions 20-21,
#: docs/results/ensemble-budget.md): it helped or was neutral on the sets whose test cells hold out
#: 144 rows or more (wine, kin8nm -1.199 -> -1.231, power, naval coverage@95 1.000 -> 0.954) and
#: hurt NLL on those with 28-93 (yacht 1.96 -> 2.64, boston, concrete), but for energy's 69.
AUTO_MIN_HELDOUT_ROWS = 100


def scales_on(variance_scaling: str, n_heldout: int) -> bool:
    """Whether an estimator with this ``variance_scaling`` fits c on its ``n_heldout`` held-out rows:
    "heldout" with any, "auto" with ``AUTO_MIN_HELDOUT_ROWS`` or more, "none" never."""
    if variance_scaling == "auto":
        return n_heldout >= AUTO_MIN_HELDOUT_ROWS
    return variance_scaling == "heldout" and n_heldout > 0


#: tau, the prior sd of log c (module docstring).
PRIOR_SD = 0.5

#: c is searched in [1e-4, 1e4].
_LOG_BOUND = math.log(1e4)


def _same_kind(pred, means, variances, noise):
    """A mixture of ``pred``'s kind (Gaussian, or Student-t with its df) with ``pred``'s weights."""
    if isinstance(pred, StudentTMixture):
        return StudentTMixture(pred.weights, means, variances, pred.df, noise_variances=noise)
    return GaussianMixture(pred.weights, means, variances, noise_variances=noise)


def scale_mixture(pred: GaussianMixture | StudentTMixture, c: float) -> GaussianMixture | StudentTMixture:
    """``pred`` with every component variance (and its noise part) multiplied by c; a Student-t
    mixture stays one, with its df."""
    noise = None if pred.noise_variances is None else c * pred.noise_variances
    return _same_kind(pred, pred.means, c * pred.variances, noise)


def scale_spread(pred: GaussianMixture | StudentTMixture, c: float) -> GaussianMixture | StudentTMixture:
    """``pred`` with its whole variance multiplied by c: each component mean moved to
    mean + sqrt(c) (m_l - mean) about the mixture mean, and each component variance (and its
    noise part) times c, so p_c(y) = p(mean + (y - mean) / sqrt(c)) / sqrt(c). For predictives
    whose spread of means is itself too wide or too narrow (MC dropout's masks), where
    `scale_mixture` would scale only the noise."""
    mean = pred.mean[:, None]
    root = math.sqrt(c)
    noise = None if pred.noise_variances is None else c * pred.noise_variances
    return _same_kind(pred, mean + root * (pred.means - mean), c * pred.variances, noise)


def fit_variance_scale(pred: GaussianMixture | StudentTMixture, y: np.ndarray, prior_sd: float = PRIOR_SD,
                       scale=scale_mixture) -> float:
    """The MAP scale c of the module docstring for held-out ``pred`` and targets ``y`` (m,);
    ``scale`` (`scale_mixture` or `scale_spread`) says what c multiplies."""
    y = np.asarray(y, dtype=np.float64)

    def objective(log_c: float) -> float:
        return float(-np.sum(scale(pred, math.exp(log_c)).log_prob(y)) + log_c**2 / (2.0 * prior_sd**2))

    result = minimize_scalar(objective, bounds=(-_LOG_BOUND, _LOG_BOUND), method="bounded",
                             options={"xatol": 1e-6})
    return float(math.exp(result.x))
