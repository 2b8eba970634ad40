"""Where the IC-NLM's in-sample marginal miscalibration comes from (issue 24).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/icnlm_marginal_gap.py [--rows 2000] [--out FILE]

A skewed, heavy-tailed synthetic case: x ~ U(-2, 2)^3, y = sin(x0) + 0.5 x1 + a centred
lognormal(0, 0.75) noise. `ImplicitCopulaRegressor` with its defaults is fitted and judged on its
training rows. Printed:
- the marginal calibration gap max_t |F_bar(t) - ECDF(t)| (F_bar the average predictive CDF);
- the KDE marginal's own gap, to separate the marginal from the copula;
- the latent (z-space) moments of the predictive: the mean of the predictive means, their
  variance, and the average predictive variance, against the residual variance of the observed
  pseudo-responses z = Phi^-1(F_Y(y)) around the predictive means. A predictive whose average
  variance exceeds that residual variance is over-dispersed in z and miscalibrated in y.
A check, not a timed test; about a minute.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import Printer, header, one_thread_env, torch_one_thread  # noqa: E402

one_thread_env()


def skewed_case(rows: int):
    """(X, y): x ~ U(-2, 2)^3, y = sin(x0) + 0.5 x1 + a centred lognormal(0, 0.75) noise (seed 0)."""
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (rows, 3))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + rng.lognormal(0, 0.75, rows) - np.exp(0.75**2 / 2)


def main(argv=None) -> None:
    import numpy as np
    from scipy.special import ndtri

    from dubito.metrics import marginal_calibration
    from dubito.regression import ImplicitCopulaRegressor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--out", default=None, help="also write the lines to this file")
    args = ap.parse_args(argv)
    torch = torch_one_thread()
    out = Printer(args.out)
    out(header(torch, "cpu"))
    X, y = skewed_case(args.rows)
    for settings in ({}, {"activation": "tanh"}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dead-unit notices of the ReLU features
            est = ImplicitCopulaRegressor(random_state=0, progress=False, **settings).fit(X, y)
            mc = marginal_calibration(est.predict_distribution(X), y)
        kde = np.asarray(est.marginal_.cdf(mc.grid), dtype=np.float64)
        zp, _ = est._z_prediction(est.features(X))
        loc, scale = np.asarray(zp.loc), np.asarray(zp.scale)  # (N, J): an equal-weight mixture in z
        mean = loc.mean(axis=1)
        var = (scale**2 + loc**2).mean(axis=1) - mean**2
        z = ndtri(np.clip(np.asarray(est.marginal_.cdf(y), dtype=np.float64), 1e-12, 1 - 1e-12))
        out(f"{settings or 'defaults'}: marginal gap max {mc.max_gap:.3f} (mean {mc.mean_gap:.3f}); KDE marginal alone "
            f"{np.abs(kde - mc.empirical).max():.3f}; average predictive vs KDE {np.abs(mc.forecast - kde).max():.3f}")
        out(f"  z-space: mean of predictive means {mean.mean():.3f}, their variance {mean.var():.3f}, average "
            f"predictive variance {var.mean():.3f} (total {mean.var() + var.mean():.3f}); observed z variance "
            f"{z.var():.3f}, residual variance around the predictive means {(z - mean).var():.3f}")


if __name__ == "__main__":
    main()
