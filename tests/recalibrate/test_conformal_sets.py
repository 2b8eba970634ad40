"""ConformalSets (LAC, APS, RAPS): a brute-force implementation, MAPIE 1.6's SplitConformalClassifier,
marginal coverage over exchangeable repeats, and bad input."""

import math
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from dubito.predictive import ClassPredictive
from dubito.recalibrate.conformal_sets import (
    ConformalSets,
    conformal_rank,
    min_calibration_points,
)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def synthetic(rng, n, k, sharpen=2.0, scale=1.5):
    """Predictive softmax(sharpen * z), labels from softmax(z): an over-confident model (any works)."""
    z = rng.normal(scale=scale, size=(n, k))
    q = softmax(z)
    y = np.minimum((rng.uniform(size=(n, 1)) > np.cumsum(q, axis=1)).sum(axis=1), k - 1)
    return softmax(sharpen * z), y


# ---------------------------------------------------------------------------- brute force
def brute_score(p, c, u, method, lam, k_reg):
    """Score of class c for one probability vector p, from the definitions, with plain loops."""
    if method == "lac":
        return 1.0 - p[c]
    ranked = sorted(range(len(p)), key=lambda j: (-p[j], j))  # decreasing p, ties -> lower index
    rho = 0.0
    for j in ranked:
        if j == c:
            break
        rho += p[j]
    o = ranked.index(c) + 1
    pen = lam * max(0, o - k_reg) if method == "raps" else 0.0
    return rho + u * p[c] + pen


def brute_sets(p_cal, y_cal, u_cal, p_test, u_test, method, level, lam=0.0, k_reg=0, allow_empty=True):
    # the sets are defined on p̄, the predictive's probabilities (rows renormalised to sum to 1 in float64)
    p_cal, p_test = ClassPredictive(p_cal).probs, ClassPredictive(p_test).probs
    n = len(y_cal)
    scores = sorted(brute_score(p_cal[i], y_cal[i], u_cal[i], method, lam, k_reg) for i in range(n))
    k = math.ceil((n + 1) * Fraction(str(level)))  # exact rational level: 0.9 is 9/10
    q = scores[k - 1]
    out = np.zeros(p_test.shape, dtype=bool)
    for i in range(len(p_test)):
        for c in range(p_test.shape[1]):
            out[i, c] = brute_score(p_test[i], c, u_test[i], method, lam, k_reg) <= q
        if not allow_empty:
            out[i, min(range(p_test.shape[1]), key=lambda j: (-p_test[i, j], j))] = True
    return out


CASES = [("lac", {}), ("aps", {}), ("raps", {"lam": 0.1, "k_reg": 1}), ("raps", {"lam": 0.01, "k_reg": 2})]


@pytest.mark.parametrize("method,extra", CASES)
@pytest.mark.parametrize("level", [0.8, 0.9])
@pytest.mark.parametrize("randomized", [False, True])
@pytest.mark.parametrize("allow_empty", [True, False])
def test_sets_equal_brute_force(method, extra, level, randomized, allow_empty):
    """Exact equality with the loop implementation: 20 calibration points, 30 test inputs, K = 4."""
    rng = np.random.default_rng(10)
    p_cal, y_cal = synthetic(rng, 20, 4)
    p_test, _ = synthetic(rng, 30, 4)
    u_cal, u_test = rng.uniform(size=20), rng.uniform(size=30)
    if not randomized:
        u_cal, u_test = np.ones(20), np.ones(30)
    cs = ConformalSets(method, level, randomized=randomized, allow_empty=allow_empty, **extra)
    ours = cs.fit(p_cal, y_cal, u=u_cal if randomized else None).predict_sets(p_test, u=u_test if randomized else None)
    lam, k_reg = extra.get("lam", 0.0), extra.get("k_reg", 0)
    expected = brute_sets(p_cal, y_cal, u_cal, p_test, u_test, method, level, lam, k_reg, allow_empty)
    np.testing.assert_array_equal(ours, expected)
    assert ours.dtype == bool and ours.shape == (30, 4)


@pytest.mark.parametrize("method", ["lac", "aps", "raps"])
def test_sets_equal_brute_force_with_ties(method):
    """Probabilities on a 0.1 grid (many ties): ties are ranked by the lower class index in both."""
    rng = np.random.default_rng(11)
    grid = np.array([[0.4, 0.3, 0.2, 0.1], [0.3, 0.3, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25], [0.1, 0.6, 0.1, 0.2],
                     [0.5, 0.5, 0.0, 0.0], [0.2, 0.2, 0.2, 0.4]])
    p_cal = grid[rng.integers(0, len(grid), size=40)]
    y_cal = rng.integers(0, 4, size=40)
    p_test = grid
    ones = np.ones(40)
    for level in (0.7, 0.9):
        cs = ConformalSets(method, level, allow_empty=True, lam=0.05, k_reg=1).fit(p_cal, y_cal)
        expected = brute_sets(p_cal, y_cal, ones, p_test, ones, method, level, 0.05, 1, True)
        np.testing.assert_array_equal(cs.predict_sets(p_test), expected)


def test_quantile_rank_is_exact_for_decimal_levels():
    """⌈(n + 1)·level⌉ with level read as a decimal: n = 74 at 0.68 -> 51, where float (n + 1) * 0.68 says 52."""
    assert math.ceil(75 * 0.68) == 52  # the float pitfall this guards against (75 * 0.68 = 51.00000000000001)
    for n in [9, 10, 19, 24, 49, 74, 99, 100, 999, 12345]:
        for level in [0.28, 0.5, 0.56, 0.68, 0.8, 0.9, 0.95, 0.99, 0.999]:
            assert conformal_rank(n, level) == math.ceil((n + 1) * Fraction(str(level)))
    assert [min_calibration_points(lv) for lv in (0.5, 0.8, 0.9, 0.95, 0.99)] == [1, 4, 9, 19, 99]
    # n = 74 at level 0.68 uses the 51st smallest score
    rng = np.random.default_rng(12)
    p, y = synthetic(rng, 74, 3)
    cs = ConformalSets("lac", 0.68).fit(p, y)
    scores = 1 - ClassPredictive(p).probs[np.arange(74), y]
    assert cs.rank_ == 51 and cs.threshold_ == np.sort(scores)[50]


def test_input_kinds_and_attributes():
    rng = np.random.default_rng(13)
    p, y = synthetic(rng, 200, 5)
    a = ConformalSets("aps", 0.9).fit(p, y)
    b = ConformalSets("aps", 0.9).fit(ClassPredictive(p), y)
    assert a.threshold_ == b.threshold_ and a.n_calibration_ == 200 and a.n_classes_ == 5
    np.testing.assert_array_equal(a.predict_sets(p), b.predict_sets(ClassPredictive(p)))
    # (T, N, K) draws: their mean is used
    draws = np.stack([p, p])
    np.testing.assert_array_equal(ConformalSets("aps", 0.9).fit(draws, y).predict_sets(draws), a.predict_sets(p))
    # a seeded randomised instance is reproducible; sets are top-m classes for APS/RAPS
    s1 = ConformalSets("raps", 0.9, randomized=True, random_state=0, k_reg=1).fit(p, y).predict_sets(p)
    s2 = ConformalSets("raps", 0.9, randomized=True, random_state=0, k_reg=1).fit(p, y).predict_sets(p)
    np.testing.assert_array_equal(s1, s2)
    order = np.argsort(-p, axis=1, kind="stable")
    ranked = np.take_along_axis(s1, order, axis=1)
    assert np.all(ranked[:, :-1] >= ranked[:, 1:])  # no gap: included classes are the top ones
    # allow_empty=False: never empty, and a superset of the allow_empty=True set
    cs = ConformalSets("lac", 0.5, allow_empty=True).fit(p, y)
    empty_ok = cs.predict_sets(p)
    full = ConformalSets("lac", 0.5).fit(p, y).predict_sets(p)
    assert np.all(full.sum(axis=1) >= 1) and np.all(full >= empty_ok)


# ---------------------------------------------------------------------------- MAPIE 1.6
class _Passthrough(ClassifierMixin, BaseEstimator):
    """A 'fitted' classifier whose predict_proba returns its input: MAPIE sees our probabilities."""

    def __init__(self, k=2):
        self.k = k

    def fit(self, X, y=None):
        self.classes_ = np.arange(self.k)
        self.n_features_in_ = self.k
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=np.float64)

    def predict(self, X):
        return np.argmax(X, axis=1)


def _mapie_sets(p_cal, y_cal, p_test, score, level, include_last_label, seed):
    pytest.importorskip("mapie")
    from mapie.classification import SplitConformalClassifier

    est = _Passthrough(p_cal.shape[1]).fit(p_cal, y_cal)
    m = SplitConformalClassifier(est, confidence_level=level, conformity_score=score, prefit=True, random_state=seed)
    m.conformalize(p_cal, y_cal)
    _, sets = m.predict_set(p_test, conformity_score_params={"include_last_label": include_last_label})
    return m, sets[:, :, 0]


# MAPIE's include_last_label (prediction time) in our terms: u_test = 0 ("True", add the label that
# crosses q̂), u_test = 1 with the top class kept ("False"), u_test = 1 - U ("randomized", MAPIE keeps
# the crossing label when V <= U, we when ρ + u p <= q̂: the same event for u = 1 - U). MAPIE always
# randomises the calibration scores as cumsum - U p = ρ + (1 - U) p, so we pass u_cal = 1 - U_cal,
# U drawn by numpy.random.RandomState(seed) as MAPIE draws them.
_MODES = [(True, "zeros", True), (False, "ones", False), ("randomized", "mapie", True)]


@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.95])
def test_lac_equals_mapie(level):
    """LAC: score 1 - p_y, quantile the ⌈(n + 1)L⌉-th smallest, sets {1 - p <= q̂} (empty allowed) in both."""
    rng = np.random.default_rng(20)
    p_cal, y_cal = synthetic(rng, 500, 6)  # (n + 1)L = 250.5, 400.8, 450.9, 475.95: no float edge
    p_test, _ = synthetic(rng, 400, 6)
    m, expected = _mapie_sets(p_cal, y_cal, p_test, "lac", level, True, 0)
    cs = ConformalSets("lac", level, allow_empty=True).fit(p_cal, y_cal)
    q_mapie = float(m._mapie_classifier.conformity_score_function_.quantiles_[0])
    assert cs.threshold_ == pytest.approx(q_mapie, abs=1e-15)
    np.testing.assert_array_equal(cs.predict_sets(p_test), expected)
    if level == 0.5:
        assert (expected.sum(axis=1) == 0).any()  # empty LAC sets occur, and agree


@pytest.mark.parametrize("level", [0.8, 0.9])
@pytest.mark.parametrize("mode,u_test,allow_empty", _MODES)
def test_aps_equals_mapie(level, mode, u_test, allow_empty):
    """APS: all three MAPIE modes coincide with ours on every test input (no ties, probabilities continuous)."""
    seed = 3
    rng = np.random.default_rng(21)
    p_cal, y_cal = synthetic(rng, 500, 6)
    p_test, _ = synthetic(rng, 400, 6)
    m, expected = _mapie_sets(p_cal, y_cal, p_test, "aps", level, mode, seed)
    u_cal = 1 - np.random.RandomState(seed).uniform(size=500)
    u = {"zeros": np.zeros(400), "ones": np.ones(400),
         "mapie": 1 - np.random.RandomState(seed).uniform(size=(400, 1))[:, 0]}[u_test]
    cs = ConformalSets("aps", level, randomized=True, allow_empty=allow_empty).fit(p_cal, y_cal, u=u_cal)
    np.testing.assert_allclose(cs.scores_, m.conformity_scores.ravel(), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(cs.predict_sets(p_test, u=u), expected)


@pytest.mark.parametrize("mode,u_test,allow_empty", _MODES)
def test_raps_equals_mapie_where_the_definitions_coincide(mode, u_test, allow_empty):
    """RAPS with MAPIE's tuned λ* and k* fed to ours, on the calibration points MAPIE keeps.

    MAPIE holds out a StratifiedShuffleSplit share of the calibration data (test_size None -> 10 %,
    its size_raps is overwritten by None) to tune k* and λ*; we reproduce the split. Calibration
    scores and q̂ agree to 1e-15. Sets: "False" agrees everywhere. "True" agrees where MAPIE's set
    has at most k* classes: beyond, MAPIE adds the crossing label j when cumsum_{j-1} + λ(j-1-k)^+ <
    q̂ (the penalty of the rank before), we when cumsum_{j-1} + λ(j-k)^+ <= q̂ (the score at u = 0).
    "randomized" agrees where MAPIE's set has at most k* + 1 classes: beyond, MAPIE divides V by
    p_L - λ(L-k)^+ + λ·1[L > k] where the paper and Angelopoulos's code divide by p_L.
    """
    from sklearn.model_selection import StratifiedShuffleSplit

    seed, level, k = 4, 0.9, 12
    rng = np.random.default_rng(22)
    p_cal, y_cal = synthetic(rng, 1000, k, sharpen=1.0, scale=1.0)  # flat probabilities: large sets
    p_test, _ = synthetic(rng, 600, k, sharpen=1.0, scale=1.0)
    m, expected = _mapie_sets(p_cal, y_cal, p_test, "raps", level, mode, seed)
    score = m._mapie_classifier.conformity_score_function_
    lam, k_star = float(np.atleast_1d(score.lambda_star)[0]), int(np.atleast_1d(score.k_star)[0])
    train, _ = next(StratifiedShuffleSplit(n_splits=1, test_size=None, random_state=seed).split(p_cal, y_cal))
    u_cal = 1 - np.random.RandomState(seed).uniform(size=train.size)
    u = {"zeros": np.zeros(600), "ones": np.ones(600),
         "mapie": 1 - np.random.RandomState(seed).uniform(size=(600, 1))[:, 0]}[u_test]
    cs = ConformalSets("raps", level, randomized=True, allow_empty=allow_empty, lam=lam, k_reg=k_star)
    cs.fit(p_cal[train], y_cal[train], u=u_cal)
    assert cs.threshold_ == pytest.approx(float(np.ravel(score.quantiles_)[0]), abs=1e-15)
    ours = cs.predict_sets(p_test, u=u)
    size = expected.sum(axis=1)
    keep = {"zeros": size <= k_star, "ones": np.ones(600, bool), "mapie": size <= k_star + 1}[u_test]
    assert keep.mean() > 0.3, keep.mean()  # the comparison covers a fair share of the inputs
    np.testing.assert_array_equal(ours[keep], expected[keep])
    if u_test != "ones":
        assert (ours[~keep] != expected[~keep]).any() or (~keep).sum() == 0  # the documented difference


# ---------------------------------------------------------------------------- coverage
def _coverage_runs(cs_kwargs, level, n, n_test, repeats, seed):
    """Mean over `repeats` exchangeable draws (calibration n, test n_test) of the test coverage."""
    rng = np.random.default_rng(seed)
    p, y = synthetic(rng, repeats * (n + n_test), 5)
    p = p.reshape(repeats, n + n_test, 5)
    y = y.reshape(repeats, n + n_test)
    covs = np.empty(repeats)
    for r in range(repeats):
        cs = ConformalSets(level=level, random_state=seed + r, **cs_kwargs).fit(p[r, :n], y[r, :n])
        sets = cs.predict_sets(p[r, n:])
        covs[r] = sets[np.arange(n_test), y[r, n:]].mean()
    return covs.mean()


CONFIGS = [
    {"randomized": False, "allow_empty": False},  # the default
    {"randomized": False, "allow_empty": True},
    {"randomized": True, "allow_empty": True},
]


@pytest.mark.parametrize("method,extra", [("lac", {}), ("aps", {}), ("raps", {"lam": 0.05, "k_reg": 1})])
@pytest.mark.parametrize("level,n", [(0.8, 50), (0.9, 50), (0.95, 50), (0.99, 150)])
@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_marginal_coverage(method, extra, level, n, config):
    """E[coverage] >= level; = ⌈(n + 1)L⌉/(n + 1) exactly when sets may be empty and the scores are
    a.s. distinct (LAC; randomised APS/RAPS -- deterministic APS/RAPS tie at the last-ranked class).

    500 repeats of n calibration and 200 test points. Tolerance 3 sd of the mean of the per-repeat
    coverages, sd^2 = L(1 - L)(1/(n + 2) + 1/200)/500: the Beta(k, n + 1 - k) spread of the
    conditional coverage plus the binomial spread of 200 test points. An off-by-one rank moves the
    mean by 1/(n + 1), 2.8 to 4.5 of these sd.
    """
    kwargs = {"method": method, **extra, **CONFIGS[config]}
    repeats, n_test = 500, 200
    mean = _coverage_runs(kwargs, level, n, n_test, repeats, seed=100 + config)
    tol = 3 * math.sqrt(level * (1 - level) * (1 / (n + 2) + 1 / n_test) / repeats)
    assert mean >= level - tol, (mean, level, tol)
    if kwargs["allow_empty"] and (method == "lac" or kwargs["randomized"]):  # a.s. distinct scores
        exact = conformal_rank(n, level) / (n + 1)
        assert abs(mean - exact) <= tol, (mean, exact, tol)


# ---------------------------------------------------------------------------- bad input
def _data(n=50, k=4):
    return synthetic(np.random.default_rng(30), n, k)


@pytest.mark.parametrize("method", ["lac", "aps", "raps"])
def test_bad_input_length_mismatch(method):
    p, y = _data()
    with pytest.raises(ValueError, match="class_pred has 50 inputs but y has 51 labels"):
        ConformalSets(method).fit(p, np.append(y, 0))


def test_bad_input_labels_outside_classes():
    p, y = _data()
    y = y.copy()
    y[0] = 7
    with pytest.raises(ValueError, match=r"label\(s\) outside 0..3"):
        ConformalSets("aps").fit(p, y)
    y[0] = -1
    with pytest.raises(ValueError, match=r"label\(s\) outside 0..3"):
        ConformalSets("aps").fit(p, y)


def test_bad_input_other_number_of_classes():
    p, y = _data()
    cs = ConformalSets("raps").fit(p, y)
    with pytest.raises(ValueError, match="K = 5 classes but this ConformalSets was fitted on K = 4"):
        cs.predict_sets(_data(10, 5)[0])


def test_bad_input_too_few_calibration_points():
    p, y = _data(5)
    with pytest.raises(ValueError, match="level=0.99 needs at least 99 calibration points.*got 5"):
        ConformalSets("lac", 0.99).fit(p, y)
    p, y = _data(8)
    with pytest.raises(ValueError, match="level=0.9 needs at least 9 calibration points.*got 8"):
        ConformalSets("aps", 0.9).fit(p, y)
    p, y = _data(9)
    ConformalSets("aps", 0.9).fit(p, y)  # 9 is enough: the 9th smallest of 9 scores


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.1, float("nan"), "0.9", True])
def test_bad_input_level(level):
    with pytest.raises(ValueError, match=r"level must be a number in \(0, 1\)"):
        ConformalSets("lac", level)


def test_bad_input_nan():
    p, y = _data()
    bad = p.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="class_pred: .*hold NaN"):
        ConformalSets("aps").fit(bad, y)
    cs = ConformalSets("aps").fit(p, y)
    with pytest.raises(ValueError, match="class_pred: .*hold NaN"):
        cs.predict_sets(bad)


def test_bad_input_predict_before_fit():
    p, _ = _data()
    with pytest.raises(ValueError, match="not fitted yet"):
        ConformalSets("lac").predict_sets(p)


def test_bad_input_settings():
    with pytest.raises(ValueError, match="method must be one of"):
        ConformalSets("top_k")
    with pytest.raises(ValueError, match="lam"):
        ConformalSets("raps", lam=-1)
    with pytest.raises(ValueError, match="k_reg"):
        ConformalSets("raps", k_reg=1.5)
    with pytest.raises(ValueError, match="randomized must be True or False"):
        ConformalSets("aps", randomized="yes")
    p, y = _data()
    with pytest.raises(ValueError, match=r"u must have shape \(50,\)"):
        ConformalSets("aps", randomized=True).fit(p, y, u=np.ones(3))
    with pytest.raises(ValueError, match=r"u must hold numbers in \[0, 1\]"):
        ConformalSets("aps", randomized=True).fit(p, y, u=np.full(50, 2.0))
