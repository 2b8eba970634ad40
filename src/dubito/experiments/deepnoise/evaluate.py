"""(predictive, y) -> the experiment's metrics (RMSE, NLL, WEPI, CRPS, coverage, W1) and artefacts (PIT, bands)."""

from __future__ import annotations

import numpy as np

from dubito.data import deepnoise_synthetic as syn
from dubito.experiments.deepnoise.data import _Data
from dubito.experiments.deepnoise.vocab import (
    CURVE_TRAIN_POINTS,
    DEFAULT_DRAWS,
    MAX_DRAW_ELEMENTS,
)
from dubito.metrics import calibration_error, crps_ensemble, nll, pit
from dubito.metrics.quantile_distance import quantile_w1
from dubito.metrics.wepi import wepi
from dubito.predictive.mixture import GaussianMixture

# ---------------------------------------------------------------------------------- evaluation


def _draws(pred, n: int, rng: np.random.Generator) -> np.ndarray:
    """n predictive draws per input, shape (n, N).

    An equal-weight `GaussianMixture` (B-DeepNoise, DE, VI, BNN) is sampled component-wise:
    with n equal to its M components one draw per component, which is [C]'s forward sample
    (one per kept state and noise realisation); with n < M a random subset of the components
    shared by all inputs; with n > M components drawn with replacement. (The generic
    ``GaussianMixture.sample`` loops over components, too slow for M = 10,000.)
    """

    if isinstance(pred, GaussianMixture):
        w = np.asarray(pred.weights)
        if w.size and np.ptp(w) <= 1e-12 * float(np.max(w)):
            mu, sd = np.asarray(pred.means), np.sqrt(np.asarray(pred.variances))
            n_in, m = mu.shape
            if n <= m:
                comp = np.arange(m) if n == m else np.sort(rng.choice(m, size=n, replace=False))
                return mu[:, comp].T + sd[:, comp].T * rng.standard_normal((n, n_in))
            idx = rng.integers(m, size=(n, n_in))
            cols = np.arange(n_in)[None, :]
            return mu[cols, idx] + sd[cols, idx] * rng.standard_normal((n, n_in))
    return np.asarray(pred.sample(int(n), generator=rng), dtype=np.float64)


def _n_draws(pred, requested: int | None, n_inputs: int) -> int:
    """Draws per input: ``requested``, else `DEFAULT_DRAWS` or all components of a larger
    mixture (one draw each, [C]'s forward sample), capped so that draws x inputs stays below
    `MAX_DRAW_ELEMENTS` (at least 200)."""
    m = int(getattr(pred, "n_components", 0) or 0)
    n = int(requested) if requested else max(m, DEFAULT_DRAWS)
    return max(200, min(n, MAX_DRAW_ELEMENTS // max(1, n_inputs)))


def _evaluate(pred, y: np.ndarray, rng: np.random.Generator, n_draws: int | None) -> tuple[dict, np.ndarray, int]:
    """Test metrics of one predictive (module docstring) and its PIT values."""

    y = np.asarray(y, dtype=np.float64)
    mean = np.asarray(pred.mean, dtype=np.float64)
    S = _n_draws(pred, n_draws, len(y))
    draws = _draws(pred, S, rng)
    u = np.asarray(pit(pred, y), dtype=np.float64)
    lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
    out = {
        "rmse": float(np.sqrt(np.mean((mean - y) ** 2))),
        "nll": float(np.mean(nll(pred, y))),
        "wepi_95": float(wepi(draws, y, coverage=0.95, reduce="median")),
        "wepi_95_mean": float(wepi(draws, y, coverage=0.95, reduce="mean")),
        "crps": float(np.mean(crps_ensemble(draws, y))),
        "coverage_95": float(np.mean((u >= 0.025) & (u <= 0.975))),
        "width_95": float(np.mean(hi - lo)),
        "calibration_error": float(calibration_error(pred, y)),
    }
    for name in ("epistemic_var", "aleatoric_var"):
        v = getattr(pred, name, None)
        if v is not None:
            out[f"mean_{name}"] = float(np.mean(np.asarray(v, dtype=np.float64)))
    return out, u, S


def _w1(pred_eval, q_eval: np.ndarray, rng: np.random.Generator, n_draws: int) -> tuple[float, np.ndarray]:
    """Table 1's W1 x 1000 at the evaluation inputs from ``n_draws`` predictive draws (as [C])."""

    S = _n_draws(pred_eval, n_draws, q_eval.shape[0])
    draws = _draws(pred_eval, S, rng)
    return 1000.0 * float(quantile_w1(draws, q_eval)), draws


def _r(a, digits: int = 5) -> list:
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def _band(pred_grid, x_grid, d: _Data, rng, variant: str) -> dict:
    """The ``curve_1d`` artefact (`report_plots`): the predictive mean and 5-95 % band on the grid
    beside the true one (panel "truth"); ``eta`` is the true median f(x)."""

    draws = _draws(pred_grid, min(4000, _n_draws(pred_grid, None, len(x_grid))), rng)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    truth = syn.true_quantiles(d.spec.noise, x_grid)
    t_lo, t_hi = np.quantile(truth, [0.05, 0.95], axis=1)
    keep = np.sort(rng.choice(len(d.y_tr), size=min(CURVE_TRAIN_POINTS, len(d.y_tr)), replace=False))
    return {
        "x": _r(x_grid, 6),
        "eta": _r(syn.median_function(x_grid)),
        "x_train": _r(d.X_tr[keep, 0], 6),
        "y_train": _r(d.y_tr[keep]),
        "level": 0.90,
        "variants": {
            "truth (mean, 5-95 % quantiles)": {"mean": _r(truth.mean(axis=1)), "lo": _r(t_lo), "hi": _r(t_hi)},
            variant: {"mean": _r(pred_grid.mean), "lo": _r(lo), "hi": _r(hi)},
        },
    }
