"""(class predictive, labels) -> accuracy, Brier, NLL, ECE/MCE, misclassification and OOD AUROC/AUPR, reliability, precision-coverage, the CRF, the T sweep, the Laplace grid."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from dubito.classification import CooccurrenceCRF, CooccurrenceStatistics
from dubito.classification.autolabel import precision_coverage_area, select
from dubito.data.scenes import make_scene_benchmark
from dubito.experiments.thesis.data import _Data
from dubito.experiments.thesis.fits import _model_seed
from dubito.experiments.thesis.vocab import (
    COVERAGES,
    CRF_SWEEP,
    MEASURES,
    PER_CLASS,
    SHORT,
)
from dubito.methods import get_classifier
from dubito.metrics import classification as cm
from dubito.nn.concrete_dropout import ConcreteDropout
from dubito.predictive.classes import ClassPredictive

# ---------------------------------------------------------------------------------- metrics


def _safe(fn, *a, **k) -> float:
    try:
        v = float(fn(*a, **k))
    except ValueError:
        return float("nan")
    return v


def scores(pred, y, oods: dict, primary: str) -> dict:
    """Table 4.1's columns for one predictive (spec §3.3): accuracy, NLL, Brier, ECE and MCE (20 bins)
    w/o and w. the primary OOD set (every OOD prediction counted wrong), misclassification AUROC/AUPR
    (correct positive) and OOD AUROC/AUPR-In (correct in-distribution vs OOD, misclassified left out)
    per measure and OOD set; the headline ``miss_*`` use confidence, ``ood_*`` MI (confidence for a
    deterministic T = 1 predictive, whose MI is 0), as the spec's §3.3 [R]."""

    out = dict(accuracy=cm.accuracy(pred, y), nll=cm.nll(pred, y), brier=cm.brier(pred, y))
    rd = cm.reliability_diagram(pred, y)
    out.update(ece=rd.ece, mce=rd.mce)
    if primary in oods:
        rdo = cm.reliability_diagram(pred, y, ood=oods[primary])
        out.update(ece_ood=rdo.ece, mce_ood=rdo.mce)
    for m in MEASURES:
        sm = SHORT[m]
        out[f"miss_auroc_{sm}"] = _safe(cm.misclassification_auroc, pred, y, m)
        out[f"miss_aupr_{sm}"] = _safe(cm.misclassification_aupr, pred, y, m)
        for name, po in oods.items():
            out[f"ood_auroc_{name}_{sm}"] = _safe(cm.ood_auroc, pred, po, m, y_in=y)
            out[f"ood_aupr_{name}_{sm}"] = _safe(cm.ood_aupr, pred, po, m, y_in=y, positive="in")
    ood_m = "MI" if pred.n_draws > 1 else "conf"
    out["miss_auroc"], out["miss_aupr"] = out["miss_auroc_conf"], out["miss_aupr_conf"]
    if primary in oods:
        out["ood_auroc"] = out[f"ood_auroc_{primary}_{ood_m}"]
        out["ood_aupr"] = out[f"ood_aupr_{primary}_{ood_m}"]
    out["mean_mi"] = float(np.mean(pred.mutual_information))
    return out


def _reliability(pred, y) -> dict:

    rd = cm.reliability_diagram(pred, y)
    return {"count": rd.count.tolist(), "confidence": np.nan_to_num(rd.confidence).round(5).tolist(),
            "accuracy": np.nan_to_num(rd.accuracy).round(5).tolist()}


def _precision_coverage(pred, y) -> tuple[dict, dict]:
    """Spec §2.9 without fine-tuning: precision of pseudo-labels at coverage q (lowest-u first) and
    the step area of the precision-coverage curve, per measure."""

    m_out, curves = {}, {}
    correct = pred.predict() == y
    for m in MEASURES:
        sm = SHORT[m]
        m_out[f"pc_area_{sm}"] = float(precision_coverage_area(pred, y, measure=m))
        curves[sm] = []
        for q in COVERAGES:
            sel = select(pred, measure=m, fraction=q)
            prec = float(np.mean(correct[sel]))
            curves[sm].append(prec)
            m_out[f"pc_prec_{int(round(100 * q))}_{sm}"] = prec
    # class-balanced selection (spec §2.9 step 2, pitfall 13), confidence only: precision and how even the
    # predicted classes are in S (smallest class count / the even share |S|/K; 1 = perfectly even)
    yhat, k = pred.predict(), pred.n_classes
    for pc in (None, *PER_CLASS):
        suf = "" if pc is None else f"_{pc}"
        for q in COVERAGES[:-1]:
            sel = select(pred, measure="confidence", fraction=q, per_class=pc)
            qq = round(100 * q)
            if pc is not None:
                m_out[f"pc_prec_{qq}_conf{suf}"] = float(np.mean(correct[sel]))
            cnt = np.bincount(yhat[sel], minlength=k)
            m_out[f"pc_even_{qq}_conf{suf}"] = float(cnt.min() / (sel.size / k))
    return m_out, curves


def _crf(pool_probs, eval_probs, data: _Data, s: dict, context: str = "strong") -> tuple[dict, dict]:
    """Spec §2.10 [R] on synthetic scenes: co-occurrence from label-only training scenes; w by grid
    (validation NLL) and by pseudo-likelihood on validation scenes (adaptation pool); test scenes
    from the evaluation view; accuracy overall and on the confusable classes over a w sweep.
    ``context="weak"`` (spec §5.1 item 3: overlapping scene types) takes the ``crf.weak`` overrides
    of the settings (smaller sizes in the smoke preset) and returns the same keys."""

    c = dict(s.get("crf", {}))
    weak = c.pop("weak", None) or {}
    if context == "weak":
        c.update(weak, context="weak")
    bench = make_scene_benchmark(data.K, val_labels=data.y_pool, test_labels=data.y_eval,
                                 confused_pairs=data.pairs, n_train=int(c.get("n_train", 2000)),
                                 n_val=int(c.get("n_val", 500)), n_test=int(c.get("n_test", 1000)),
                                 context=c.get("context", "strong"), seed=int(s.get("data", {}).get("seed", 0)))
    stats = CooccurrenceStatistics(bench.train.pair_counts(), n_scenes=bench.train.n_scenes)
    crf = CooccurrenceCRF(stats, max_exact=int(c.get("max_exact", 100_000)))
    vp = bench.val.split(pool_probs[bench.val.object_index])
    vy = bench.val.labels_per_scene()
    tp = bench.test.split(eval_probs[bench.test.object_index])
    ty = bench.test.labels
    confusable = np.isin(ty, np.unique(np.asarray(data.pairs)))

    @functools.cache  # the grid's and the sweep's w often coincide
    def test_acc(w):
        crf.weight = float(w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = np.concatenate(crf.refine_many(tp))
        hit = r.argmax(axis=1) == ty
        nll = float(-np.mean(np.log(np.maximum(r[np.arange(ty.size), ty], 1e-7))))
        return float(hit.mean()), float(hit[confusable].mean()), nll

    sweep = {float(w): test_acc(float(w)) for w in c.get("sweep", CRF_SWEEP)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w_grid = crf.fit_weight(vp, vy, method="grid", grid=c.get("grid")).weight
        w_pl = crf.fit_weight(vp, vy, method="pseudo-likelihood").weight
    g, pl = test_acc(float(w_grid)), test_acc(float(w_pl))
    base = sweep.get(0.0) or test_acc(0.0)
    big = sweep[max(sweep)]
    out = dict(crf_acc_w0=base[0], crf_acc_conf_w0=base[1], crf_nll_w0=base[2], crf_w_grid=float(w_grid),
               crf_acc_grid=g[0], crf_acc_conf_grid=g[1], crf_nll_grid=g[2], crf_w_pl=float(w_pl), crf_acc_pl=pl[0],
               crf_acc_conf_pl=pl[1], crf_acc_wmax=big[0], crf_w_max=float(max(sweep)),
               crf_gain_grid=g[0] - base[0], crf_gain_conf_grid=g[1] - base[1])
    art = {"w": [float(w) for w in sweep], "acc": [v[0] for v in sweep.values()],
           "acc_confusable": [v[1] for v in sweep.values()], "nll": [v[2] for v in sweep.values()]}
    return out, art


def _predict(est, X, seed, **kw):
    return est.predict_distribution(X, random_state=int(seed), **kw)


def _evaluate(pred_fn, data: _Data, primary: str, seed: int, with_crf: bool, s: dict):
    """Scores on the adaptation pool (+ OOD), reliability bins, precision-coverage, CRF."""
    pool = pred_fn(data.X_pool, seed)
    oods = {k: pred_fn(v, seed + 1 + i) for i, (k, v) in enumerate(data.ood.items())}
    m = scores(pool, data.y_pool, oods, primary)
    pc, curves = _precision_coverage(pool, data.y_pool)
    m.update(pc)
    art = {"reliability": _reliability(pool, data.y_pool), "precision_coverage": curves}
    if with_crf:
        ev = pred_fn(data.X_eval, seed + 99)
        m["eval_accuracy"] = float(np.mean(ev.predict() == data.y_eval))
        cm_, ca = _crf(pool.probs, ev.probs, data, s)
        m.update(cm_)
        art["crf_sweep"] = ca
        if s.get("crf", {}).get("weak_context", True):
            # the weak-context variant (spec §5.1 item 3) on the same unaries
            cw, caw = _crf(pool.probs, ev.probs, data, s, context="weak")
            m.update({"crf_weak_" + k.removeprefix("crf_"): v for k, v in cw.items()})
            art["crf_sweep_weak"] = caw
    return m, art


def _t_sweep(est, data: _Data, primary: str, seed: int, ts) -> dict:
    """Sensitivity to the number of MC passes T (spec §2.3 [R]: T in {10, 20, 50, 100}): one draw of
    max(T) passes on the adaptation pool and the primary OOD set, the predictive at each T from its
    first T passes (nested, so the T rows differ only by the added passes); `scores` of each."""

    ts = sorted({int(t) for t in ts})
    lp = est.sample_logits(data.X_pool, n_samples=ts[-1], random_state=int(seed))
    lo = est.sample_logits(data.ood[primary], n_samples=ts[-1], random_state=int(seed) + 1)
    return {t: scores(ClassPredictive.from_logits(lp[:t]), data.y_pool,
                      {primary: ClassPredictive.from_logits(lo[:t])}, primary) for t in ts}


class _Sampler:
    """Switch the concrete / Multi-Drop layers of a fitted MCDropoutClassifier to another test-time
    sampler (spec §2.4: "relaxed" as trained, or "hard" Bernoulli(p_keep)) and back."""

    def __init__(self, est, kind: str):

        self.mods = [m for m in est.net_.modules() if isinstance(m, ConcreteDropout)]
        self.kind = kind

    def __enter__(self):
        self.old = [m.mc_sampler for m in self.mods]
        for m in self.mods:
            m.mc_sampler = self.kind
        return len(self.mods)

    def __exit__(self, *exc):
        for m, o in zip(self.mods, self.old):
            m.mc_sampler = o


def _laplace(est, data: _Data, s: dict, seed: int, device: str):
    """KFAC Laplace on the 4 head FC layers of the trained model (spec §2.7): the thesis's (s, d) =
    (1, 15), and (s, d) tuned on the spec's grid by source-validation NLL (factors from
    ``n_fit`` source training rows; dropout off while fitting)."""

    lp = s.get("laplace", {})
    rng = np.random.default_rng([seed, 3])
    n_fit = min(int(lp.get("n_fit", 5000)), len(data.y_tr))
    fit_idx = rng.permutation(len(data.y_tr))[:n_fit]
    Xf, yf = data.X_tr[fit_idx], data.y_tr[fit_idx]
    n_v = min(int(lp.get("n_val", 2000)), len(data.y_val))
    v_idx = rng.permutation(len(data.y_val))[:n_v]
    Xv, yv = data.X_val[v_idx], data.y_val[v_idx]
    T = int(lp.get("n_samples", s["n_samples"]))

    def make(scale, damping, mc=False, t=T):
        return get_classifier("kfac-laplace").build(model=est, layers=4, scale=scale, damping=damping, n_samples=t, mc_dropout=mc, device=device,
                           random_state=_model_seed(seed) + 7).fit(Xf, yf)

    grid = []
    for sc in lp.get("scales", (1.0, 10.0, 100.0, 1000.0, "n")):
        for dmp in lp.get("dampings", (0.1, 1.0, 5.0, 10.0, 15.0, 20.0, 50.0, 100.0)):
            lap = make(sc, dmp, t=int(lp.get("n_samples_grid", 10)))
            grid.append((cm.nll(lap.predict_distribution(Xv), yv), sc, dmp))
    best = min(grid, key=lambda g: (g[0], str(g[1]), g[2]))
    info = {"laplace_grid": [[float(a), b if isinstance(b, str) else float(b), float(c)] for a, b, c in grid],
            "laplace_best": [best[1], best[2]], "laplace_n_fit": n_fit}
    out = {"thesis": make(1.0, 15.0), "tuned": make(best[1], best[2])}
    if DROPOUT_OF(est) != "none":
        out["dropout"] = make(best[1], best[2], mc=True)
    return out, info


def DROPOUT_OF(est) -> str:
    return getattr(est, "dropout", "none")
