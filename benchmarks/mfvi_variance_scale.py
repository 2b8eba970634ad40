"""Mean-field VI's held-out variance scale, chosen on validation rows (issue 19).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mfvi_variance_scale.py --records FILE.jsonl
        [--datasets boston concrete energy yacht wine kin8nm power naval] [--splits 3] [--diabetes 10] [--table]

`MeanFieldVIRegressor`'s 95 % intervals covered too much on the leaderboard's test splits (energy
0.989, naval 0.996, yacht 0.985). Its noise is one learned s for all inputs, and the ELBO sets it to
s^2 = mean_i E_q (y_i - g(x_i; w))^2 = (bias)^2 + Var_q g: the weight posterior's spread is in s^2
already, and the predictive (1/S) sum_s N(g_s, s^2) adds it again. ``variance_scaling="heldout"`` (the
default) multiplies s^2 by one c (`dubito.variance_scale.scale_mixture`), the MAP value on the fit's
held-out tenth under the log-normal prior of `dubito.variance_scale`. One fit gives three predictives,
scored paired: c = 1, that noise scale, and the alternative MC dropout uses, which scales the whole
variance (`scale_spread`: each draw moved to m + sqrt(c) (g_s - m) and s^2 times c; its own c, fitted
on the same held-out rows, which this script recomputes from the fit's seed). Validation rows only, as
benchmarks/icnlm_variance_scale.py: each of the first ``--splits`` standard splits is fitted (defaults,
``random_state`` = split) on 80 % of its training rows (`_common.validation_rows`) and scored on the
other 20 %; test rows are not used. ``--diabetes
k``: test coverage@95 and NLL on diabetes splits 0..k-1 (``random_state=0``; "diabetes-test"). Each
fit appends one JSON record to ``--records``; records there are not fitted again. A check, not a
timed test: about 30 CPU min for the eight sets with 3 splits, under load.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _common, also when imported by path
from _common import one_thread_env  # noqa: E402
from ensemble_capacity import records_main, score  # noqa: E402
from icnlm_variance_scale import nll_difference, records_by_set, run_paired_records  # noqa: E402

one_thread_env()

SETS = ["boston", "concrete", "energy", "yacht", "wine", "kin8nm", "power", "naval"]
KINDS = ("unscaled", "noise", "spread")


def fit_and_score(X, y, X_score, y_score, seed: int) -> dict:
    """One fit; the scores of its predictive with c = 1, the noise scale (the estimator's) and the
    spread scale."""
    from dubito._estimator import seeds_from
    from dubito.early_stopping import regression_holdout
    from dubito.regression import MeanFieldVIRegressor
    from dubito.regression.mean_field_vi import MIN_SAMPLES
    from dubito.variance_scale import fit_variance_scale, scale_spread

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MeanFieldVIRegressor(random_state=seed, progress=False, variance_scaling="heldout").fit(X, y)
        secs = time.perf_counter() - t0
        c_noise = est.variance_scale_
        noise = score(est.predict_distribution(X_score), y_score)
        est.variance_scale_ = 1.0
        plain = est.predict_distribution(X_score)
        holdout_seed = seeds_from(seed, 2)[0]  # the rows the fit held out (MeanFieldVIRegressor.fit)
        _, held = regression_holdout(y, est.validation_fraction, holdout_seed, min_samples=MIN_SAMPLES)
        c_spread = fit_variance_scale(est.predict_distribution(X[held]), y[held], scale=scale_spread)
    return dict(c_noise=c_noise, c_spread=c_spread, sec=secs, held_out=int(held.size),
                unscaled=score(plain, y_score), noise=noise, spread=score(scale_spread(plain, c_spread), y_score))


def table(path: str) -> None:
    import numpy as np

    by = records_by_set(path)
    print("| data set | splits | held-out rows | c noise (range) | c spread | NLL c = 1 | noise - 1 ± s.e. "
          "| spread - 1 ± s.e. | coverage@95 c = 1 / noise / spread | lowest split's coverage | fit s |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|---|---:|")
    for ds, recs in by.items():
        m = lambda kind, key: np.mean([r[kind][key] for r in recs])  # noqa: E731
        covs = lambda f: " / ".join("%.3f" % f(k) for k in KINDS)  # noqa: E731
        cs = [r["c_noise"] for r in recs]
        print(f"| {ds} | {len(recs)} | {np.mean([r['held_out'] for r in recs]):.0f} "
              f"| {np.mean(cs):.2f} ({min(cs):.2f}-{max(cs):.2f}) | {np.mean([r['c_spread'] for r in recs]):.2f} "
              f"| {m('unscaled', 'nll'):.3f} | {nll_difference(recs, 'noise', 'unscaled')} "
              f"| {nll_difference(recs, 'spread', 'unscaled')} "
              f"| {covs(lambda k: m(k, 'cov'))} | {covs(lambda k: min(r[k]['cov'] for r in recs))} "
              f"| {np.mean([r['sec'] for r in recs]):.0f} |")


def main(argv=None) -> None:
    records_main(argv, __doc__, lambda args: run_paired_records(args, fit_and_score), table,
                 lambda ap: ap.set_defaults(datasets=SETS))


if __name__ == "__main__":
    main()
