"""ClassPredictive: measures against brute-force loops (math.log, per draw and class), the
spec's bounds (§6.9) and edge cases (§6.10), logits vs probabilities, pooling = concatenated
draws (§6.14), indexing, and one clear ValueError per bad input. Tolerances: 1e-12 for
float64 identities, 1e-6 where float32 tensors enter."""

import math
import re

import numpy as np
import pytest
import torch

import dubito.predictive.classes as classes_mod
from dubito.predictive import ClassPredictive


def _draws(rng, t, n, k, concentration=1.0):
    return rng.dirichlet(np.full(k, concentration), size=(t, n))


def _sparse_draws(rng, t, n, k):
    """Dirichlet draws with some exact zeros and some exact one-hots."""
    d = _draws(rng, t, n, k, 0.3)
    d[rng.random(d.shape) < 0.3] = 0.0
    onehot = rng.random((t, n)) < 0.2
    d[onehot] = np.eye(k)[rng.integers(k, size=onehot.sum())]
    d[d.sum(-1) == 0] = np.eye(k)[0]
    return d / d.sum(-1, keepdims=True)


def _brute(draws):
    """conf, H[p̄], E_t H[p_t], MI, VR by plain loops with math.log and 0 log 0 = 0."""
    t, n, k = draws.shape
    out = {m: np.empty(n) for m in ("confidence", "predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio")}
    for i in range(n):
        pbar = [sum(draws[s, i, c] for s in range(t)) / t for c in range(k)]
        h = -sum(p * math.log(p) for p in pbar if p > 0)
        eh = sum(-sum(p * math.log(p) for p in draws[s, i] if p > 0) for s in range(t)) / t
        votes = [0] * k
        for s in range(t):
            votes[int(np.argmax(draws[s, i]))] += 1
        out["confidence"][i] = max(pbar)
        out["predictive_entropy"][i] = h
        out["expected_entropy"][i] = eh
        out["mutual_information"][i] = max(h - eh, 0.0)
        out["variation_ratio"][i] = 1 - max(votes) / t
    return out


def _assert_value_error(call, match):
    """``call()`` raises ValueError whose message matches the regex ``match``."""
    with pytest.raises(ValueError) as err:
        call()
    assert re.search(match, str(err.value)), str(err.value)


def _assert_measures(pred, expected, atol=1e-12):
    for name, values in expected.items():
        np.testing.assert_allclose(pred.measure(name), values, atol=atol, rtol=0, err_msg=name)


def _assert_bounds(pred, t, k, tol=1e-12):
    conf, h, mi, vr = pred.confidence, pred.predictive_entropy, pred.mutual_information, pred.variation_ratio
    assert np.all(conf >= 1 / k - tol) and np.all(conf <= 1 + tol)
    assert np.all(h >= 0) and np.all(h <= math.log(k) + tol)
    assert np.all(mi >= 0) and np.all(mi <= h + tol) and np.all(mi <= math.log(t) + tol)
    assert np.all(pred.expected_entropy <= h + tol)
    assert np.all(vr >= 0) and np.all(vr <= 1 - 1 / k + tol)
    assert np.all(np.isfinite(pred.log_probs[pred.probs > 0]))


def test_measures_equal_brute_force():
    rng = np.random.default_rng(0)
    for t, n, k, sparse in [(7, 20, 4, False), (3, 15, 10, True), (1, 10, 3, False), (12, 10, 2, True)]:
        d = _sparse_draws(rng, t, n, k) if sparse else _draws(rng, t, n, k)
        pred = ClassPredictive(d)
        np.testing.assert_allclose(pred.probs, d.mean(0), atol=1e-15)
        _assert_measures(pred, _brute(d))
        assert pred.n_draws == t and pred.n_classes == k and len(pred) == n == pred.n_inputs


def test_bounds_on_random_draws():
    # spec §6.9: 1/K <= conf <= 1, 0 <= MI <= H <= log K, MI <= log T, 0 <= VR <= 1 - 1/K
    rng = np.random.default_rng(1)
    for _ in range(40):
        t, n, k = int(rng.integers(1, 30)), int(rng.integers(1, 50)), int(rng.integers(2, 12))
        conc = float(rng.choice([0.05, 0.5, 1.0, 20.0]))
        d = _sparse_draws(rng, t, n, k) if rng.random() < 0.3 else _draws(rng, t, n, k, conc)
        _assert_bounds(ClassPredictive(d), t, k)


def test_edge_cases_of_the_spec():
    # spec §6.10
    k = 5
    uniform = ClassPredictive(np.full((3, 4, k), 1 / k))
    np.testing.assert_allclose(uniform.predictive_entropy, math.log(k), atol=1e-12)
    np.testing.assert_allclose(uniform.confidence, 1 / k, atol=1e-15)
    assert np.all(uniform.mutual_information <= 1e-12)

    same = ClassPredictive(np.broadcast_to(np.eye(k)[2], (6, 3, k)))
    assert np.all(same.predictive_entropy == 0) and np.all(same.mutual_information == 0)
    assert np.all(same.variation_ratio == 0) and np.all(same.confidence == 1)
    assert np.all(np.isfinite(same.log_probs[:, 2])) and np.all(same.log_probs[:, [0, 1, 3, 4]] == -np.inf)

    distinct = ClassPredictive(np.eye(k)[:, None, :])  # T = K draws, one per class
    np.testing.assert_allclose(distinct.predictive_entropy, math.log(k), atol=1e-12)
    np.testing.assert_allclose(distinct.mutual_information, math.log(k), atol=1e-12)
    assert distinct.expected_entropy[0] == 0
    np.testing.assert_allclose(distinct.variation_ratio, 1 - 1 / k, atol=1e-15)


def test_single_draw_has_zero_mutual_information():
    # spec §6.1: a deterministic net (T = 1) has MI = 0; (N, K) is read as T = 1
    d = _draws(np.random.default_rng(2), 1, 30, 6)
    for pred in (ClassPredictive(d), ClassPredictive(d[0]), ClassPredictive.from_logits(np.log(d[0]) + 3.0)):
        assert pred.n_draws == 1
        assert np.all(np.abs(pred.mutual_information) < 1e-7)
        assert np.all(pred.variation_ratio == 0)
    np.testing.assert_allclose(ClassPredictive(d[0]).probs, d[0], atol=1e-15)


def test_from_logits_matches_softmax_and_is_stable():
    rng = np.random.default_rng(3)
    logits = rng.normal(scale=3, size=(8, 12, 5))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    a, b = ClassPredictive.from_logits(logits), ClassPredictive(p)
    np.testing.assert_allclose(a.probs, b.probs, atol=1e-14)
    np.testing.assert_allclose(a.log_probs, b.log_probs, atol=1e-12)
    _assert_measures(a, _brute(p), atol=1e-12)
    # shifted and huge logits: no overflow, log p̄ exact where p̄ underflows to 0
    big = np.array([[[1000.0, 0.0, -1000.0], [5e4, 5e4, 0.0]]])
    c = ClassPredictive.from_logits(big + 1e5)
    assert np.all(np.isfinite(c.log_probs))
    np.testing.assert_allclose(c.log_probs[0], [0.0, -1000.0, -2000.0], atol=1e-9)
    assert c.probs[0, 2] == 0.0 and c.predictive_entropy[0] == 0.0
    np.testing.assert_allclose(c.probs[1], [0.5, 0.5, 0.0], atol=1e-15)


def test_torch_float32_input_and_chunking(monkeypatch):
    rng = np.random.default_rng(4)
    d = _draws(rng, 6, 50, 7)
    ref = ClassPredictive(d)
    tens = torch.tensor(d, dtype=torch.float32, requires_grad=True)
    monkeypatch.setattr(classes_mod, "_CHUNK_ELEMENTS", 6 * 7 * 3)  # 3 inputs per chunk
    small = ClassPredictive(tens)
    np.testing.assert_allclose(small.probs, ref.probs, atol=1e-6)
    _assert_measures(small, _brute(d), atol=1e-5)
    assert small.probs.dtype == np.float64
    np.testing.assert_array_equal(ClassPredictive(d).variation_ratio, ref.variation_ratio)
    logit_chunks = ClassPredictive.from_logits(torch.log(tens))
    np.testing.assert_allclose(logit_chunks.probs, ref.probs, atol=1e-6)


def test_rows_within_tolerance_are_renormalised():
    d = _draws(np.random.default_rng(5), 3, 10, 4) * (1 + 5e-6)
    pred = ClassPredictive(d)
    np.testing.assert_allclose(pred.probs.sum(1), 1.0, atol=1e-14)
    assert np.all(pred.confidence <= 1.0)
    _assert_value_error(lambda: ClassPredictive(d, atol=1e-6), "do not sum to 1 within atol=1e-06")


def test_predict_takes_argmax_with_ties_to_lowest_index():
    p = np.array([[0.2, 0.5, 0.3], [0.4, 0.2, 0.4], [1 / 3, 1 / 3, 1 / 3]])
    labels = ClassPredictive(p).predict()
    assert labels.dtype == np.int64 and labels.tolist() == [1, 0, 0]


def test_indexing_equals_building_from_the_selected_draws():
    rng = np.random.default_rng(6)
    d = _draws(rng, 5, 12, 4)
    pred = ClassPredictive(d)
    mask = rng.random(12) < 0.5
    for index, idx in [(3, [3]), (slice(2, 9, 3), [2, 5, 8]), (mask, np.nonzero(mask)[0]), (np.array([7, 0, 7]), [7, 0, 7])]:
        sub, ref = pred[index], ClassPredictive(d[:, idx])
        assert len(sub) == len(idx) and sub.n_draws == 5
        _assert_measures(sub, {m: ref.measure(m) for m in ClassPredictive.MEASURES}, atol=0)
    assert len(pred[np.zeros(12, bool)]) == 0
    with pytest.raises(IndexError, match="not a bool"):
        pred[True]
    with pytest.raises(ValueError, match="read-only"):
        pred.probs[0, 0] = 1.0


def test_pool_equals_concatenated_draws():
    # spec §2.6 / §6.14: an ensemble pools its members' M*T draws
    rng = np.random.default_rng(7)
    members = [_draws(rng, t, 15, 5, 0.7) for t in (4, 1, 6)]
    pooled = ClassPredictive.pool([ClassPredictive(m) for m in members])
    ref = ClassPredictive(np.concatenate(members))
    assert pooled.n_draws == 11
    _assert_measures(pooled, {m: ref.measure(m) for m in ClassPredictive.MEASURES}, atol=1e-12)
    np.testing.assert_allclose(pooled.log_probs, ref.log_probs, atol=1e-12)
    # pooled MI >= mean member MI (the gap is the disagreement between members)
    mean_mi = np.mean([ClassPredictive(m).mutual_information for m in members], axis=0)
    assert np.all(pooled.mutual_information >= mean_mi - 1e-12)
    # M identical members equal one member
    one = ClassPredictive(members[0])
    same = ClassPredictive.pool([one, one, one])
    _assert_measures(same, {m: one.measure(m) for m in ClassPredictive.MEASURES}, atol=1e-12)
    _assert_value_error(lambda: ClassPredictive.pool([one, ClassPredictive(members[1][:, :3])]), "share")


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.full((2, 3, 4), 0.3), "do not sum to 1"),
        (np.array([[0.5, 0.7, -0.2]]), "negative probabilities"),
        (np.array([[np.nan, 0.5, 0.5]]), "NaN"),
        (np.array([[np.inf, 0.5, 0.5]]), "inf"),
        (np.full(4, 0.25), "shape \\(T, N, K\\)"),
        (np.full((2, 2, 3, 4), 0.25), "got 4 dimension"),
        (np.ones((3, 1)), "K >= 2"),
        (np.zeros((0, 3, 2)), "T >= 1"),
        ([["a", "b"]], "numeric"),
    ],
)
def test_bad_probabilities_raise_one_clear_error(bad, match):
    _assert_value_error(lambda: ClassPredictive(bad), match)


def test_every_problem_is_named_in_one_error():
    d = np.full((2, 3, 4), 0.25)
    d[0, 0, 0] = np.nan
    d[1, 1] = [0.5, 0.5, 0.5, -0.5]
    d[1, 2] = [0.9, 0.9, 0.0, 0.0]
    with pytest.raises(ValueError) as err:
        ClassPredictive(d)
    msg = str(err.value)
    assert "NaN" in msg and "negative" in msg and "1 of the 6 vectors p_t(. | x_i) do not sum to 1" in msg


def test_bad_logits_and_measure_names_raise():
    _assert_value_error(lambda: ClassPredictive.from_logits(np.array([[0.0, np.nan]])), "finite logits.*NaN")
    _assert_value_error(lambda: ClassPredictive.from_logits(np.array([[0.0, -np.inf]])), "finite logits.*inf")
    _assert_value_error(lambda: ClassPredictive(np.array([[0.5, 0.5]])).measure("entropy"), "unknown measure 'entropy'")
    _assert_value_error(lambda: ClassPredictive.pool([]), "non-empty sequence")
    _assert_value_error(lambda: ClassPredictive(np.array([[0.5, 0.5]]), atol=-1.0), "atol")
