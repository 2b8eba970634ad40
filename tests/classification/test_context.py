"""Co-occurrence CRF (dubito.classification.context; spec §2.10 [R], correctness tests §6.19-6.20).

Oracles: a brute-force itertools loop over all K^n labelings (scores summed term by term, no
shared code with the library), hand-computed co-occurrence counts, finite differences, and data
sampled from a CRF with a known weight. Tolerances are stated at each assert.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import math
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dubito.classification.context import (
    DEFAULT_MAX_EXACT,
    CooccurrenceCRF,
    CooccurrenceStatistics,
)
from dubito.predictive import ClassPredictive

# ---------------------------------------------------------------------------- helpers

#: a scene corpus with two scene types: "office" {0 marker, 2 calculator} and "bathroom"
#: {1 toothbrush, 3 toothpaste}; marker and toothbrush (0, 1) are the confusable pair
OFFICE_BATHROOM = [[0, 2], [0, 2, 2], [0, 0, 2], [1, 3], [1, 3, 3], [1, 1, 3]] * 20


def _brute(p, phi, weight, adj=None, alpha=1.0, normalize=True):
    """Marginals, log Z and the MAP by looping over every labeling (the oracle)."""
    n, k = p.shape
    if adj is None:
        adj = ~np.eye(n, dtype=bool)
    s = weight / (n - 1) if (normalize and n > 1) else weight
    scores = {}
    for y in itertools.product(range(k), repeat=n):
        sc = 0.0
        for i in range(n):
            sc += alpha * math.log(p[i, y[i]])
        for i in range(n):
            for j in range(i + 1, n):
                if adj[i, j]:
                    sc += s * phi[y[i], y[j]]
        scores[y] = sc
    top = max(scores.values())
    z = sum(math.exp(v - top) for v in scores.values())
    marg = np.zeros((n, k))
    for y, v in scores.items():
        for i in range(n):
            marg[i, y[i]] += math.exp(v - top) / z
    best = max(scores, key=scores.get)
    return marg, top + math.log(z), np.array(best), scores


def _random_phi(k, rng, scale=1.5):
    a = rng.normal(scale=scale, size=(k, k))
    return 0.5 * (a + a.T)


def _chain(n):
    adj = np.zeros((n, n), dtype=bool)
    for i in range(n - 1):
        adj[i, i + 1] = adj[i + 1, i] = True
    return adj


def _star(n):
    adj = np.zeros((n, n), dtype=bool)
    adj[0, 1:] = adj[1:, 0] = True
    return adj


def _assert_marginals(m, n, k):
    assert m.shape == (n, k)
    assert np.all(m >= 0)
    np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-12)


def _sample_scenes(crf, n_scenes, rng, k, sizes=(3, 4)):
    """Scenes with Dirichlet(1) unaries and labels drawn exactly from the CRF's joint."""
    scenes, labels = [], []
    for _ in range(n_scenes):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        p = rng.dirichlet(np.ones(k), size=n)
        joint = np.exp(crf.log_joint(p)).ravel()
        flat = rng.choice(joint.size, p=joint / joint.sum())
        scenes.append(p)
        labels.append(np.array(np.unravel_index(flat, (k,) * n)))
    return scenes, labels


# ---------------------------------------------------------------------------- co-occurrence statistics


def test_cooccurrence_counts_match_hand_computation():
    stats = CooccurrenceStatistics.fit([[0, 1, 1], [2], [], [0, 2]], n_classes=3, smoothing=1.0)
    # scene [0, 1, 1]: ordered distinct pairs (0,1) x2, (1,0) x2, (1,1) x2; scene [0, 2]: (0,2), (2,0)
    raw = np.array([[0, 2, 1], [2, 2, 0], [1, 0, 0]], dtype=float)
    np.testing.assert_array_equal(stats.pair_counts, raw)
    np.testing.assert_array_equal(stats.counts, raw + 1)
    assert stats.n_scenes == 4 and stats.n_pairs == 8
    c = raw + 1
    np.testing.assert_allclose(stats.joint, c / c.sum(), rtol=1e-15)
    np.testing.assert_allclose(stats.conditional, c / c.sum(axis=1, keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(stats.conditional.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    cond = c / c.sum(axis=1, keepdims=True)
    lc = 0.5 * (np.log(cond) + np.log(cond).T)
    np.testing.assert_allclose(stats.log_potential(), lc, rtol=1e-14)
    pa = (c / c.sum()).sum(axis=1)
    np.testing.assert_allclose(stats.log_potential("pmi"), np.log(c / c.sum() / np.outer(pa, pa)), rtol=1e-13)
    for kind in ("log_conditional", "pmi"):
        phi = stats.log_potential(kind)
        assert np.array_equal(phi, phi.T)


def test_cooccurrence_symmetric_and_recovers_known_conditional():
    """Spec §6.20: pairs from a known joint P(a, b) -> C symmetric, rows of P(b|a) sum to 1, and
    P(b | a) recovered within 5 binomial standard errors (n = 40,000 pairs)."""
    rng = np.random.default_rng(0)
    k = 4
    a = rng.random((k, k)) + 0.2
    joint = (a + a.T) / (a + a.T).sum()
    flat = rng.choice(k * k, size=40_000, p=joint.ravel())
    scenes = [list(divmod(int(f), k)) for f in flat]  # two-object scenes (a, b)
    stats = CooccurrenceStatistics.fit(scenes, k, smoothing=1.0)
    np.testing.assert_array_equal(stats.counts, stats.counts.T)
    np.testing.assert_allclose(stats.conditional.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    true_cond = joint / joint.sum(axis=1, keepdims=True)
    n_a = stats.pair_counts.sum(axis=1)  # pairs with first object a
    se = np.sqrt(true_cond * (1 - true_cond) / n_a[:, None])
    assert np.all(np.abs(stats.conditional - true_cond) < 5 * se), np.abs(stats.conditional - true_cond) / se


def test_cooccurrence_bad_input():
    with pytest.raises(ValueError, match="outside 0..2"):
        CooccurrenceStatistics.fit([[0, 3]], 3)
    with pytest.raises(ValueError, match="integer"):
        CooccurrenceStatistics.fit([[0, 1.5]], 3)
    with pytest.raises(ValueError, match="empty"):
        CooccurrenceStatistics.fit([], 3)
    with pytest.raises(ValueError, match="smoothing"):
        CooccurrenceStatistics.fit([[0, 1]], 3, smoothing=0)
    with pytest.raises(ValueError, match="potential"):
        CooccurrenceStatistics.fit([[0, 1]], 3, potential="chi2")
    with pytest.raises(ValueError, match="symmetric"):
        CooccurrenceStatistics(np.array([[0.0, 1.0], [2.0, 0.0]]))


# ---------------------------------------------------------------------------- exact enumeration


@pytest.mark.parametrize("n,k", [(1, 3), (2, 2), (3, 3), (4, 3), (3, 4)])
def test_exact_equals_brute_force(n, k):
    rng = np.random.default_rng(10 * n + k)
    phi = _random_phi(k, rng)
    p = rng.dirichlet(np.ones(k), size=n)
    for weight, alpha, normalize in [(1.3, 1.0, True), (-0.7, 0.6, False), (2.5, 1.8, True)]:
        crf = CooccurrenceCRF(phi, weight=weight, unary_power=alpha, normalize=normalize, inference="exact")
        marg, log_z, best, scores = _brute(p, phi, weight, alpha=alpha, normalize=normalize)
        out = crf.refine(p)
        _assert_marginals(out, n, k)
        np.testing.assert_allclose(out, marg, rtol=0, atol=1e-12)
        assert crf.inference_info_[0]["method"] == "exact" and crf.inference_info_[0]["n_configurations"] == k**n
        np.testing.assert_array_equal(crf.map_labels(p), best)
        lj = crf.log_joint(p)  # normalised log P of every labeling
        for y, v in scores.items():
            assert abs(lj[y] - (v - log_z)) < 1e-10


def test_exact_with_sparse_graph_and_permutation_invariance():
    rng = np.random.default_rng(3)
    k, n = 3, 4
    phi = _random_phi(k, rng)
    p = rng.dirichlet(np.ones(k), size=n)
    adj = _chain(n)
    crf = CooccurrenceCRF(phi, weight=2.0, inference="exact")
    np.testing.assert_allclose(crf.refine(p, adjacency=adj), _brute(p, phi, 2.0, adj)[0], rtol=0, atol=1e-12)
    perm = np.array([2, 0, 3, 1])  # reorder the objects: marginals follow them (complete graph)
    np.testing.assert_allclose(crf.refine(p[perm]), crf.refine(p)[perm], rtol=0, atol=1e-13)


def test_pruned_with_top_k_equal_k_is_exact_and_pruned_matches_restricted_brute_force():
    rng = np.random.default_rng(4)
    k, n = 4, 3
    phi = _random_phi(k, rng)
    p = rng.dirichlet(np.ones(k), size=n)
    exact = CooccurrenceCRF(phi, weight=1.5, inference="exact").refine(p)
    full = CooccurrenceCRF(phi, weight=1.5, inference="pruned", top_k=k).refine(p)
    np.testing.assert_allclose(full, exact, rtol=0, atol=1e-13)
    # top_k = 2: the brute force over the labelings inside each node's two most probable labels
    crf = CooccurrenceCRF(phi, weight=1.5, inference="pruned", top_k=2)
    out = crf.refine(p)
    keep = np.argsort(-p, axis=1)[:, :2]
    _, _, _, scores = _brute(p, phi, 1.5)
    allowed = {y: v for y, v in scores.items() if all(y[i] in keep[i] for i in range(n))}
    top = max(allowed.values())
    ref = np.zeros((n, k))
    for y, v in allowed.items():
        for i in range(n):
            ref[i, y[i]] += math.exp(v - top)
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    assert crf.inference_info_[0]["n_configurations"] == 2**n


def test_auto_picks_exact_then_loopy():
    """auto = exact while K^n <= max_exact = 2e6, loopy beyond (no pruning: see the module docstring)."""
    k = 10
    phi = _random_phi(k, np.random.default_rng(5), scale=0.3)
    crf = CooccurrenceCRF(phi, weight=0.5)
    rng = np.random.default_rng(6)
    for n, method in [(3, "exact"), (6, "exact"), (7, "loopy"), (10, "loopy")]:
        crf.refine(rng.dirichlet(np.ones(k), size=n))
        assert crf.inference_info_[0]["method"] == method, (n, crf.inference_info_)
    crf.max_exact = 10**7
    crf.refine(rng.dirichlet(np.ones(k), size=7))
    assert crf.inference_info_[0]["method"] == "exact"
    assert DEFAULT_MAX_EXACT == 2_000_000


# ---------------------------------------------------------------------------- loopy belief propagation


@pytest.mark.parametrize("graph", ["chain", "star"])
@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_bp_is_exact_on_trees(graph, damping):
    """Spec §6.19: on a tree, sum-product equals brute force (here to 1e-10) and max-product gives
    the brute-force MAP. Damped messages converge geometrically, so tol = 1e-14."""
    rng = np.random.default_rng(7)
    k, n = 3, 6
    adj = _chain(n) if graph == "chain" else _star(n)
    for trial in range(3):
        phi = _random_phi(k, rng, scale=2.0)
        p = rng.dirichlet(np.ones(k), size=n)
        crf = CooccurrenceCRF(phi, weight=3.0, inference="loopy", damping=damping, tol=1e-14, max_iter=2000)
        marg, _, best, _ = _brute(p, phi, 3.0, adj)
        out = crf.refine(p, adjacency=adj)
        assert crf.inference_info_[0]["converged"]
        np.testing.assert_allclose(out, marg, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(crf.map_labels(p, adjacency=adj), best)


def test_bp_approximates_brute_force_on_small_complete_graphs():
    """Complete graphs n = 2..5, K = 2..6, Φ from typed scene corpora (two classes per type, so Φ
    spans ~6 nats): loopy BP at its defaults (damping 0.5, tol 1e-6) converges and stays within
    0.01 of the exact marginals at w = 0.25 and within 0.1 at w = 0.5 (measured over 400 such
    scenes: max 0.0065 and 0.062, medians 5e-4 and 4e-3). The error grows with the coupling; at
    w >= 2 BP on a complete graph can be off by ~0.5 or fail to converge."""
    rng = np.random.default_rng(8)
    worst = {0.25: 0.0, 0.5: 0.0}
    for _ in range(12):
        k = int(rng.integers(2, 7))
        typical = [rng.choice(k, size=2, replace=False) for _ in range(3)]
        corpus = [rng.choice(typical[rng.integers(3)], size=int(rng.integers(2, 5))) for _ in range(200)]
        stats = CooccurrenceStatistics.fit(corpus, k)
        n = int(rng.integers(2, 6))
        p = rng.dirichlet(np.ones(k), size=n)
        for w in (0.25, 0.5):
            exact = CooccurrenceCRF(stats, weight=w, inference="exact").refine(p)
            crf = CooccurrenceCRF(stats, weight=w, inference="loopy")
            loopy = crf.refine(p)
            assert crf.inference_info_[0]["converged"]
            _assert_marginals(loopy, n, k)
            worst[w] = max(worst[w], float(np.abs(loopy - exact).max()))
    assert worst[0.25] < 0.01 and worst[0.5] < 0.1, worst


def test_bp_non_convergence_is_reported():
    rng = np.random.default_rng(9)
    k, n = 4, 5
    p = rng.dirichlet(np.ones(k), size=n)
    crf = CooccurrenceCRF(_random_phi(k, rng, scale=3.0), weight=4.0, inference="loopy", max_iter=2)
    with pytest.warns(ConvergenceWarning, match="did not converge in 2 sweeps"):
        out = crf.refine(p)
    info = crf.inference_info_[0]
    assert info["converged"] is False and info["iterations"] == 2 and info["delta"] >= crf.tol
    _assert_marginals(out, n, k)


# ---------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("inference", ["exact", "pruned", "loopy"])
def test_weight_zero_returns_the_unaries(inference):
    """Spec §6.19: w = 0 -> marginals = the normalised unaries (to 1e-12), MAP = per-node argmax."""
    rng = np.random.default_rng(11)
    k, n = 5, 4
    p = rng.dirichlet(np.ones(k), size=n)
    p[0] = [0.0, 0.5, 0.5, 0.0, 0.0]  # zeros stay (numerically) zero
    crf = CooccurrenceCRF(_random_phi(k, rng), weight=0.0, inference=inference, top_k=k)
    out = crf.refine(p)
    np.testing.assert_allclose(out, p, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(crf.map_labels(p[1:]), p[1:].argmax(axis=1))
    pred = crf.refine(ClassPredictive(p))  # a ClassPredictive in -> a ClassPredictive out
    assert isinstance(pred, ClassPredictive)
    np.testing.assert_allclose(pred.probs, p, rtol=0, atol=1e-12)


@pytest.mark.parametrize("inference", ["exact", "loopy"])
def test_context_resolves_a_confusable_pair(inference):
    """The thesis's example (§1.2): an object between marker (0) and toothbrush (1), leaning
    toothbrush, next to a confident calculator (2) becomes a marker; next to toothpaste (3) it
    becomes a more certain toothbrush. Co-occurrence from office/bathroom scenes, w = 1."""
    stats = CooccurrenceStatistics.fit(OFFICE_BATHROOM, 4)
    crf = CooccurrenceCRF(stats, weight=1.0, inference=inference)
    ambiguous = [0.45, 0.55, 0.0, 0.0]
    office = crf.refine(np.array([ambiguous, [0.02, 0.02, 0.94, 0.02]]))
    bathroom = crf.refine(np.array([ambiguous, [0.02, 0.02, 0.02, 0.94]]))
    assert office[0, 0] > 0.5 > ambiguous[0] and office[0].argmax() == 0, office[0]
    assert bathroom[0, 1] > ambiguous[1] and bathroom[0].argmax() == 1, bathroom[0]
    # the confident object barely moves (its unary dominates)
    assert office[1, 2] > 0.9 and bathroom[1, 3] > 0.9


@pytest.mark.parametrize("inference", ["exact", "loopy"])
def test_very_large_weight_collapses_to_the_cooccurrence_mode(inference):
    """Spec §5.3 H9 / pitfall 12: at very large w the pairwise term swamps the unaries and every
    object takes the label of the co-occurrence mode argmax_y Σ_{i<j} Φ[y_i, y_j] (brute force),
    whatever its unary says (marginal of the mode label > 1 - 1e-6)."""
    stats = CooccurrenceStatistics.fit(OFFICE_BATHROOM + [[2, 2, 2]] * 40, 4)
    phi = stats.log_potential()
    rng = np.random.default_rng(12)
    n = 4
    p = rng.dirichlet(np.ones(4), size=n)
    p[:, 2] = 0.01  # the unaries all but rule out the mode's label
    p /= p.sum(axis=1, keepdims=True)
    ctx = {y: sum(phi[y[i], y[j]] for i in range(n) for j in range(i + 1, n))
           for y in itertools.product(range(4), repeat=n)}
    mode = max(ctx, key=ctx.get)
    assert mode == (2, 2, 2, 2) and sum(v > ctx[mode] - 1e-9 for v in ctx.values()) == 1  # a unique mode
    low = CooccurrenceCRF(stats, weight=0.5, inference=inference).refine(p)
    high = CooccurrenceCRF(stats, weight=1e3, inference=inference).refine(p)
    assert np.all(low[:, 2] < 0.5)
    assert np.all(high[:, 2] > 1 - 1e-6), high


def test_refine_many_matches_refine_for_lists_and_scene_ids():
    rng = np.random.default_rng(13)
    k = 4
    stats = CooccurrenceStatistics.fit(OFFICE_BATHROOM, k)
    crf = CooccurrenceCRF(stats, weight=1.0)
    scenes = [rng.dirichlet(np.ones(k), size=n) for n in (1, 3, 2, 5)]
    one_by_one = [crf.refine(s) for s in scenes]
    many = crf.refine_many(scenes)
    assert len(many) == 4 and len(crf.inference_info_) == 4
    for a, b in zip(many, one_by_one):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)
    # one (N, K) array of objects and their scene ids, shuffled: results come back in input order
    allp = np.concatenate(scenes)
    ids = np.repeat(np.array([7, 1, 4, 2]), [1, 3, 2, 5])
    order = rng.permutation(len(ids))
    out = crf.refine_many(allp[order], scene_ids=ids[order])
    np.testing.assert_allclose(out, np.concatenate(one_by_one)[order], rtol=0, atol=1e-15)
    preds = crf.refine_many([ClassPredictive(s) for s in scenes])
    assert all(isinstance(q, ClassPredictive) for q in preds)
    out = crf.refine_many(ClassPredictive(allp), scene_ids=ids)
    assert isinstance(out, ClassPredictive) and np.allclose(out.probs, np.concatenate(one_by_one))


# ---------------------------------------------------------------------------- learning the weight

K_FIT = 4
W_TRUE = 2.0


@pytest.fixture(scope="module")
def crf_data():
    """600 scenes of 3-4 objects (Dirichlet(1) unaries), labels drawn exactly from a CRF with
    w = 2 on the office/bathroom co-occurrence (seeded)."""
    stats = CooccurrenceStatistics.fit([[0, 1, 0], [0, 1], [2, 3], [2, 3, 3], [0, 1, 1], [2, 2, 3]] * 30, K_FIT)
    truth = CooccurrenceCRF(stats, weight=W_TRUE)
    scenes, labels = _sample_scenes(truth, 600, np.random.default_rng(14), K_FIT)
    return stats, scenes, labels


def test_pseudo_likelihood_recovers_the_weight(crf_data):
    """Max pseudo-likelihood on 600 scenes from a w = 2 CRF: |ŵ - 2| < 0.4 (measured sd 0.09 over 5
    seeds, so ~4 sd) and, fitting α too, |α̂ - 1| < 0.15 (sd 0.03)."""
    stats, scenes, labels = crf_data
    crf = CooccurrenceCRF(stats, weight=0.0).fit_weight(scenes, labels, method="pseudo-likelihood")
    assert abs(crf.weight - W_TRUE) < 0.4, crf.weight_fit_
    both = CooccurrenceCRF(stats).fit_weight(scenes, labels, method="pseudo-likelihood", fit_unary_power=True)
    assert abs(both.weight - W_TRUE) < 0.4 and abs(both.unary_power - 1.0) < 0.15, both.weight_fit_
    # the optimum is a stationary point: the gradient there is ~0
    _, grad = crf.pseudo_log_likelihood(scenes, labels)
    assert abs(grad[0]) < 1e-3 * len(np.concatenate(labels)), grad


def test_grid_recovers_a_positive_weight(crf_data):
    """Grid search by mean NLL of the CRF marginals on 300 of the scenes picks a weight within one
    grid step of 2 (the NLL curve is flat near the optimum: measured picks 2.0-2.5), and beats w = 0."""
    stats, scenes, labels = crf_data
    grid = [0.0, 0.5, 1.0, 2.0, 3.0, 6.0]
    crf = CooccurrenceCRF(stats).fit_weight(scenes[:300], labels[:300], method="grid", grid=grid)
    assert crf.weight in (1.0, 2.0, 3.0), crf.weight_fit_
    scores = crf.weight_fit_["scores"]
    assert scores[grid.index(crf.weight)] < scores[0]
    acc = CooccurrenceCRF(stats).fit_weight(scenes[:300], labels[:300], grid=[0.0, 1.0, 2.0], score="accuracy")
    assert acc.weight > 0 and acc.weight_fit_["scores"].max() > acc.weight_fit_["scores"][0] + 0.05  # context helps


def test_pseudo_likelihood_gradient_matches_finite_differences(crf_data):
    """Spec §6.19: ∂PL/∂w and ∂PL/∂α against central differences (h = 1e-5, relative 1e-6)."""
    stats, scenes, labels = crf_data
    crf = CooccurrenceCRF(stats)
    for w, a in [(0.0, 1.0), (1.3, 0.7), (-0.5, 2.0)]:
        _, grad = crf.pseudo_log_likelihood(scenes[:50], labels[:50], weight=w, unary_power=a)
        h = 1e-5
        dw = (crf.pseudo_log_likelihood(scenes[:50], labels[:50], weight=w + h, unary_power=a)[0]
              - crf.pseudo_log_likelihood(scenes[:50], labels[:50], weight=w - h, unary_power=a)[0]) / (2 * h)
        da = (crf.pseudo_log_likelihood(scenes[:50], labels[:50], weight=w, unary_power=a + h)[0]
              - crf.pseudo_log_likelihood(scenes[:50], labels[:50], weight=w, unary_power=a - h)[0]) / (2 * h)
        np.testing.assert_allclose(grad, [dw, da], rtol=1e-6, atol=1e-6)


def test_pseudo_likelihood_equals_brute_force_conditionals():
    """PL = Σ_i log P(y_i | y_-i, x) with each conditional read off the brute-force joint."""
    rng = np.random.default_rng(15)
    k, n = 3, 4
    phi = _random_phi(k, rng)
    p = rng.dirichlet(np.ones(k), size=n)
    y = np.array([0, 2, 2, 1])
    crf = CooccurrenceCRF(phi, weight=1.7, unary_power=0.8)
    _, _, _, scores = _brute(p, phi, 1.7, alpha=0.8)
    ref = 0.0
    for i in range(n):
        alts = [tuple(np.r_[y[:i], c, y[i + 1:]]) for c in range(k)]
        vals = np.array([scores[a] for a in alts])
        ref += vals[y[i]] - np.log(np.exp(vals).sum())
    value, _ = crf.pseudo_log_likelihood([p], [y])
    assert abs(value - ref) < 1e-12


# ---------------------------------------------------------------------------- bad input


def test_bad_input_raises_value_error():
    crf = CooccurrenceCRF(CooccurrenceStatistics.fit(OFFICE_BATHROOM, 4))
    good = np.full((3, 4), 0.25)
    with pytest.raises(ValueError, match="empty scene"):
        crf.refine(np.zeros((0, 4)))
    with pytest.raises(ValueError, match="shape"):
        crf.refine(np.full(4, 0.25))
    with pytest.raises(ValueError, match="3 classes but the co-occurrence potential has K = 4"):
        crf.refine(np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="do not sum to 1"):
        crf.refine(good * 1.1)
    with pytest.raises(ValueError, match="negative"):
        crf.refine(np.array([[1.2, -0.2, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        crf.refine(np.array([[np.nan, 0.5, 0.5, 0.0]]))
    with pytest.raises(ValueError, match="symmetric"):
        crf.refine(good, adjacency=np.array([[0, 1, 0], [0, 0, 1], [0, 1, 0]]))
    with pytest.raises(ValueError, match="self-loops"):
        crf.refine(good, adjacency=np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"adjacency must have shape"):
        crf.refine(good, adjacency=np.zeros((2, 2)))
    big = CooccurrenceCRF(np.zeros((10, 10)), inference="exact")
    with pytest.raises(ValueError, match="above max_exact"):
        big.refine(np.full((7, 10), 0.1))  # 10^7 > 2e6
    with pytest.raises(ValueError, match="empty"):
        crf.refine_many([])
    with pytest.raises(ValueError, match=r"scenes\[1\] is an empty scene"):
        crf.refine_many([good, np.zeros((0, 4))])
    with pytest.raises(ValueError, match="scene_ids"):
        crf.refine_many(good, scene_ids=[0, 1])
    with pytest.raises(ValueError, match="labels has 1 scene"):
        crf.fit_weight([good, good], [[0, 1, 2]])
    with pytest.raises(ValueError, match=r"labels\[0\] holds labels outside"):
        crf.fit_weight([good], [[0, 1, 4]])
    with pytest.raises(ValueError, match=r"labels\[0\] has 2 labels"):
        crf.fit_weight([good], [[0, 1]])
    with pytest.raises(ValueError, match="method"):
        crf.fit_weight([good], [[0, 1, 2]], method="ml")
    with pytest.raises(ValueError, match="symmetric"):
        CooccurrenceCRF(np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="finite"):
        CooccurrenceCRF(np.array([[0.0, -np.inf], [-np.inf, 0.0]]))
    for setting, value in [("inference", "gibbs"), ("damping", 1.0), ("weight", np.nan), ("unary_power", -1.0),
                           ("max_iter", 0), ("tol", 0.0), ("top_k", 0)]:
        bad = CooccurrenceCRF(np.zeros((4, 4)), **{setting: value})
        with pytest.raises(ValueError, match=setting):
            bad.refine(good)


# ---------------------------------------------------------------------------- benchmark smoke test


def test_crf_benchmark_quick_prints_the_table():
    """benchmarks/classification_crf.py --quick runs and prints one row per (K, n) with positive
    seconds per scene (a benchmark, not a timed test: no timing is checked)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "classification_crf.py"
    spec = importlib.util.spec_from_file_location("classification_crf", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    buf = io.StringIO()
    with redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mod.main(["--quick"])
    text = buf.getvalue()
    assert "seconds per scene" in text and "| K | n |" in text
    rows = [line for line in text.splitlines() if line.startswith("| 3 |")]
    assert len(rows) == 3, text
    assert all(float(r.split("|")[4]) > 0 for r in rows)
