"""GaussianMixture against brute-force sums of scipy.stats.norm, case by case."""
import numpy as np
import pytest
from scipy import optimize, stats

from dubito.predictive import GaussianMixture

# (id, N, M, kind). kinds: "wide" (means ~ 100, sds 1e-2..1e2), "narrow" (sds 1e-4..1e-2),
# "far" (components 1e4 apart, sd ~1: the CDF is flat between them), "unit".
CASES = [
    ("n1-m1-unit", 1, 1, "unit"),
    ("n1-m3-far", 1, 3, "far"),
    ("n7-m3-wide", 7, 3, "wide"),
    ("n7-m10-narrow", 7, 10, "narrow"),
    ("n50-m1-wide", 50, 1, "wide"),
    ("n50-m3-unit", 50, 3, "unit"),
    ("n50-m10-far", 50, 10, "far"),
]
IDS = [c[0] for c in CASES]
LEVELS = np.array([1e-6, 0.025, 0.3, 0.5, 0.8, 0.975, 1 - 1e-6])


def make(case, seed=0, noise=False):
    _, n, m, kind = case
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(m, 2.0), size=n)
    if kind == "unit":
        mu, sd = rng.normal(0, 1, (n, m)), rng.uniform(0.3, 2, (n, m))
    elif kind == "wide":
        mu, sd = rng.normal(0, 100, (n, m)), np.exp(rng.uniform(np.log(1e-2), np.log(1e2), (n, m)))
    elif kind == "narrow":
        mu, sd = rng.normal(0, 1e-2, (n, m)), np.exp(rng.uniform(np.log(1e-4), np.log(1e-2), (n, m)))
    else:  # far
        mu = 1e4 * np.arange(m)[None, :] + rng.normal(0, 1, (n, m))
        sd = rng.uniform(0.5, 2, (n, m))
    nv = sd**2 * rng.uniform(0, 1, (n, m)) if noise else None
    return GaussianMixture(w, mu, sd**2, noise_variances=nv), w, mu, sd


def brute_logpdf(w, mu, sd, y):
    """Loop over inputs and components: log sum_m w_m pdf_m(y) with scipy.stats.norm."""
    out = np.zeros_like(y)
    for i in range(y.shape[0]):
        dens = np.zeros(y.shape[1])
        for m in range(w.shape[1]):
            dens += w[i, m] * stats.norm(mu[i, m], sd[i, m]).pdf(y[i])
        out[i] = np.log(dens)
    return out


def brute_cdf(w, mu, sd, y):
    out = np.zeros_like(y)
    for i in range(y.shape[0]):
        for m in range(w.shape[1]):
            out[i] += w[i, m] * stats.norm(mu[i, m], sd[i, m]).cdf(y[i])
    return out


def points(mu, sd, rng, k=6):
    """Evaluation points near every component (where the density is not underflowing)."""
    n, m = mu.shape
    comp = rng.integers(m, size=(n, k))
    rows = np.arange(n)[:, None]
    return mu[rows, comp] + sd[rows, comp] * rng.normal(0, 2, (n, k))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_moments_log_prob_cdf_match_brute_force(case):
    p, w, mu, sd = make(case)
    rng = np.random.default_rng(1)
    y = points(mu, sd, rng)
    mean = np.array([sum(w[i, m] * mu[i, m] for m in range(w.shape[1])) for i in range(len(w))])
    second = np.array([sum(w[i, m] * (sd[i, m] ** 2 + mu[i, m] ** 2) for m in range(w.shape[1]))
                       for i in range(len(w))])
    scale = np.abs(mu).max(axis=1) + sd.max(axis=1)
    np.testing.assert_allclose(p.mean, mean, rtol=1e-12, atol=1e-14 * scale.max())
    # the textbook form loses ~|mu|^2 eps to cancellation; our stable form does not
    np.testing.assert_allclose(p.var, second - mean**2, rtol=1e-9, atol=1e-13 * scale.max() ** 2)
    np.testing.assert_allclose(p.log_prob(y), brute_logpdf(w, mu, sd, y), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(p.cdf(y), brute_cdf(w, mu, sd, y), rtol=1e-11, atol=1e-14)
    assert p.n_components == w.shape[1]
    np.testing.assert_allclose(p.weights, w, rtol=1e-15)
    np.testing.assert_array_equal(p.means, mu)
    np.testing.assert_array_equal(p.variances, sd**2)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_quantile_matches_brentq_on_brute_force_cdf(case):
    p, w, mu, sd = make(case)
    rows = min(len(w), 7)  # brentq per (input, level) is the slow part: 7 inputs suffice
    x = p[:rows].quantile(LEVELS[None, :])
    for i in range(rows):
        def cdf(t):
            return float(np.dot(w[i], stats.norm.cdf(t, mu[i], sd[i])))

        lo, hi = mu[i].min() - 40 * sd[i].max(), mu[i].max() + 40 * sd[i].max()
        for j, q in enumerate(LEVELS):
            ref = optimize.brentq(lambda t: cdf(t) - q, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
            # the defining property, exact to 1e-9 absolute even at q = 1e-6, 1 - 1e-6
            assert abs(cdf(x[i, j]) - q) <= 1e-9 * max(q, 1e-3)
            # and the same root: allow the CDF error 1e-10 translated to x through the density
            dens = float(np.dot(w[i], stats.norm.pdf(x[i, j], mu[i], sd[i])))
            assert abs(x[i, j] - ref) <= 1e-10 / dens + 1e-12 * abs(ref), (i, q, x[i, j], ref)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_many_levels_start_from_a_table_and_match_brentq(case):
    """From 24 levels per row the solver starts from a table of F (mixture._table_start):
    the same defining property and root as the level-by-level start, to the same tolerance,
    on levels from 1e-6 to 1 - 1e-6 (a conformal map's 400 knots look like this)."""
    from dubito.predictive import mixture

    levels = np.concatenate([[1e-6, 1e-4], np.linspace(0.01, 0.99, 37), [1 - 1e-4, 1 - 1e-6]])
    assert levels.size >= mixture._TABLE_MIN_LEVELS
    p, w, mu, sd = make(case, seed=3)
    rows = min(len(w), 3)
    x = p[:rows].quantile(levels[None, :])
    for i in range(rows):
        def cdf(t):
            return float(np.dot(w[i], stats.norm.cdf(t, mu[i], sd[i])))

        lo, hi = mu[i].min() - 40 * sd[i].max(), mu[i].max() + 40 * sd[i].max()
        for j, q in enumerate(levels):
            ref = optimize.brentq(lambda t: cdf(t) - q, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
            assert abs(cdf(x[i, j]) - q) <= 1e-9 * max(min(q, 1 - q), 1e-3), (i, q)
            dens = float(np.dot(w[i], stats.norm.pdf(x[i, j], mu[i], sd[i])))
            assert abs(x[i, j] - ref) <= 1e-10 / dens + 1e-12 * abs(ref), (i, q, x[i, j], ref)


def test_far_apart_components_extreme_levels():
    """Two unit components 1e6 apart: quantiles in the gap and the tails stay exact."""
    w = np.array([[0.3, 0.7], [0.5, 0.5], [1e-3, 1 - 1e-3]])
    mu = np.array([[0.0, 1e6], [-1e6, 1e6], [0.0, 50.0]])
    p = GaussianMixture(w, mu, np.ones((3, 2)))
    q = np.array([[1e-12, 1e-6, 0.1, 0.2999999, 0.3000001, 0.5, 0.9, 1 - 1e-6]])
    x = p.quantile(q)
    np.testing.assert_allclose(p.cdf(x), np.broadcast_to(q, x.shape), rtol=1e-8, atol=1e-12)
    assert np.all(np.diff(x, axis=1) >= 0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_decomposition_sums_to_var(case):
    p, w, mu, sd = make(case)
    np.testing.assert_allclose(p.aleatoric_var, (w * sd**2).sum(1), rtol=1e-13)
    np.testing.assert_allclose(p.epistemic_var, (w * (mu - p.mean[:, None]) ** 2).sum(1),
                               rtol=1e-9, atol=1e-12 * p.var.max())
    np.testing.assert_allclose(p.epistemic_var + p.aleatoric_var, p.var, rtol=1e-13)
    pn, w, mu, sd = make(case, noise=True)
    nv = pn.noise_variances
    assert np.all(nv <= sd**2)
    np.testing.assert_allclose(pn.aleatoric_var, (w * nv).sum(1), rtol=1e-13)
    np.testing.assert_allclose(pn.epistemic_var, pn.var - pn.aleatoric_var,
                               rtol=1e-9, atol=1e-12 * pn.var.max())
    np.testing.assert_allclose(pn.epistemic_var + pn.aleatoric_var, pn.var, rtol=1e-13)
    assert np.all(pn.epistemic_var >= p.epistemic_var * (1 - 1e-12))  # some variance moved over


def test_shared_weights_zero_weight_components_and_normalisation():
    mu = np.array([[-1.0, 1000.0, 5.0], [2.0, -1000.0, 4.0]])
    var = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
    p = GaussianMixture([2.0, 0.0, 6.0], mu, var)  # (M,) weights, unnormalised, one zero
    np.testing.assert_allclose(p.weights, [[0.25, 0.0, 0.75]] * 2)
    ref = GaussianMixture([[0.25, 0.75]] * 2, mu[:, [0, 2]], var[:, [0, 2]])
    y = np.array([[-3.0, 0.0, 1.0, 7.0, 1000.0]])
    np.testing.assert_allclose(p.log_prob(y), ref.log_prob(y), rtol=1e-14)
    np.testing.assert_allclose(p.cdf(y), ref.cdf(y), rtol=1e-14)
    np.testing.assert_allclose(p.quantile(LEVELS[None]), ref.quantile(LEVELS[None]), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(p.mean, ref.mean, rtol=1e-15)
    np.testing.assert_allclose(p.var, ref.var, rtol=1e-14)
    s = p.sample(5000, generator=0)
    assert np.abs(s).max() < 100  # the zero-weight component at +-1000 is never drawn


def test_identical_components_collapse_to_their_normal():
    mu = np.full((4, 3), 2.0)
    p = GaussianMixture([0.2, 0.3, 0.5], mu, np.full((4, 3), 9.0))
    q = np.array([[1e-6, 0.1, 0.5, 0.9]])
    np.testing.assert_allclose(p.quantile(q), stats.norm(2.0, 3.0).ppf(np.broadcast_to(q, (4, 4))), rtol=1e-13)
    np.testing.assert_allclose(p.epistemic_var, 0.0, atol=1e-15)


def test_large_problem_is_blocked_and_vectorised():
    """N = 2000, M = 50, k = 20: runs in blocks (no (N, k, M) temporary) and stays exact."""
    rng = np.random.default_rng(3)
    n, m, k = 2000, 50, 20
    p = GaussianMixture(rng.dirichlet(np.ones(m), size=n), rng.normal(0, 5, (n, m)),
                        rng.uniform(0.01, 4, (n, m)))
    q = rng.uniform(size=(n, k))
    x = p.quantile(q)
    np.testing.assert_allclose(p.cdf(x), q, rtol=0, atol=1e-9)
    assert p.log_prob(x).shape == (n, k)


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([1.0], [[0.0]], [[-1.0]]), {}, "variances must be positive"),
        (([1.0], [[np.nan]], [[1.0]]), {}, "means must be finite"),
        (([1.0, -0.5], [[0.0, 1.0]], [[1.0, 1.0]]), {}, "weights must be non-negative"),
        (([[0.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]), {}, "weights must not sum to 0"),
        (([1.0, 1.0, 1.0], [[0.0, 1.0]], [[1.0, 1.0]]), {}, r"weights must have shape \(2,\) or \(1, 2\)"),
        (([1.0, 1.0], [[0.0, 1.0]], [[1.0, 1.0, 1.0]]), {}, r"variances must have shape \(1, 2\)"),
        (([1.0, 1.0], [0.0, 1.0], [1.0, 1.0]), {}, r"means must have shape \(N, M\)"),
        (([1.0, 1.0], [[0.0, 1.0]], [[1.0, 1.0]]), {"noise_variances": [[2.0, 0.5]]}, "must not exceed variances"),
        (([1.0, 1.0], [[0.0, 1.0]], [[1.0, 1.0]]), {"noise_variances": [[-2.0, 0.5]]}, "noise_variances must be non-negative"),
        (([1.0, 1.0], [[0.0, 1.0]], [[1.0, 1.0]]), {"noise_variances": [0.5, 0.5]}, "noise_variances must have shape"),
        (([1.0, np.inf], [[0.0, 1.0]], [[1.0, 1.0]]), {}, "weights must be finite"),
    ],
)
def test_bad_input_names_the_problem(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        GaussianMixture(*args, **kwargs)


@pytest.mark.parametrize("n_in, m_comp", [(3, 40), (40, 3), (5, 6)])
def test_sample_components_equal_the_inverse_cdf_count(n_in, m_comp):
    """Both component searches (loop over components when M - 1 <= N, binary search per input
    otherwise) draw component #{m < M-1 : cw_m <= u} for the same u, zero weights included."""
    from dubito.predictive.mixture import _mix_sample

    rng = np.random.default_rng(11)
    w = rng.dirichlet(np.ones(m_comp), size=n_in)
    w[:, 1] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    mu = np.arange(n_in * m_comp, dtype=float).reshape(n_in, m_comp) * 1e3
    sd = np.zeros_like(mu)  # a draw is its component's mean: the component index is readable
    draws = _mix_sample(w, mu, sd, 300, np.random.default_rng(5))
    u = np.random.default_rng(5).uniform(size=(300, n_in))
    cw = np.cumsum(w, axis=1)
    expect = (u[:, :, None] >= cw[None, :, : m_comp - 1]).sum(-1)  # brute force, (n, N, M - 1)
    np.testing.assert_array_equal(draws, mu[np.arange(n_in)[None, :], expect])
    assert not np.isin(1, expect)  # the zero-weight component is never drawn
