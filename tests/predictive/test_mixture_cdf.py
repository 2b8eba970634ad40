"""The box-wise Hermite expansion of a Gaussian mixture's CDF against the direct sum of SciPy's
normal CDFs (the oracle). Tolerance 1e-12 absolute: measured at most 7e-14 (the module's worst-case
bound is 3.8e-11, checked with components placed where the bound is reached); a wrong sign,
factorial or missing variance term is off by 1e-4 or more."""

from __future__ import annotations

from math import factorial

import numpy as np
import pytest
from scipy import stats

import dubito.predictive.mixture_cdf as mixture_cdf_module
from dubito.predictive import GaussianMixture
from dubito.predictive.mixture_cdf import (
    BOX_COST,
    MIN_POINTS,
    ORDER,
    ORDER_MIXED,
    VARIANCE_RATIO,
    BoxExpansion,
    _terms,
    mixture_cdf,
)

ATOL = 1e-12


def _oracle(w, mu, sd, t):
    return np.einsum("rtm,rm->rt", stats.norm.cdf(t[:, :, None], mu[:, None, :], sd[:, None, :]), w)


def _case(kind, n=6, m=800, seed=0):
    """MC dropout's shape (spread 0.3, one sd 1), a kernel density (sd 0.2), sds spread over a
    factor 2 (many variance classes), two far clusters of tiny sd, Dirichlet weights throughout."""
    rng = np.random.default_rng(seed)
    if kind == "mc-dropout":
        mu, sd = rng.normal(0, 0.3, (n, m)), np.ones((n, m))
    elif kind == "kde":
        mu, sd = rng.normal(0, 1, (n, m)), np.full((n, m), 0.2)
    elif kind == "sds-vary":
        mu, sd = rng.normal(0, 1, (n, m)), rng.uniform(0.3, 0.6, (n, m))
    else:  # two clusters 1e4 apart, sd 1e-3
        mu = np.where(rng.random((n, m)) < 0.5, -5e3, 5e3) + rng.normal(0, 2e-3, (n, m))
        sd = rng.uniform(1e-3, 1.05e-3, (n, m))
    w = rng.dirichlet(np.ones(m), n)
    centre = np.median(mu, axis=1, keepdims=True)
    t = np.concatenate([np.linspace(mu.min(1) - 5 * sd.max(1), mu.max(1) + 5 * sd.max(1), 60, axis=1),
                        centre + rng.normal(0, 1, (n, 20)) * sd.max()], axis=1)
    return w, mu, sd, t


@pytest.mark.parametrize("kind", ["mc-dropout", "kde", "sds-vary", "far-clusters"])
def test_box_expansion_equals_the_direct_sum(kind):
    w, mu, sd, t = _case(kind)
    box = BoxExpansion(w, mu, sd**2)
    np.testing.assert_allclose(box.cdf(t), _oracle(w, mu, sd, t), rtol=0, atol=ATOL)
    # F and the density at (row, point) pairs, as the quantiles' Newton steps ask for them
    rows = np.repeat(np.arange(t.shape[0]), t.shape[1])
    f, p = box.cdf_pdf_pairs(rows, t.ravel())
    density = np.einsum("rtm,rm->rt", stats.norm.pdf(t[:, :, None], mu[:, None, :], sd[:, None, :]), w).ravel()
    np.testing.assert_allclose(f, _oracle(w, mu, sd, t).ravel(), rtol=0, atol=ATOL)
    np.testing.assert_allclose(p, density, rtol=0, atol=1e-10 * density.max())
    # the boxes partition the components: their masses are the weights
    np.testing.assert_allclose(box._mass.sum(axis=1), 1.0, rtol=1e-13)
    assert np.all(box.n_boxes < mu.shape[1])


def test_the_terms_recurrence_equals_the_double_sum():
    # T_n = sum_(k + 2l = n) a^k / k! e^l / l!, summed term by term (the definition)
    rng = np.random.default_rng(3)
    w, a, e = rng.random(50), rng.uniform(-0.5, 0.5, 50), rng.uniform(-0.1, 0.1, 50)
    got = list(_terms(w, a, e, ORDER_MIXED))
    for n in range(ORDER_MIXED + 1):
        parts = [a ** (n - 2 * el) / factorial(n - 2 * el) * e**el / factorial(el) for el in range(n // 2 + 1)]
        # to rounding of the terms' size (terms of both signs cancel in some T_n)
        assert np.all(np.abs(got[n] - w * sum(parts)) <= 1e-14 * w * sum(np.abs(p) for p in parts))


def test_components_at_the_edges_of_their_boxes_stay_within_the_bound():
    # every component half a bin from its box centre and at the edge of its variance class,
    # where the dropped terms are largest (|a| = 1/2, |e| = 0.1): the bound, 3.8e-11, holds
    rng = np.random.default_rng(4)
    m = 400
    cls = rng.integers(0, 3, m)
    var = VARIANCE_RATIO ** (cls + rng.choice([0.0, 1.0 - 1e-9], m))
    var[0], var[1] = 1.0, VARIANCE_RATIO**3 - 1e-9  # the row's range: classes of a full factor 1.5
    sb = np.sqrt(0.5 * (1 + VARIANCE_RATIO) * VARIANCE_RATIO**cls)
    mu = (rng.integers(0, 6, m) + rng.choice([0.0, 1.0 - 1e-9], m)) * sb
    mu -= mu.min()
    sd = np.sqrt(var)[None]
    mu, w = mu[None], rng.dirichlet(np.ones(m))[None]
    t = np.linspace(mu.min() - 6, mu.max() + 6, 400)[None]
    box = BoxExpansion(w, mu, sd**2)
    assert box.order == ORDER_MIXED
    np.testing.assert_allclose(box.cdf(t), _oracle(w, mu, sd, t), rtol=0, atol=3.8e-11)


def test_a_rows_values_do_not_depend_on_the_rows_built_with_it():
    # one-variance rows take ORDER, rows with variance classes ORDER_MIXED; built together, the
    # one-variance rows' higher terms are zero, so their values are bit-identical either way
    w, mu, sd, t = _case("kde", n=4)
    sd[2] = np.random.default_rng(5).uniform(0.3, 0.6, mu.shape[1])
    together = BoxExpansion(w, mu, sd**2)
    np.testing.assert_array_equal(together.row_order, [ORDER, ORDER, ORDER_MIXED, ORDER])
    keep = np.array([True, True, False, True])
    alone = BoxExpansion(w[keep], mu[keep], sd[keep] ** 2)
    assert alone.order == ORDER
    np.testing.assert_array_equal(together.cdf(t)[keep], alone.cdf(t[keep]))
    np.testing.assert_array_equal(together.rows(keep).cdf(t[keep]), alone.cdf(t[keep]))
    rows = np.repeat(np.arange(3), t.shape[1])
    for a, b in zip(together.rows(keep).cdf_pdf_pairs(rows, t[keep].ravel()),
                    alone.cdf_pdf_pairs(rows, t[keep].ravel())):
        np.testing.assert_array_equal(a, b)


def test_equal_sds_need_no_variance_terms_and_few_boxes():
    # MC dropout's shape: components within 3 sds of each other fall in at most 4 unit-width bins
    w, mu, sd, t = _case("mc-dropout")
    box = BoxExpansion(w, mu, sd**2)
    assert box.n_boxes.max() <= 4
    np.testing.assert_array_equal(box.scale[box.scale != 1.0], [])  # box sd = the one sd (1)


def test_mixture_cdf_takes_the_expansion_only_where_it_pays(monkeypatch):
    w, mu, sd, t = _case("kde", n=4)
    # row 3: one sd per component spread over 8 decades -> as many boxes as components
    sd[3] = np.logspace(-4, 4, mu.shape[1])
    built, evaluated = [], []
    original, original_cdf = BoxExpansion.__init__, BoxExpansion.cdf

    def record(self, w_, mu_, var_):
        built.append(mu_.shape[0])
        original(self, w_, mu_, var_)

    def record_cdf(self, t_):
        evaluated.append(t_.shape[0])
        return original_cdf(self, t_)

    monkeypatch.setattr(BoxExpansion, "__init__", record)
    monkeypatch.setattr(BoxExpansion, "cdf", record_cdf)
    np.testing.assert_allclose(mixture_cdf(w, mu, sd, t), _oracle(w, mu, sd, t), rtol=0, atol=ATOL)
    assert built == [4]  # all four rows tried once
    assert evaluated == [3]  # the three cheap ones expanded, row 3 summed directly
    built.clear()
    few = t[:, : MIN_POINTS - 1]
    np.testing.assert_allclose(mixture_cdf(w, mu, sd, few), _oracle(w, mu, sd, few), rtol=0, atol=ATOL)
    assert built == []  # too few points to pay for the build
    small = slice(0, 2 * BOX_COST - 1)
    mixture_cdf(w[:, small], mu[:, small], sd[:, small], t)
    assert built == []


def test_selecting_rows_equals_building_from_them():
    w, mu, sd, t = _case("kde", n=5)
    sd[1] = np.logspace(-3, 3, mu.shape[1])  # a row with many boxes: the widest, then dropped
    keep = np.array([True, False, True, False, True])
    whole = BoxExpansion(w, mu, sd**2)
    alone = BoxExpansion(w[keep], mu[keep], sd[keep] ** 2)
    picked = whole.rows(keep)
    np.testing.assert_array_equal(picked.n_boxes, alone.n_boxes)
    assert picked.centre.shape == alone.centre.shape
    np.testing.assert_array_equal(picked.cdf(t[keep]), alone.cdf(t[keep]))


def test_blocking_does_not_change_the_values(monkeypatch):
    w, mu, sd, t = _case("kde", n=5, m=300)
    whole = mixture_cdf(w, mu, sd, t)
    monkeypatch.setattr(mixture_cdf_module, "_BLOCK", 1000)  # one row per block everywhere
    np.testing.assert_array_equal(mixture_cdf(w, mu, sd, t), whole)


def test_gaussian_mixture_cdf_and_quantiles_use_it_consistently(monkeypatch):
    import dubito.predictive.mixture as mixture_module

    w, mu, sd, t = _case("kde", n=3, m=2000)
    pred = GaussianMixture(w, mu, sd**2)
    pairs = []
    original = BoxExpansion.cdf_pdf_pairs

    def count(self, rows, x):
        pairs.append(x.size)
        return original(self, rows, x)

    monkeypatch.setattr(BoxExpansion, "cdf_pdf_pairs", count)
    # 40 levels: the table start evaluates F at 48 points per row, Newton F and p by the expansion,
    # except the level 1e-6 below its TAIL, which keeps the direct sum's relative accuracy
    levels = np.concatenate([[1e-6], np.linspace(0.01, 0.99, 39)])
    q = pred.quantile(levels)
    assert pairs and max(pairs) == 3 * 39  # every row's 39 levels above the tail, never the 1e-6 one
    np.testing.assert_allclose(_oracle(w, mu, sd, q), np.broadcast_to(levels, q.shape), rtol=1e-8, atol=1e-12)
    # the same quantiles as the direct Newton to its tolerance (1e-10 of the smallest sd)
    monkeypatch.setattr(mixture_module, "expansion_for", lambda *a, **k: None)
    np.testing.assert_allclose(pred.quantile(levels), q, rtol=0, atol=3e-10 * sd.min())
    np.testing.assert_allclose(pred.cdf(t), _oracle(w, mu, sd, t), rtol=0, atol=ATOL)


def test_the_lower_tail_keeps_its_relative_accuracy():
    # far below the mixture F is ~1e-30: the expansion alone is only absolutely accurate (its
    # 1e-14-level error would swamp it), so those points are summed directly again
    w, mu, sd, _ = _case("kde", n=3, m=2000)
    t = np.concatenate([np.linspace(mu.min() - 12 * sd.max(), mu.min() - 3 * sd.max(), 30),
                        np.linspace(mu.min(), mu.max(), 30)])[None].repeat(3, 0)
    truth = _oracle(w, mu, sd, t)
    assert truth.min() < 1e-25
    got = mixture_cdf(w, mu, sd, t)
    np.testing.assert_allclose(got, truth, rtol=1e-6, atol=0)
    # without the correction only the absolute bound holds (what the CRPS quadrature asks for)
    absolute = mixture_cdf(w, mu, sd, t, relative_tail=False)
    np.testing.assert_allclose(absolute, truth, rtol=0, atol=ATOL)
