"""`run_cell`: single models, ensembles and auto-labelling cells (the package docstring)."""

from __future__ import annotations

import copy
import os
import time
import warnings
from typing import Any

import numpy as np
import torch

from dubito.classification import AutoLabeler
from dubito.experiments.base import CellResult
from dubito.experiments.thesis.data import _data
from dubito.experiments.thesis.evaluate import (
    _evaluate,
    _laplace,
    _predict,
    _Sampler,
    _t_sweep,
)
from dubito.experiments.thesis.fits import _model, _model_seed
from dubito.experiments.thesis.vocab import (
    BETA_FACTORS,
    DROPOUT,
    ENSEMBLES,
    PER_CLASS,
    PRIMARY_OOD,
    SINGLE,
    T_SWEEP,
    VARIANT,
)
from dubito.predictive.classes import ClassPredictive

# ---------------------------------------------------------------------------------- cells


def _keep_summary(est, method) -> dict:
    """H6: mean keep probability at the start and the end of training, share of the sites whose keep probability rose."""
    hist = np.asarray(getattr(est, "rate_history_", np.zeros((1, 0))), dtype=float)
    if not hist.size or DROPOUT[method] not in ("concrete", "multidrop"):
        return {}
    keep = 1.0 - hist
    return {"p_keep_start": float(keep[0].mean()), "p_keep_end": float(keep[-1].mean()),
            "p_keep_sites_rising": float(np.mean(keep[-1] > keep[0]))}


def _single_cell(cell, s, data, device, progress) -> CellResult:
    method, seed = cell.method, int(cell.seed)
    primary = PRIMARY_OOD[cell.dataset]
    est, fit_s, hit = _model(cell.dataset, method, seed, s, data, device, progress)
    t0 = time.perf_counter()
    base_seed = _model_seed(seed) + 100
    m, art = _evaluate(lambda X, sd: _predict(est, X, sd), data, primary, base_seed, True, s)
    src = _predict(est, data.X_te, base_seed + 50)
    m["source_accuracy"] = float(np.mean(src.predict() == data.y_te))
    hist = np.asarray(getattr(est, "rate_history_", np.zeros((1, 0))), dtype=float)
    m.update(_keep_summary(est, method))
    m["epochs"] = float(len(getattr(est, "loss_curve_", [])))
    m["fit_seconds"] = float(fit_s)
    variants = {VARIANT[method]: m}
    artefacts = {"reliability": {VARIANT[method]: art["reliability"]},
                 "precision_coverage": {VARIANT[method]: art["precision_coverage"]},
                 "crf_sweep": {VARIANT[method]: art["crf_sweep"]}}
    if "crf_sweep_weak" in art:
        artefacts["crf_sweep_weak"] = {VARIANT[method]: art["crf_sweep_weak"]}
    info: dict[str, Any] = {"cache_hit": hit, "best_epoch": int(getattr(est, "best_epoch_", 0)),
                            "dropout_rates": np.asarray(getattr(est, "dropout_rates_", [])).round(5).tolist(),
                            "rate_history": np.asarray(hist).round(5).tolist()}
    t2 = time.perf_counter()
    if DROPOUT[method] != "none" and s.get("t_sweep", T_SWEEP):
        # (1) T sensitivity: predictions of the same model (spec §2.3 [R])
        for tt, tm in _t_sweep(est, data, primary, base_seed + 200, s.get("t_sweep", T_SWEEP)).items():
            variants[f"{method} T={tt}"] = tm
    if DROPOUT[method] in ("concrete", "multidrop") and s.get("hard_sampler", True):
        # (5) the hard Bernoulli(p_keep) test-time sampler on the same model and the same seeds as the
        # relaxed one, so both see the same uniforms u (hard mask = the relaxed mask rounded at 1/2)
        with _Sampler(est, "hard"):
            hm, ha = _evaluate(lambda X, sd: _predict(est, X, sd), data, primary, base_seed, False, s)
        variants[f"{method} (hard sampler)"] = hm
        artefacts["reliability"][f"{method} (hard sampler)"] = ha["reliability"]
    b = s.get("beta", {})
    if DROPOUT[method] in ("concrete", "multidrop") and seed in b.get("seeds", (0,)):
        # β sensitivity (spec §2.4): retrained models (cached like the seed models), seed 0 only
        for f in b.get("factors", BETA_FACTORS):
            eb, fb, hb = _model(cell.dataset, method, seed, dict(s, beta_factor=float(f)), data, device, progress)
            bm, _ = _evaluate(lambda X, sd, eb=eb: _predict(eb, X, sd), data, primary, base_seed, False, s)
            bm.update(_keep_summary(eb, method), beta_factor=float(f), fit_seconds=float(fb),
                      epochs=float(len(getattr(eb, "loss_curve_", []))))
            variants[f"{method} β×{f:g}"] = bm
            info.setdefault("beta_cache_hits", []).append(hb)
    info["sensitivity_seconds"] = time.perf_counter() - t2
    if s.get("laplace", {}).get("enabled", True):
        t1 = time.perf_counter()
        laps, linfo = _laplace(est, data, s, seed, device)
        info.update(linfo)
        names = {"thesis": f"laplace_{method}", "tuned": f"laplace_{method} (tuned)",
                 "dropout": f"laplace_{method} +dropout"}
        for k, lap in laps.items():
            lm, la = _evaluate(lambda X, sd, lap=lap: lap.predict_distribution(X, random_state=int(sd)), data,
                               primary, base_seed, False, s)
            variants[names[k]] = lm
            artefacts["reliability"][names[k]] = la["reliability"]
        info["laplace_seconds"] = time.perf_counter() - t1
    info["eval_seconds"] = time.perf_counter() - t0
    return CellResult(variants=variants, artefacts=artefacts, info=info)


def _ensemble_cell(cell, s, data, device, progress) -> CellResult:

    base = cell.method.removeprefix("ensemble_")
    members, hits = [], []
    for sd in s.get("member_seeds", (0, 1, 2)):
        est, _, hit = _model(cell.dataset, base, int(sd), s, data, device, progress)
        members.append(est)
        hits.append(hit)
    seed0 = _model_seed(int(cell.seed)) + 100

    def pred(X, sd):
        return ClassPredictive.pool([_predict(e, X, sd + 1000 * i) for i, e in enumerate(members)])

    m, art = _evaluate(pred, data, PRIMARY_OOD[cell.dataset], seed0, True, s)
    v = VARIANT[cell.method]
    return CellResult(variants={v: m}, artefacts={"reliability": {v: art["reliability"]},
                                                  "precision_coverage": {v: art["precision_coverage"]},
                                                  "crf_sweep": {v: art["crf_sweep"]},
                                                  "crf_sweep_weak": {v: art.get("crf_sweep_weak")}},
                      info={"member_seeds": list(s.get("member_seeds", (0, 1, 2))), "cache_hits": hits})


def manual_labels_needed(curve, target: float) -> tuple[float, bool]:
    """The "manual labels saved" metric of spec §2.9: the fewest true labels at which the manual
    baseline's held-out accuracy reaches ``target``. ``curve``: (number of manual labels, accuracy)
    points, (0, no-adaptation accuracy) among them; read piecewise linearly in the number of labels
    at the first point that reaches the target. Returns (labels, censored): censored = True when
    no point reaches it (then the labels are the largest manual set, a lower bound)."""
    pts = sorted((float(n), float(a)) for n, a in curve)
    if not pts:
        return float("nan"), True
    (n0, a0) = pts[0]
    if a0 >= target:
        return n0, False
    for n1, a1 in pts[1:]:
        if a1 >= target:
            return n0 + (target - a0) / (a1 - a0) * (n1 - n0), False
        n0, a0 = n1, a1
    return pts[-1][0], True


def _autolabel_cell(cell, s, data, device, progress) -> CellResult:

    a = s.get("autolabel", {})
    base = a.get("base", "cdp")
    seed = int(cell.seed)
    est, _, hit = _model(cell.dataset, base, seed, s, data, device, progress)
    rng = np.random.default_rng([seed, 9])
    n_src = min(int(a.get("n_source", 10000)), len(data.y_tr))
    si = rng.permutation(len(data.y_tr))[:n_src]
    vi = rng.permutation(len(data.y_val))[:min(int(a.get("n_val", 2000)), len(data.y_val))]
    common = dict(measure=a.get("measure", "confidence"), finetune_epochs=int(a.get("epochs", 5)),
                  random_state=_model_seed(seed) + 5)
    variants, per_class_art = {}, {}
    evald = (data.X_eval, data.y_eval)
    fractions = [float(q) for q in a.get("fractions", (0.2, 0.5))]
    runs = [("uncertainty", 1.0, None, "all pseudo-labelled (q = 1)")]
    for q in fractions:
        for strat in ("uncertainty", "random", "manual"):
            runs.append((strat, q, None, f"{strat} q={q:g}"))
        # (3) class-balanced selection (spec §2.9 step 2, pitfall 13)
        for pc in a.get("per_class", PER_CLASS):
            runs.append(("uncertainty", q, pc, f"uncertainty ({pc}) q={q:g}"))
    # (4) more points of the manual-labelling curve for "manual labels saved"
    for q in a.get("manual_curve", ()):
        if float(q) not in fractions:
            runs.append(("manual", float(q), None, f"manual q={float(q):g}"))
    none_done = False
    for strat, q, pc, name in runs:
        al = AutoLabeler(est, strategy=strat, fraction=q, per_class=pc, **common)
        al.fit(data.X_tr[si], data.y_tr[si], data.X_pool, data.y_pool, eval_data=evald,
               validation_data=(data.X_val[vi], data.y_val[vi]))
        h0, h1 = al.history_[0], al.history_[-1]
        if not none_done:
            variants[f"{base}: no adaptation"] = {k: float(h0[k]) for k in ("accuracy", "nll", "brier", "ece")}
            none_done = True
        counts = np.asarray(h1.get("per_class_counts", []), dtype=float)
        cprec = np.asarray(h1.get("per_class_precision", []), dtype=float)
        variants[f"{base}: {name}"] = {
            **{k: float(h1[k]) for k in ("accuracy", "nll", "brier", "ece")},
            "label_precision": float(h1.get("precision", float("nan"))), "coverage": float(h1["coverage"]),
            "n_selected": float(h1["n_selected"]), "n_manual_labels": float(h1["n_manual_labels"]), "q": q,
            "class_count_min": float(counts.min()) if counts.size else float("nan"),
            "class_count_max": float(counts.max()) if counts.size else float("nan"),
            "class_precision_min": (float(np.nanmin(cprec)) if cprec.size and np.isfinite(cprec).any()
                                    else float("nan"))}
        per_class_art[f"{base}: {name}"] = {"counts": counts.tolist(),
                                           "precision": np.nan_to_num(cprec, nan=-1.0).round(4).tolist()}
    # "manual labels saved" (spec §2.9): true labels the manual baseline needs to reach each pseudo-labelled
    # selection's held-out accuracy, minus the manual labels that selection used (none)
    curve = [(0.0, variants[f"{base}: no adaptation"]["accuracy"])]
    curve += [(v["n_selected"], v["accuracy"]) for k, v in variants.items() if ": manual q=" in k]
    for k, v in variants.items():
        if ": manual" in k or k.endswith("no adaptation"):
            continue
        need, cens = manual_labels_needed(curve, v["accuracy"])
        v["manual_labels_needed"] = need
        v["manual_labels_saved"] = need - v["n_manual_labels"]
        v["manual_saved_censored"] = float(cens)
        v["manual_saved_per_selected"] = (need - v["n_manual_labels"]) / max(v["n_selected"], 1.0)
    return CellResult(variants=variants, artefacts={"autolabel_per_class": per_class_art,
                                                    "manual_curve": [list(p) for p in sorted(curve)]},
                      info={"base": base, "cache_hit": hit, "n_source_finetune": n_src})


def run_cell(cell, device: str = "cpu", progress: bool = False) -> CellResult:
    """One cell (module docstring): a single model with its Laplace variants, an ensemble, or auto-labelling."""

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    t0 = time.perf_counter()
    s = copy.deepcopy(dict(cell.settings))
    data = _data(cell.dataset, s)
    t1 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if cell.method in SINGLE:
            res = _single_cell(cell, s, data, device, progress)
        elif cell.method in ENSEMBLES:
            res = _ensemble_cell(cell, s, data, device, progress)
        elif cell.method == "autolabel":
            res = _autolabel_cell(cell, s, data, device, progress)
        else:
            raise ValueError(f"unknown thesis method {cell.method!r}; available: {', '.join((*VARIANT, 'autolabel'))}")
    res.info.update(data.facts)
    res.info["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}" for w in caught})[:20]
    res.info["seconds"] = {"load": t1 - t0, "run": time.perf_counter() - t1}
    return res
