"""dubito.metrics.entropy: k-NN entropy / KL estimators and the spread entropy (spec §2.2-2.4, §7 tests 1-5).

Oracles and tolerances:
* closed forms: Gaussian entropy ½ d ln(2πe) (±0.15, mean of 5 seeds, N = 2000), Gaussian KLs
  0.5 and ½(tr Σp⁻¹Σq - d + ln det Σp/det Σq) = 0.636 (±0.15 / ±0.2, mean of 10 seeds, N = M = 500),
  Q = P (|mean| < 0.1) - spec §7 tests 1 and 3;
* exact identities of the estimator (scaling, translation, rotation, permutation, the function-space
  constant, affine invariance of the KL), to 1e-5 - spec §7 test 2;
* the hand-worked case of spec §7 test 4, recomputed here by brute force;
* SciPy (gammaln for ln V_d, norm.entropy for U(x)), a plain numpy (N, N) brute-force implementation
  (1e-10 in float64), torch.autograd.gradcheck (central differences, float64) - spec §7 test 5.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import special, stats
from scipy.spatial.distance import cdist

from dubito.metrics import entropy as ent
from dubito.metrics.entropy import (
    DUPLICATE_WARNING,
    FLOAT32_EPS,
    function_entropy,
    function_kl,
    knn_entropy,
    knn_kl,
    log_unit_ball_volume,
    spread_entropy,
)

EULER_GAMMA = 0.5772156649015329


# ------------------------------------------------------------------ brute-force oracle


def _brute_knn_dist(a, b, k, exclude_self):
    """k-th nearest-neighbour distance of each row of a in b, from the full (N, M) matrix."""
    dist = cdist(
        np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    )  # direct, no Gram trick
    if exclude_self:
        n = dist.shape[0]
        dist = dist[~np.eye(n, dtype=bool)].reshape(n, n - 1)  # drop the point itself
    return np.sort(dist, axis=1)[:, k - 1]


def _brute_entropy(x, k=1):
    n, d = x.shape
    r = np.maximum(_brute_knn_dist(x, x, k, True), FLOAT32_EPS)
    log_vd = 0.5 * d * np.log(np.pi) - special.gammaln(0.5 * d + 1)
    return np.log(n) - special.digamma(k) + log_vd + d * np.mean(np.log(r))


def _brute_kl(q, p, k=1):
    (n, d), m = q.shape, p.shape[0]
    r = np.maximum(_brute_knn_dist(q, q, k, True), FLOAT32_EPS)
    s = np.maximum(_brute_knn_dist(q, p, k, False), FLOAT32_EPS)
    return np.log(m / (n - 1)) + d * np.mean(np.log(s / r))


# ------------------------------------------------------------------ spec §7 test 1


@pytest.mark.parametrize("d", [1, 2, 5])
def test_gaussian_entropy_matches_closed_form(d):
    est = [
        knn_entropy(np.random.default_rng(seed).standard_normal((2000, d)))
        for seed in range(5)
    ]
    assert np.mean(est) == pytest.approx(0.5 * d * np.log(2 * np.pi * np.e), abs=0.15)


# ------------------------------------------------------------------ spec §7 test 2


@pytest.fixture
def sample():
    rng = np.random.default_rng(7)
    return rng.standard_normal((300, 4)) @ rng.standard_normal((4, 4))


@pytest.mark.parametrize("a", [3.0, -0.25, 1e-3])
def test_entropy_scaling_and_translation(sample, a):
    d = sample.shape[1]
    b = np.array([1e3, -2.0, 0.5, 7.0])
    assert knn_entropy(a * sample + b) == pytest.approx(
        knn_entropy(sample) + d * np.log(abs(a)), abs=1e-5
    )
    assert knn_entropy(sample + b) == pytest.approx(knn_entropy(sample), abs=1e-5)


def test_entropy_rotation_and_permutation_invariance(sample):
    rng = np.random.default_rng(1)
    rot, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    h = knn_entropy(sample)
    assert knn_entropy(sample @ rot) == pytest.approx(h, abs=1e-5)
    assert knn_entropy(sample[rng.permutation(len(sample))]) == pytest.approx(
        h, abs=1e-5
    )
    assert knn_entropy(sample[:, rng.permutation(4)]) == pytest.approx(h, abs=1e-5)


@pytest.mark.parametrize("t", [3, 50])
def test_function_entropy_constant(t):
    preds = np.random.default_rng(t).standard_normal((200, t))
    h = knn_entropy(preds)
    assert function_entropy(preds) == pytest.approx(
        knn_entropy(preds / np.sqrt(t)), abs=1e-5
    )
    assert function_entropy(preds) == pytest.approx(h - 0.5 * t * np.log(t), abs=1e-5)
    tens = torch.as_tensor(preds)
    assert float(function_entropy(tens)) == pytest.approx(
        h - 0.5 * t * np.log(t), abs=1e-5
    )


def test_function_entropy_t200_constant_is_minus_529_83():
    # spec §2.4: -(T/2) ln T = -529.83 for T = 200
    preds = np.random.default_rng(0).standard_normal((60, 200))
    assert knn_entropy(preds) - function_entropy(preds) == pytest.approx(
        529.83, abs=5e-3
    )


def test_kl_invariant_under_common_affine_map():
    rng = np.random.default_rng(3)
    q, p = rng.standard_normal((150, 3)), rng.standard_normal((120, 3)) + 0.5
    rot, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    b = np.array([5.0, -100.0, 0.1])
    kl = knn_kl(q, p)
    for a in (2.0, -0.1):
        assert knn_kl(a * q @ rot + b, a * p @ rot + b) == pytest.approx(kl, abs=1e-5)
    assert knn_kl(q[rng.permutation(150)], p[rng.permutation(120)]) == pytest.approx(
        kl, abs=1e-5
    )
    # function_kl is knn_kl: the 1/sqrt(T) metric factor cancels
    assert function_kl(q / np.sqrt(3), p / np.sqrt(3)) == pytest.approx(kl, abs=1e-5)
    assert function_kl(q, p) == kl


# ------------------------------------------------------------------ spec §7 test 3


@pytest.mark.parametrize("d", [1, 2])
def test_kl_between_gaussians(d):
    shift = np.zeros(d)
    shift[0] = 1.0
    kl, same = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((500, d))
        kl.append(knn_kl(q, rng.standard_normal((500, d)) + shift))
        same.append(knn_kl(q, rng.standard_normal((500, d))))
    assert np.mean(kl) == pytest.approx(0.5, abs=0.15)  # ½ |mu_q - mu_p|^2
    assert abs(np.mean(same)) < 0.1


def test_kl_gaussian_variance_ratio():
    d = 2
    exact = 0.5 * (d * 0.25 - d + d * np.log(4.0))  # KL(N(0, I) || N(0, 4I)) = 0.636
    assert exact == pytest.approx(0.636, abs=1e-3)
    est = []
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        est.append(
            knn_kl(rng.standard_normal((500, d)), 2.0 * rng.standard_normal((500, d)))
        )
    assert np.mean(est) == pytest.approx(exact, abs=0.2)


# ------------------------------------------------------------------ spec §7 test 4


def test_hand_worked_case():
    q = np.array([[0.0], [1.0], [3.0]])
    p = np.array([[0.5], [10.0]])
    # brute force, one point at a time
    r = [
        min(abs(qi - qj) for j, qj in enumerate(q[:, 0]) if j != i)
        for i, qi in enumerate(q[:, 0])
    ]
    s = [min(abs(qi - pj) for pj in p[:, 0]) for qi in q[:, 0]]
    assert r == [1.0, 1.0, 2.0] and s == [0.5, 0.5, 2.5]
    kl_hand = np.log(2 / 2) + np.mean(np.log(np.array(s) / np.array(r)))
    h_hand = np.log(3) + EULER_GAMMA + np.log(2.0) + np.mean(np.log(r))
    assert kl_hand == pytest.approx(-0.3877, abs=1e-4)
    assert h_hand == pytest.approx(2.6000, abs=1e-4)
    for conv in (np.asarray, torch.as_tensor):
        assert float(knn_kl(conv(q), conv(p))) == pytest.approx(kl_hand, abs=1e-12)
        assert float(knn_entropy(conv(q))) == pytest.approx(h_hand, abs=1e-12)


# ------------------------------------------------------------------ ln V_d


def test_log_unit_ball_volume():
    assert log_unit_ball_volume(1) == pytest.approx(np.log(2.0), abs=1e-14)
    assert log_unit_ball_volume(2) == pytest.approx(np.log(np.pi), abs=1e-14)
    assert log_unit_ball_volume(3) == pytest.approx(np.log(4 * np.pi / 3), abs=1e-14)
    assert log_unit_ball_volume(751) == pytest.approx(-1424.6, abs=0.05)
    assert log_unit_ball_volume(200) == pytest.approx(-249.27, abs=0.005)
    for d in (1, 5, 151, 751, 1801, 5000):
        assert log_unit_ball_volume(d) == pytest.approx(
            d / 2 * np.log(np.pi) - special.gammaln(d / 2 + 1), rel=1e-12, abs=1e-10
        )
    assert isinstance(log_unit_ball_volume(np.int64(4)), float)


@pytest.mark.parametrize("d", [0, -1, 2.5, True])
def test_log_unit_ball_volume_rejects_bad_d(d):
    with pytest.raises(ValueError, match="d must be"):
        log_unit_ball_volume(d)


# ------------------------------------------------------------------ brute-force oracle, blocks


@pytest.mark.parametrize("block", [None, 1, 7])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_matches_brute_force(monkeypatch, block, k):
    rng = np.random.default_rng(k)
    q, p = rng.standard_normal((61, 6)), 1.3 * rng.standard_normal((45, 6)) + 0.2
    if (
        block is not None
    ):  # force row blocks of `block` rows (61 does not divide evenly)
        monkeypatch.setattr(ent, "_MAX_BLOCK_DISTANCES", block * 61)
    h_ref, kl_ref = _brute_entropy(q, k), _brute_kl(q, p, k)
    assert knn_entropy(q, k=k) == pytest.approx(h_ref, abs=1e-10)
    assert knn_kl(q, p, k=k) == pytest.approx(kl_ref, abs=1e-10)
    qt, pt = torch.as_tensor(q), torch.as_tensor(p)
    assert float(knn_entropy(qt, k=k)) == pytest.approx(h_ref, abs=1e-10)
    assert float(knn_kl(qt, pt, k=k)) == pytest.approx(kl_ref, abs=1e-10)


def test_blocked_search_equals_single_block_high_dim(monkeypatch):
    rng = np.random.default_rng(5)
    q = torch.as_tensor(rng.standard_normal((120, 500)), dtype=torch.float32)
    p = torch.as_tensor(rng.standard_normal((90, 500)) * 1.2, dtype=torch.float32)
    whole = (knn_entropy(q), knn_kl(q, p))
    monkeypatch.setattr(ent, "_MAX_BLOCK_DISTANCES", 1000)  # 8 or 9 rows per block
    blocked = (knn_entropy(q), knn_kl(q, p))
    assert [float(v) for v in blocked] == [float(v) for v in whole]
    assert float(whole[1]) == pytest.approx(_brute_kl(q.numpy(), p.numpy()), abs=1e-2)


# ------------------------------------------------------------------ numpy vs torch


def test_numpy_and_torch_paths_agree():
    rng = np.random.default_rng(11)
    q, p = rng.standard_normal((200, 20)), rng.standard_normal((150, 20)) + 0.3
    h, kl = knn_entropy(q), knn_kl(q, p)
    assert type(h) is float and type(kl) is float
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-3)):
        qt, pt = torch.as_tensor(q, dtype=dtype), torch.as_tensor(p, dtype=dtype)
        ht, klt = knn_entropy(qt), knn_kl(qt, pt)
        assert (
            ht.ndim == 0 and ht.dtype == dtype and klt.ndim == 0 and klt.dtype == dtype
        )
        assert float(ht) == pytest.approx(h, abs=tol)
        assert float(klt) == pytest.approx(kl, abs=tol)
    # mixed inputs: a numpy p follows a tensor q; a tensor p with numpy q gives a float
    assert float(knn_kl(torch.as_tensor(q), p)) == pytest.approx(kl, abs=1e-10)
    assert knn_kl(q, torch.as_tensor(p)) == pytest.approx(kl, abs=1e-10)
    assert knn_entropy(q.tolist()) == pytest.approx(h, abs=1e-12)


# ------------------------------------------------------------------ spec §7 test 5: gradients


def test_gradients_match_central_differences():
    rng = np.random.default_rng(2)
    q = torch.tensor(rng.standard_normal((12, 3)), requires_grad=True)
    p = torch.tensor(rng.standard_normal((10, 3)) + 0.5, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: knn_entropy(x), (q,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(
        lambda x: knn_entropy(x, k=2), (q,), eps=1e-6, atol=1e-6
    )
    assert torch.autograd.gradcheck(
        lambda x, y: knn_kl(x, y), (q, p), eps=1e-6, atol=1e-6
    )
    assert torch.autograd.gradcheck(
        lambda x: function_entropy(x), (q,), eps=1e-6, atol=1e-6
    )
    draws = torch.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    assert torch.autograd.gradcheck(spread_entropy, (draws,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradients_finite_with_duplicates(dtype):
    rng = np.random.default_rng(4)
    base = rng.standard_normal((20, 5))
    q0 = np.vstack([base, base[:3]])  # duplicated q rows
    p0 = np.vstack([base[5:8], rng.standard_normal((15, 5))])  # p rows equal to q rows
    q = torch.tensor(q0, dtype=dtype, requires_grad=True)
    p = torch.tensor(p0, dtype=dtype, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="some samples coincide"):
        h = knn_entropy(q)
    with pytest.warns(RuntimeWarning, match="some samples coincide"):
        kl = knn_kl(q, p)
    (h + kl).backward()
    assert torch.isfinite(h) and torch.isfinite(kl)
    assert torch.isfinite(q.grad).all() and torch.isfinite(p.grad).all()
    assert q.grad.abs().sum() > 0
    # the duplicates' distances were clamped at eps: ln r = ln eps there
    idx = ent._kth_index_torch(q, q, 1, exclude_self=True)
    log_r, zero = ent._log_dist_torch(q, q, idx)
    assert zero and float(log_r.detach().min()) == pytest.approx(
        np.log(FLOAT32_EPS), abs=1e-4
    )


def test_total_collapse_is_finite_with_zero_gradient():
    q = torch.ones(8, 3, dtype=torch.float64, requires_grad=True)
    with pytest.warns(RuntimeWarning, match="some samples coincide"):
        h = knn_entropy(q)
    h.backward()
    assert h.item() == pytest.approx(
        np.log(8) + EULER_GAMMA + log_unit_ball_volume(3) + 3 * np.log(FLOAT32_EPS),
        abs=1e-6,
    )
    assert torch.count_nonzero(q.grad) == 0


def test_duplicate_warning_numpy_and_constant_message():
    x = np.vstack([np.eye(3), np.eye(3)[:1]])
    for call in (lambda: knn_entropy(x), lambda: knn_kl(x, x)):
        with pytest.warns(RuntimeWarning) as rec:
            call()
        assert len(rec) == 1 and str(rec[0].message) == DUPLICATE_WARNING
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # generic data: no warning
        knn_entropy(np.random.default_rng(0).standard_normal((50, 2)))


def test_float32_gradient_flows_on_large_d():
    # the hypernetwork case: N = 200, d = 751, float32
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(200, 751, generator=gen, requires_grad=True)
    p = 0.5 * torch.randn(200, 751, generator=gen)
    kl = knn_kl(q, p)
    kl.backward()
    assert kl.dtype == torch.float32 and torch.isfinite(q.grad).all()
    assert kl.item() == pytest.approx(
        _brute_kl(q.detach().numpy(), p.numpy()), abs=0.05
    )


# ------------------------------------------------------------------ spread entropy


def test_spread_entropy_matches_gaussian_entropy():
    draws = np.random.default_rng(9).standard_normal((40, 7)) * np.arange(1, 8)
    ref = stats.norm(scale=draws.std(axis=0, ddof=1)).entropy()
    u = spread_entropy(draws)
    assert u.shape == (7,)
    np.testing.assert_allclose(u, ref, atol=1e-12)
    np.testing.assert_allclose(
        u, 0.5 * np.log(2 * np.pi * np.e * draws.var(axis=0, ddof=1)), atol=1e-12
    )
    ut = spread_entropy(torch.as_tensor(draws, dtype=torch.float32))
    assert isinstance(ut, torch.Tensor) and ut.dtype == torch.float32
    np.testing.assert_allclose(ut.numpy(), ref, atol=1e-5)
    assert spread_entropy(np.ones((3, 2)))[0] == -np.inf


# ------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize("conv", [np.asarray, torch.as_tensor])
def test_bad_inputs_raise(conv):
    good = np.random.default_rng(0).standard_normal((10, 3))
    nan = good.copy()
    nan[2, 1] = np.nan
    inf = good.copy()
    inf[0, 0] = np.inf
    cases = [
        (lambda: knn_entropy(conv(good[:, 0])), "2-D"),
        (lambda: knn_entropy(conv(good[None])), "2-D"),
        (lambda: knn_entropy(conv(np.zeros((0, 3)))), "at least one row"),
        (lambda: knn_entropy(conv(np.zeros((5, 0)))), "at least one row"),
        (lambda: knn_entropy(conv(nan)), "1 NaN or infinite"),
        (lambda: knn_entropy(conv(inf)), "1 NaN or infinite"),
        (lambda: knn_entropy(conv(good), k=0), "k must be >= 1"),
        (lambda: knn_entropy(conv(good), k=10), "k must be < the number of samples"),
        (lambda: knn_entropy(conv(good), k=1.5), "k must be an integer"),
        (lambda: knn_kl(conv(good), conv(good[:, :2])), "same number of columns"),
        (
            lambda: knn_kl(conv(good), conv(good[:2]), k=3),
            "k must be <= the number of p_samples",
        ),
        (
            lambda: knn_kl(conv(good[:1]), conv(good)),
            "k must be < the number of samples",
        ),
        (lambda: knn_kl(conv(good), conv(nan)), "p_samples holds 1 NaN"),
        (lambda: knn_kl(conv(inf), conv(good)), "q_samples holds 1 NaN"),
        (lambda: function_entropy(conv(good[:, 0])), "2-D"),
        (lambda: spread_entropy(conv(good[:1])), "at least 2 rows"),
        (lambda: spread_entropy(conv(good[:, 0])), "2-D"),
        (lambda: spread_entropy(conv(nan)), "NaN"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()


def test_non_numeric_and_integer_tensor_raise():
    with pytest.raises(ValueError, match="samples must be a numeric array"):
        knn_entropy([["a", "b"], ["c", "d"]])
    with pytest.raises(ValueError, match="floating-point tensor"):
        knn_entropy(torch.arange(12).reshape(4, 3))
    with pytest.raises(ValueError, match="p_samples must be a numeric array"):
        knn_kl(torch.zeros(4, 1), [["x"], ["y"]])
    assert math.isfinite(
        knn_entropy(np.arange(12).reshape(4, 3))
    )  # integer numpy is fine
