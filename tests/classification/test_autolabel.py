"""Auto-labelling (spec §2.9 [R], §6.21): `select` and `precision_coverage` against brute force (ties
included), hand-computed toy cases, the closed-form precision-coverage curve of a calibrated predictor,
an end-to-end run on 8x8 digits under the image_shift domain gap (uncertainty vs random vs manual),
and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dubito.classification.autolabel import (
    MEASURES,
    AutoLabeler,
    manual_labels,
    n_from_fraction,
    precision_coverage,
    precision_coverage_area,
    random_selection,
    select,
    selection_metrics,
)
from dubito.classification.mc_dropout import MCDropoutClassifier
from dubito.data.image_shift import domain_gap, make_views
from dubito.predictive.classes import ClassPredictive

FRACTIONS = (0.01, 0.1, 0.3, 0.5, 0.7, 1.0)


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def tied_pred():
    """T = 4 draws over K = 5 classes for N = 200 inputs: 140 inputs share one of 10 random draw
    profiles (identical draws, hence exact ties in every measure), 60 have their own draws; labels
    agree with argmax p̄ ~60% of the time."""
    rng = np.random.default_rng(0)
    k, n, t = 5, 200, 4
    profiles = rng.dirichlet(np.full(k, 0.5), size=(10, t))  # (10, T, K)
    own = rng.dirichlet(np.full(k, 0.5), size=(n - 140, t))
    draws = np.concatenate([profiles[rng.integers(0, 10, 140)], own])[rng.permutation(n)]  # (N, T, K)
    draws = np.ascontiguousarray(draws.transpose(1, 0, 2))
    pred = ClassPredictive(draws)
    y = np.where(rng.random(n) < 0.6, pred.predict(), rng.integers(0, k, n))
    return pred, y


def _u(pred, measure):
    """Brute-force uncertainty key (lower = more certain)."""
    return [-c for c in pred.confidence] if measure == "confidence" else list(pred.measure(measure))


def _brute_order(pred, measure):
    u = _u(pred, measure)
    return sorted(range(len(u)), key=lambda i: (u[i], i))


def _brute_balanced(pred, measure, budget):
    """Water filling by explicit loops: raise the per-class level while it fits, then hand the
    remaining items one by one to the open classes whose next item ranks first."""
    order = _brute_order(pred, measure)
    lab = pred.predict()
    lists = {c: [i for i in order if lab[i] == c] for c in range(pred.n_classes)}
    m = 0
    while sum(min(len(v), m + 1) for v in lists.values()) <= budget and m < max(len(v) for v in lists.values()):
        m += 1
    chosen = {i for v in lists.values() for i in v[:m]}
    rest = budget - len(chosen)
    nxt = sorted((order.index(v[m]), c) for c, v in lists.items() if len(v) > m)
    for pos, _ in nxt[:rest]:
        chosen.add(order[pos])
    return [i for i in order if i in chosen]


def _brute_proportional(pred, measure, q):
    order = _brute_order(pred, measure)
    lab = pred.predict()
    chosen = set()
    for c in range(pred.n_classes):
        items = [i for i in order if lab[i] == c]
        chosen.update(items[: math.ceil(round(q * len(items), 9))])
    return [i for i in order if i in chosen]


# ---------------------------------------------------------------------------- select
def test_ties_are_present(tied_pred):
    pred, _ = tied_pred
    for m in MEASURES:
        u = _u(pred, m)
        assert len(set(u)) <= 70, m  # <= 10 + 60 distinct values: many ties, so the tie rule is exercised


@pytest.mark.parametrize("measure", MEASURES)
def test_select_fraction_equals_brute_force(tied_pred, measure):
    pred, _ = tied_pred
    order = _brute_order(pred, measure)
    expected_counts = {0.01: 2, 0.1: 20, 0.3: 60, 0.5: 100, 0.7: 140, 1.0: 200}  # ⌈q·200⌉ by hand
    for q in FRACTIONS:
        idx = select(pred, measure=measure, fraction=q)
        assert idx.size == expected_counts[q]
        assert idx.tolist() == order[: expected_counts[q]], (measure, q)
    assert sorted(select(pred, measure=measure, fraction=1.0).tolist()) == list(range(200))  # q = 1 selects all


@pytest.mark.parametrize("measure", MEASURES)
def test_select_threshold_equals_brute_force(tied_pred, measure):
    pred, _ = tied_pred
    order = _brute_order(pred, measure)
    vals = pred.confidence if measure == "confidence" else pred.measure(measure)
    grid = np.unique(vals)
    sizes = []
    for t in list(grid) + [grid.min() - 1, grid.max() + 1]:
        idx = select(pred, measure=measure, threshold=t)
        keep = [i for i in order if (vals[i] >= t if measure == "confidence" else vals[i] <= t)]
        assert idx.tolist() == keep, (measure, t)
        sizes.append((t, idx.size))
    # |S| monotone in the threshold (spec §6.21): down in γ for confidence, up in t otherwise
    sizes.sort()
    counts = [s for _, s in sizes]
    assert counts == (sorted(counts, reverse=True) if measure == "confidence" else sorted(counts))


@pytest.mark.parametrize("measure", MEASURES)
def test_select_balanced_equals_brute_force(tied_pred, measure):
    pred, _ = tied_pred
    lab = pred.predict()
    n_c = np.bincount(lab, minlength=pred.n_classes)
    for q in FRACTIONS:
        budget = n_from_fraction(q, 200)
        idx = select(pred, measure=measure, fraction=q, per_class="balanced")
        assert idx.tolist() == _brute_balanced(pred, measure, budget), (measure, q)
        assert idx.size == budget  # exactly ⌈qN⌉
        got = np.bincount(lab[idx], minlength=pred.n_classes)
        open_ = got < n_c  # classes not exhausted differ by at most one item
        if open_.any():
            assert got[open_].max() - got[open_].min() <= 1
            assert got.max() <= got[open_].min() + 1


@pytest.mark.parametrize("measure", MEASURES)
def test_select_proportional_equals_brute_force(tied_pred, measure):
    pred, _ = tied_pred
    lab = pred.predict()
    n_c = np.bincount(lab, minlength=pred.n_classes)
    prev = 0
    for q in FRACTIONS:
        idx = select(pred, measure=measure, fraction=q, per_class="proportional")
        assert idx.tolist() == _brute_proportional(pred, measure, q), (measure, q)
        got = np.bincount(lab[idx], minlength=pred.n_classes)
        assert np.all(got == np.ceil(np.round(q * n_c, 9)))  # ⌈q n_c⌉ per class (spec §6.21: at most)
        assert idx.size >= prev  # monotone in q
        prev = idx.size


def test_fraction_count_is_ceiling_without_rounding_overshoot():
    assert 0.07 * 100 > 7  # 7.000000000000001 in float64: a bare ceil would give 8
    assert n_from_fraction(0.07, 100) == 7
    assert [n_from_fraction(q, 10) for q in (0.01, 0.1, 0.15, 0.3, 0.99, 1.0)] == [1, 1, 2, 3, 10, 10]
    assert [n_from_fraction(q, 1798) for q in (0.2, 0.3)] == [360, 540]


def test_select_hand_computed_toy():
    # conf 0.9, 0.8, 0.7, 0.6, 0.8; predicted 0, 1, 0, 1, 0; items 1 and 4 tie at 0.8
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6], [0.8, 0.2]])
    pred = ClassPredictive(probs)
    assert select(pred, fraction=0.4).tolist() == [0, 1]  # tie 1/4 -> lower index first
    assert select(pred, threshold=0.8).tolist() == [0, 1, 4]
    assert select(pred, fraction=0.4, per_class="balanced").tolist() == [0, 1]  # one per class
    assert select(pred, fraction=0.6, per_class="balanced").tolist() == [0, 1, 4]  # extra to class 0 (item 4 ranks first)
    assert select(pred, fraction=0.5, per_class="proportional").tolist() == [0, 1, 4]  # ⌈1.5⌉ = 2, ⌈1⌉ = 1
    assert select(pred, fraction=1.0, per_class="balanced").tolist() == [0, 1, 4, 2, 3]


# ---------------------------------------------------------------------------- curves and metrics
@pytest.mark.parametrize("measure", MEASURES)
def test_precision_coverage_equals_brute_force(tied_pred, measure):
    pred, y = tied_pred
    u = np.array(_u(pred, measure))
    correct = pred.predict() == y
    cov, prec, thr = precision_coverage(pred, y, measure=measure, return_thresholds=True)
    brute_c, brute_p, brute_t = [], [], []
    for v in sorted(set(u.tolist())):
        s = [i for i in range(len(u)) if u[i] <= v]
        brute_c.append(len(s) / len(u))
        brute_p.append(sum(correct[i] for i in s) / len(s))
        brute_t.append(-v if measure == "confidence" else v)
    assert np.allclose(cov, brute_c, rtol=0, atol=1e-15)
    assert np.allclose(prec, brute_p, rtol=0, atol=1e-15)
    assert np.allclose(thr, brute_t, rtol=0, atol=0)
    assert cov[-1] == 1.0 and prec[-1] == pytest.approx(correct.mean(), abs=1e-15)  # endpoint: overall accuracy


def test_precision_coverage_hand_computed_toy():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.4, 0.6], [0.8, 0.2]])
    y = np.array([0, 0, 0, 1, 1])  # right, wrong, right, right, wrong
    pred = ClassPredictive(probs)
    cov, prec = precision_coverage(pred, y)
    assert np.allclose(cov, [0.2, 0.6, 0.8, 1.0], atol=1e-15)  # the tie {1, 4} enters whole
    assert np.allclose(prec, [1.0, 1 / 3, 0.5, 0.6], atol=1e-15)
    area = 0.2 * 1 + 0.4 / 3 + 0.2 * 0.5 + 0.2 * 0.6
    assert precision_coverage_area(pred, y) == pytest.approx(area, abs=1e-15)
    sel = select(pred, threshold=0.8)  # [0, 1, 4], pseudo-labels [0, 1, 0]
    m = selection_metrics(sel, pred.predict()[sel], y, n_pool=5, n_classes=2, predicted=pred.predict())
    assert m["n_selected"] == 3 and m["coverage"] == pytest.approx(0.6)
    assert m["precision"] == pytest.approx(1 / 3)
    assert m["recall"] == pytest.approx(1 / 3)  # right in S: {0}; right in U: {0, 2, 3}
    assert m["per_class_counts"].tolist() == [2, 1]
    assert np.allclose(m["per_class_precision"], [0.5, 0.0])


def test_calibrated_predictor_precision_falls_with_coverage():
    """conf ~ U(a, 1), a = 1/K, correct ~ Bernoulli(conf): the selection at coverage c holds conf in
    [1 - c(1 - a), 1], so precision(c) = 1 - c(1 - a)/2 (closed form), decreasing in c. n = 2e5;
    tolerance 4 binomial SE at each c; weakly decreasing on a 0.05 grid to 1 SE."""
    rng = np.random.default_rng(1)
    k, n = 10, 200_000
    a = 1.0 / k
    conf = rng.uniform(a, 1.0, n)
    cls = rng.integers(0, k, n)
    probs = np.repeat(((1 - conf) / (k - 1))[:, None], k, axis=1)
    probs[np.arange(n), cls] = conf
    pred = ClassPredictive(probs)
    right = rng.random(n) < conf
    y = np.where(right, cls, (cls + rng.integers(1, k, n)) % k)
    cov, prec = precision_coverage(pred, y)
    grid = np.linspace(0.05, 1.0, 20)
    at = prec[np.searchsorted(cov, grid - 1e-12)]
    closed = 1 - grid * (1 - a) / 2
    se = np.sqrt(closed * (1 - closed) / (grid * n))
    assert np.all(np.abs(at - closed) < 4 * se)
    assert np.all(np.diff(at) <= se[1:])  # weakly decreasing (sampling noise of one SE allowed)
    assert at[0] - at[-1] > 0.4  # and clearly: 0.98 at c = 0.05 vs 0.55 at c = 1


def test_random_and_manual_use_the_same_seeded_items():
    a = random_selection(50, 10, random_state=3)
    assert a.tolist() == random_selection(50, 10, random_state=3).tolist()  # seeded
    assert random_selection(50, 4, random_state=3).tolist() == a[:4].tolist()  # nested in size
    y = np.arange(50) % 7
    idx, lab = manual_labels(y, 10, random_state=3)
    assert idx.tolist() == a.tolist() and np.array_equal(lab, y[idx])  # true labels: precision 1
    assert len(set(a.tolist())) == 10


# ---------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def digits_shift():
    """8x8 digits: source = half the objects, clean; target = the other half through the image_shift
    camera at strength 0.25; views at -15 and +15 deg form the pool, the 0 deg view is held out."""
    torch.set_num_threads(1)
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xs, Xt, ys, yt = train_test_split(X, y, test_size=0.5, random_state=0, stratify=y)
    views = make_views(Xt, 3, seed=1, camera=domain_gap(0.25, 8))
    pool = np.concatenate([views[0], views[2]])
    y_pool = np.concatenate([yt, yt])
    # image_shape: one mean/sd over all pixels; per-pixel standardisation blows up the near-constant
    # border pixels under the camera's brightness/contrast change
    base = MCDropoutClassifier(dropout="bernoulli", p=0.2, n_samples=10, features=64, hidden=(64, 64), epochs=40,
                               image_shape=(1, 8, 8), random_state=0).fit(Xs, ys)
    return base, Xs, ys, pool, y_pool, views[1], yt


def test_uncertainty_selection_beats_random_and_manual_is_exact(digits_shift):
    """Measured (seed 0, q = 0.3, |S| = 540 of 1,798): pseudo-label precision 0.924 (confidence)
    vs 0.680 (random, = the pool accuracy 0.679 to sampling noise); seeds 1, 2: 0.943/0.674,
    0.969/0.707. Asserted: uncertainty >= random + 0.1. Held-out accuracy 0.813 before adaptation;
    after 5 fine-tuning epochs 0.801 (auto), 0.810 (random), 0.873 (manual)."""
    base, Xs, ys, pool, y_pool, Xv, yv = digits_shift
    before = base.predict_distribution(Xv).probs.copy()
    runs = {}
    for strategy in ("uncertainty", "random", "manual"):
        al = AutoLabeler(base, strategy=strategy, fraction=0.3, finetune_epochs=5, random_state=0)
        runs[strategy] = al.fit(Xs, ys, pool, y_pool, eval_data=(Xv, yv))
    h = {s: r.history_ for s, r in runs.items()}
    n_sel = n_from_fraction(0.3, len(pool))
    for s in runs:
        assert [r["round"] for r in h[s]] == [0, 1] and h[s][1]["n_selected"] == n_sel  # equal |S|
        assert h[s][0]["accuracy"] == h["uncertainty"][0]["accuracy"]  # the same source model
        assert {"accuracy", "nll", "ece", "brier", "precision"} <= set(h[s][1])
    assert h["uncertainty"][1]["precision"] >= h["random"][1]["precision"] + 0.1
    assert h["manual"][1]["precision"] == 1.0 and h["manual"][1]["n_manual_labels"] == n_sel
    assert h["random"][1]["n_manual_labels"] == 0 == h["uncertainty"][1]["n_manual_labels"]
    assert np.array_equal(runs["random"].selected_, runs["manual"].selected_)  # same items, other labels
    assert np.array_equal(runs["manual"].labels_, y_pool[runs["manual"].selected_])
    pc_cov, pc_prec = precision_coverage(base.predict_distribution(pool), y_pool)
    at = pc_prec[np.searchsorted(pc_cov, 0.3 - 1e-12)]
    assert abs(at - h["uncertainty"][1]["precision"]) < 0.01  # the curve at 30% matches the run
    ev = runs["uncertainty"].evaluate(Xv, yv)
    assert ev["accuracy"] == pytest.approx(h["uncertainty"][1]["accuracy"])
    assert np.array_equal(base.predict_distribution(Xv).probs, before)  # the given model is not changed


def test_rounds_and_balanced_selection_record_each_round(digits_shift):
    base, Xs, ys, pool, y_pool, _Xv, _yv = digits_shift
    al = AutoLabeler(base, fraction=0.2, per_class="balanced", rounds=2, finetune_epochs=2, random_state=1)
    al.fit(Xs, ys, pool, y_pool)
    rounds = al.history_
    assert [r["round"] for r in rounds] == [0, 1, 2]
    n_sel = n_from_fraction(0.2, len(pool))
    for r in rounds[1:]:
        assert r["n_selected"] == n_sel and r["per_class_counts"].sum() == n_sel
        assert r["per_class_counts"].max() - r["per_class_counts"].min() <= 1  # balanced: 36 per class
        assert r["finetuned"] and 0.5 < r["precision"] <= 1.0
    assert "accuracy" not in rounds[1]  # no eval_data, no held-out scores


def _held_out(labels) -> int:
    """Rows a default MCDropoutClassifier holds out of these labels: ceil(0.1 n_c) of each class c,
    at most n_c - 1 (`dubito.early_stopping.holdout_split`, stratified)."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64))
    counts = counts[counts > 0]
    return int(np.minimum(np.ceil(0.1 * counts), counts - 1).sum())


def test_retrain_threshold_and_ensemble_paths(digits_shift):
    """finetune="retrain" fits a fresh clone on source ∪ S; a confidence threshold sets |S| for the
    random strategy too; an ensemble of MC-dropout members is fine-tuned member by member."""
    from dubito.classification import DeepEnsembleClassifier

    _, Xs, ys, pool, y_pool, _Xv, _yv = digits_shift
    Xs, ys, pool, y_pool = Xs[:300], ys[:300], pool[:200], y_pool[:200]
    small = MCDropoutClassifier(dropout="bernoulli", n_samples=4, features=32, hidden=(32,), epochs=20, batch_size=32,
                                image_shape=(1, 8, 8), random_state=0)
    al = AutoLabeler(small, threshold=0.7, fraction=None, finetune="retrain", random_state=0).fit(Xs, ys, pool, y_pool)
    src_conf = al.source_estimator_.predict_distribution(pool).confidence
    n_sel = int(np.sum(src_conf >= 0.7))
    assert al.history_[1]["n_selected"] == n_sel > 0
    # the retrained clone holds out ceil(0.1 n_c) rows of each class c of source ∪ S (validated fitting)
    labels = np.r_[ys, al.source_estimator_.predict_distribution(pool).predict()[src_conf >= 0.7]]
    assert al.estimator_ is not al.source_estimator_ and al.estimator_.n_train_ == 300 + n_sel - _held_out(labels)
    rnd = AutoLabeler(al.source_estimator_, strategy="random", threshold=0.7, fraction=None, finetune_epochs=1,
                      random_state=0).fit(Xs, ys, pool, y_pool)
    assert rnd.history_[1]["n_selected"] == n_sel and rnd.estimator_.n_train_ == 300 + n_sel  # continued
    ens = DeepEnsembleClassifier(small, n_members=2, random_state=0).fit(Xs, ys)
    ad = AutoLabeler(ens, fraction=0.25, finetune_epochs=1, random_state=0).fit(Xs, ys, pool)
    assert [m.n_train_ for m in ad.estimator_.members_] == [350, 350]
    assert [m.n_train_ for m in ens.members_] == [300 - _held_out(ys)] * 2  # the given ensemble is untouched
    assert "precision" not in ad.history_[1]  # no y_pool: nothing measured against true labels


# ---------------------------------------------------------------------------- bad input
def test_bad_input_raises():
    pred = ClassPredictive(np.array([[0.9, 0.1], [0.3, 0.7]]))
    for q in (0.0, -0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match="fraction"):
            select(pred, fraction=q)
    with pytest.raises(ValueError, match="exactly one of threshold= and fraction=.*both"):
        select(pred, threshold=0.5, fraction=0.5)
    with pytest.raises(ValueError, match="exactly one of threshold= and fraction=.*neither"):
        select(pred)
    with pytest.raises(ValueError, match="unknown measure 'margin'"):
        select(pred, measure="margin", fraction=0.5)
    with pytest.raises(ValueError, match="unknown measure"):
        precision_coverage(pred, [0, 1], measure="expected_entropy")
    with pytest.raises(ValueError, match="per_class"):
        select(pred, threshold=0.5, per_class="balanced")
    with pytest.raises(ValueError, match="per_class"):
        select(pred, fraction=0.5, per_class="equal")
    with pytest.raises(ValueError, match="pool is empty"):
        select(pred[np.zeros(2, dtype=bool)], fraction=0.5)
    with pytest.raises(ValueError, match="pool is empty"):
        precision_coverage(pred[np.zeros(2, dtype=bool)], np.zeros(0))
    with pytest.raises(ValueError, match="outside 0..1"):
        precision_coverage(pred, [0, 2])
    with pytest.raises(ValueError, match="ClassPredictive"):
        select(np.array([[0.9, 0.1]]), fraction=0.5)

    est = MCDropoutClassifier(epochs=1)
    Xs, ys = np.random.default_rng(0).random((10, 4)), np.arange(10) % 2
    with pytest.raises(ValueError, match="pool is empty"):
        AutoLabeler(est).fit(Xs, ys, np.zeros((0, 4)))
    with pytest.raises(ValueError, match="fraction"):
        AutoLabeler(est, fraction=1.5).fit(Xs, ys, Xs)
    with pytest.raises(ValueError, match="exactly one"):
        AutoLabeler(est, threshold=0.9).fit(Xs, ys, Xs)  # fraction left at its default
    with pytest.raises(ValueError, match="unknown measure"):
        AutoLabeler(est, measure="margin").fit(Xs, ys, Xs)
    with pytest.raises(ValueError, match="strategy"):
        AutoLabeler(est, strategy="oracle").fit(Xs, ys, Xs)
    with pytest.raises(ValueError, match="needs y_pool"):
        AutoLabeler(est, strategy="manual").fit(Xs, ys, Xs)
    with pytest.raises(ValueError, match="features"):
        AutoLabeler(est).fit(Xs, ys, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="predict_distribution"):
        AutoLabeler(object()).fit(Xs, ys, Xs)
