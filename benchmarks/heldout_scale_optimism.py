"""Is a held-out variance scale optimistic because the same rows chose the stopping epoch? (issue 19)

    OMP_NUM_THREADS=1 DUBITO_DATA=... .venv/bin/python benchmarks/heldout_scale_optimism.py --method ensemble
        --records FILE.jsonl [--datasets boston concrete energy yacht wine] [--splits 5] [--table]

The ensemble, the MDN and mean-field VI stop training on their held-out rows (validation_fraction)
and then fit their variance scale c (`dubito.variance_scale`) on the same rows. Rows that picked
the epoch with the lowest held-out NLL flatter the network, so c may come out too small (the IC-NLM's
held-out rows were 1.1-25x optimistic about its squared error on yacht: benchmarks/icnlm_heldout_optimism.py).
This check measures how much a scale fitted on fresh rows would change. Validation rows only: each
of the first ``--splits`` standard splits is fitted (the method's defaults, ``random_state`` =
split) on 80 % of its training rows (`_common.validation_rows`); its other 20 % are cut in two
halves (seeded by the split) about as large as the estimator's own held-out share (10 % of the 80 %).
For each half in turn, c_fresh is fitted on it (the same prior, the predictive with c = 1) and the
other half is scored with c = 1, with the estimator's own c_heldout, and with c_fresh. The table
gives log(c_fresh / c_heldout) and the NLL change from c_heldout to c_fresh on the scored half, mean
± s.e. over splits: a positive log ratio with a lower NLL says the held-out rows are optimistic and
a scale fitted on rows that did not stop training would be better (the upper bound of that gain:
here c_fresh costs no rows of the stopping rule). Each fit appends one JSON record to ``--records``
(records there are not fitted again). A check, not a timed test.

``--separate``: the remedy itself, emulated without changing the estimator. "joint" (today's default)
fits on all the fit rows (the estimator holds out 10 % of them to stop and to scale); "separate"
first sets aside 5 % of the fit rows (seeded by the split), fits on the rest with the validation fraction that holds out
another 5 % (so both train on the same 90 %), stops on those, and fits c on the rows set aside. Both
are scored on all the validation rows; the table gives the paired NLL change and the coverage.

``--auto``: ``variance_scaling="heldout"`` against "auto" (c fitted only from
`dubito.variance_scale.AUTO_MIN_HELDOUT_ROWS` held-out rows up, c = 1 below; where "auto" is 1, the
input encoding is also chosen on the unscaled held-out NLL), two fits per split with the same seed,
both scored on all the validation rows, in the same table.
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

SETS = ["boston", "concrete", "energy", "yacht", "wine"]
#: the methods whose c multiplies every component variance of the predictive (`scale_mixture`)
METHODS = ("ensemble", "mdn", "mfvi")


def _fit(method: str, X, y, seed: int, **settings):
    """``method`` (`dubito.methods`, its defaults but ``settings``) fitted quietly on (X, y); (it, seconds)."""
    from dubito.methods import get_method

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = get_method(method).make(random_state=seed, progress=False, **settings).fit(X, y)
    return est, time.perf_counter() - t0


def _scored(est, X_score, y_score, secs: float) -> dict:
    """A record's variant: the scores of ``est`` on the scoring rows, its c and its fit seconds."""
    return dict(score(est.predict_distribution(X_score), y_score), c=float(est.variance_scale_), sec=secs)


def fit_and_score(method: str, X, y, X_score, y_score, seed: int) -> dict:
    """One fit of ``method``'s defaults; c_fresh from each half of the scoring rows, and the other
    half's scores with c = 1, c_heldout and c_fresh."""
    import numpy as np

    from dubito.variance_scale import fit_variance_scale, scale_mixture

    est, secs = _fit(method, X, y, seed)
    c_held = float(est.variance_scale_)
    order = np.random.default_rng([seed, 25]).permutation(len(y_score))
    halves = np.array_split(order, 2)
    est.variance_scale_ = 1.0
    unscaled = [est.predict_distribution(X_score[h]) for h in halves]
    est.variance_scale_ = c_held  # the estimator's own scaling is scale_mixture's (checked here)
    own = est.predict_distribution(X_score[halves[0]]).log_prob(y_score[halves[0]])
    mine = scale_mixture(unscaled[0], c_held).log_prob(y_score[halves[0]])
    if not np.allclose(own, mine, rtol=1e-6, atol=1e-8):
        raise RuntimeError(f"{method}'s variance_scale_ is not scale_mixture's c")
    out = []
    for fit_half, eval_half in ((0, 1), (1, 0)):
        c_fresh = fit_variance_scale(unscaled[fit_half], y_score[halves[fit_half]])
        y_eval, pred = y_score[halves[eval_half]], unscaled[eval_half]
        out.append(dict(c_fresh=c_fresh, unscaled=score(pred, y_eval),
                        heldout=score(scale_mixture(pred, c_held), y_eval),
                        fresh=score(scale_mixture(pred, c_fresh), y_eval)))
    best_epoch = np.asarray(getattr(est, "best_epoch_", -1)).tolist()
    return dict(method=method, c_heldout=c_held, best_epoch=best_epoch, sec=secs, halves=out)


#: the two variants each comparing mode fits (the base first)
PAIRS = {"separate": ("joint", "separate"), "auto": ("heldout", "auto")}


def fit_and_score_auto(method: str, X, y, X_score, y_score, seed: int) -> dict:
    """``method`` fitted with ``variance_scaling="heldout"`` and with "auto", scored on the same rows."""
    out = {}
    for variant in PAIRS["auto"]:
        est, secs = _fit(method, X, y, seed, variance_scaling=variant)
        out[variant] = _scored(est, X_score, y_score, secs)
    return out


def fit_and_score_separate(method: str, X, y, X_score, y_score, seed: int) -> dict:
    """The joint (default) fit and the separate-rows fit (module docstring) of ``method``, scored on
    the same rows."""
    import numpy as np

    from dubito.variance_scale import fit_variance_scale

    n = len(y)
    aside = np.zeros(n, dtype=bool)
    aside[np.random.default_rng([seed, 26]).permutation(n)[:round(0.05 * n)]] = True
    joint, joint_secs = _fit(method, X, y, seed)
    t0 = time.perf_counter()
    est, _ = _fit(method, X[~aside], y[~aside], seed, validation_fraction=0.05 * n / (~aside).sum())
    est.variance_scale_ = 1.0
    est.variance_scale_ = fit_variance_scale(est.predict_distribution(X[aside]), y[aside])
    return dict(joint=_scored(joint, X_score, y_score, joint_secs),
                separate=_scored(est, X_score, y_score, time.perf_counter() - t0))


def pair_table(path: str, a: str, b: str) -> None:
    """The paired table of two variants ``a`` (the base) and ``b`` of the records in ``path``."""
    import numpy as np

    print(f"| data set | splits | c {a} / {b} (means) | NLL {a} | NLL {b} - {a} "
          f"| coverage@95 {a} / {b} | lowest split's coverage | RMSE {a} / {b} |")
    print("|---|---:|---|---:|---:|---|---|---|")
    for ds, recs in records_by_set(path).items():
        m = lambda v, k: np.mean([r[v][k] for r in recs])  # noqa: E731
        low = lambda v: min(r[v]["cov"] for r in recs)  # noqa: E731
        print(f"| {ds} | {len(recs)} | {m(a, 'c'):.2f} / {m(b, 'c'):.2f} | {m(a, 'nll'):.3f} "
              f"| {nll_difference(recs, b, a)} | {m(a, 'cov'):.3f} / {m(b, 'cov'):.3f} "
              f"| {low(a):.3f} / {low(b):.3f} | {m(a, 'rmse'):.3f} / {m(b, 'rmse'):.3f} |")


def table(path: str) -> None:
    import numpy as np

    def mean_se(values) -> str:
        v = np.asarray(values, dtype=float)
        se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
        return f"{v.mean():+.3f} ± {se:.3f}"

    print("| data set | splits | c_heldout (range) | log(c_fresh / c_heldout) | NLL c_heldout "
          "| NLL c_fresh - c_heldout | coverage@95 c = 1 / c_heldout / c_fresh | fit s |")
    print("|---|---:|---|---:|---:|---:|---|---:|")
    for ds, recs in records_by_set(path).items():
        def per_split(key):  # the two halves' mean, per split
            return [np.mean([key(h) for h in r["halves"]]) for r in recs]

        ch = [r["c_heldout"] for r in recs]
        log_ratio = per_split(lambda h: np.log(h["c_fresh"])) - np.log(ch)
        d_nll = np.subtract(per_split(lambda h: h["fresh"]["nll"]), per_split(lambda h: h["heldout"]["nll"]))
        cov = [np.mean(per_split(lambda h, k=k: h[k]["cov"])) for k in ("unscaled", "heldout", "fresh")]
        print(f"| {ds} | {len(recs)} | {np.mean(ch):.2f} ({min(ch):.2f}-{max(ch):.2f}) | {mean_se(log_ratio)} "
              f"| {np.mean(per_split(lambda h: h['heldout']['nll'])):.3f} | {mean_se(d_nll)} "
              f"| {cov[0]:.3f} / {cov[1]:.3f} / {cov[2]:.3f} | {np.mean([r['sec'] for r in recs]):.0f} |")


def main(argv=None) -> None:
    def add_arguments(ap):
        ap.add_argument("--method", required=True, choices=METHODS)
        mode = ap.add_mutually_exclusive_group()
        mode.add_argument("--separate", action="store_true",
                          help="scale on rows that did not stop training, against the default")
        mode.add_argument("--auto", action="store_true", help='variance_scaling "auto" against "heldout"')
        ap.set_defaults(datasets=SETS, splits=5)

    words = sys.argv[1:] if argv is None else argv
    pair = next((p for p in PAIRS if f"--{p}" in words), None)
    fit = {None: fit_and_score, "separate": fit_and_score_separate, "auto": fit_and_score_auto}[pair]
    show = table if pair is None else (lambda path: pair_table(path, *PAIRS[pair]))
    records_main(argv, __doc__, lambda args: run_paired_records(
        args, lambda *a, **k: fit(args.method, *a, **k)), show, add_arguments)


if __name__ == "__main__":
    main()
