"""WEPI ([C] required_interval_width; spec §4.4, pitfall 9, §7 item 12)."""
import math

import numpy as np
import pytest

from dubito.metrics.wepi import sorted_quantile, wepi
from dubito.predictive import Normal

# draws whose linear sample quantile is Q(q) = q: 0, 1e-4, ..., 1 (S = 10001)
GRID = np.linspace(0.0, 1.0, 10001)


def _hand_case(n=100, scales=None):
    scales = np.ones(n) if scales is None else scales
    draws = GRID[:, None] * scales
    # y_j = (j + 1/3)/100: lower misses at a'/2 >= 0.00333, 0.01333, 0.02333, ...; upper misses at
    # a'/2 >= 0.00667, 0.01667, 0.02667, ... -> 6 misses (> 5%) first at a'/2 = 0.02667, so the
    # largest admissible grid a' is 0.0533 and the interval (0.02665, 0.97335) has width 0.9467
    y = (np.arange(n) + 1 / 3) / n * scales
    return draws, y


def test_sorted_quantile_matches_numpy():
    rng = np.random.default_rng(0)
    d = np.sort(rng.normal(size=(37, 5)), axis=0)
    for q in (0.0, 1e-4, 0.013, 0.25, 0.5, 0.77777, 0.9999, 1.0):
        np.testing.assert_array_equal(sorted_quantile(d, q), np.quantile(d, q, axis=0))


def test_hand_built_width_is_the_known_quantile_gap():
    draws, y = _hand_case()
    assert wepi(draws, y) == pytest.approx(1 - 0.0533, abs=1e-9)
    # a 90% target: 10 misses allowed -> 11th miss at a'/2 = 0.05333 (lower j=5) -> a' = 0.1066
    assert wepi(draws, y, coverage=0.90) == pytest.approx(1 - 0.1066, abs=1e-9)


def test_median_versus_mean():
    scales = np.r_[np.ones(60), np.full(40, 3.0)]
    draws, y = _hand_case(scales=scales)
    w = 1 - 0.0533
    assert wepi(draws, y, reduce="median") == pytest.approx(w, abs=1e-9)
    assert wepi(draws, y, reduce="mean") == pytest.approx(w * (0.6 + 0.4 * 3), abs=1e-9)


def test_strict_coverage_and_infinite_branch():
    draws = np.tile(np.arange(11.0)[:, None], (1, 100))  # integers 0..10: Q(q) = 10 q
    y = np.full(100, 5.0)
    # 6% exactly on the edge of the sample range: a' = 0 already misses them (lo < y < hi is
    # strict), so no interval qualifies -> inf (with <= they would count as covered)
    y[:6] = 10.0
    assert wepi(draws, y) == math.inf
    # just inside the range: they leave once hi = 10 - 10 a'/2 <= 9.9985, i.e. a' >= 3e-4,
    # so a' = 2e-4 is the largest admissible and the width is 10 (1 - 2e-4)
    y[:6] = 9.9985
    assert wepi(draws, y) == pytest.approx(9.998, abs=1e-9)
    # exactly 5% missed is allowed: 5 points on the edge, 95 at the median 5, which stay
    # covered up to a' = 0.9999 (width 10 * 1e-4); a' = 1 gives lo = hi = 5
    y[:] = 5.0
    y[:5] = 10.0
    assert wepi(draws, y) == pytest.approx(1e-3, abs=1e-9)


def test_predictive_input_and_monotone_in_coverage():
    pred = Normal(np.zeros(200), np.ones(200))
    y = np.random.default_rng(0).normal(size=200)
    w95 = wepi(pred, y)
    w80 = wepi(pred, y, coverage=0.8)
    assert w80 < w95 < 2 * 3.0
    assert wepi(pred, y) == w95  # fixed seed: reproducible


def test_bad_arguments():
    with pytest.raises(ValueError, match="reduce"):
        wepi(np.zeros((5, 2)), np.zeros(2), reduce="max")
    with pytest.raises(ValueError, match=r"\(S, 3\)"):
        wepi(np.zeros((5, 2)), np.zeros(3))
    with pytest.raises(ValueError, match="coverage"):
        wepi(np.zeros((5, 2)), np.zeros(2), coverage=1.0)
