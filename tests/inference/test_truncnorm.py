"""Truncated-normal sampler and log interval mass (spec §7.2, §8 pitfall 7).

Oracles: mpmath at 50 digits for log(Φ(b) − Φ(a)), scipy.special.ndtri_exp for the log-space
inverse CDF, scipy.stats.truncnorm (mean, sd, cdf) for the draws.
"""

import math

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats as st
import torch

from dubito.inference.truncnorm import (
    log_ndtr_inverse,
    log_normal_interval_mass,
    ndtr,
    sample_truncated_normal,
)

F64 = torch.float64
INF = math.inf


def _t(x):
    return torch.as_tensor(x, dtype=F64)


def _mp_log_mass(a, b):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    # Φ(b) − Φ(a) via erfc, whose relative precision holds far in the tail on either side
    r = mpmath.sqrt(2)
    if a + b > 0:
        mass = (mpmath.erfc(mpmath.mpf(a) / r) - mpmath.erfc(mpmath.mpf(b) / r)) / 2
    else:
        mass = (mpmath.erfc(-mpmath.mpf(b) / r) - mpmath.erfc(-mpmath.mpf(a) / r)) / 2
    return float(mpmath.log(mass))


@pytest.mark.parametrize(
    "a,b",
    [
        (-1.0, 1.0),
        (0.0, INF),
        (-INF, -40.0),
        (38.0, 39.0),
        (-39.0, -38.0),
        (10.0, 10.001),
        (-5.0, 40.0),
        (1e-3, 2e-3),
        (-INF, INF),
        (25.0, INF),
        (8.0, 9.0),
    ],
)
def test_log_interval_mass_matches_mpmath(a, b):
    got = float(log_normal_interval_mass(_t(a), _t(b)))
    want = _mp_log_mass(a, b) if math.isfinite(a) or math.isfinite(b) else 0.0
    # relative 1e-10 on the log mass (covers log masses down to about -800)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_ndtr_relative_accuracy_in_the_lower_tail():
    # torch.special.ndtr returns 0 at x = -10; ours (erfc) keeps relative 1e-13 down to -37
    x = np.linspace(-37.0, 8.0, 2001)
    np.testing.assert_allclose(ndtr(_t(x)).numpy(), sc.ndtr(x), rtol=1e-13, atol=0)


def test_log_interval_mass_empty_interval_is_minus_inf():
    assert float(log_normal_interval_mass(_t(2.0), _t(2.0))) == -INF


def test_log_ndtr_inverse_matches_scipy_ndtri_exp():
    log_p = -np.concatenate([np.logspace(-8, 6, 400), [699.0, 700.5, 745.0, 800.0]])
    got = log_ndtr_inverse(_t(log_p)).numpy()
    want = sc.ndtri_exp(log_p)
    # absolute 1e-9 near z = 0 (p → 1/2 .. 1), relative 1e-12 in the far tail
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(
    "lo,hi",
    [(10.0, 11.0), (20.0, INF), (30.0, 30.5), (40.0, 41.0), (-41.0, -40.0), (-INF, -25.0)],
)
def test_far_tail_draws_finite_inside_with_scipy_mean(lo, hi):
    g = torch.Generator().manual_seed(0)
    n = 100_000
    mean, sd = 1.5, 2.0  # the interval is (lo, hi) in standard units: lo_x = mean + sd*lo
    lo_x, hi_x = mean + sd * lo, mean + sd * hi
    x = sample_truncated_normal(_t(mean), _t(sd), torch.full((n,), lo_x, dtype=F64), _t(hi_x), g)
    assert torch.isfinite(x).all()
    assert (x >= lo_x).all() and (x <= hi_x).all()
    want_mean = mean + sd * st.truncnorm.mean(lo, hi)
    want_sd = sd * st.truncnorm.std(lo, hi)
    se = want_sd / math.sqrt(n)
    # 4.5 standard errors (fixed seed; deterministic)
    assert abs(float(x.mean()) - want_mean) < 4.5 * se
    assert float(x.std()) == pytest.approx(want_sd, rel=0.02)


def test_very_narrow_far_interval_is_uniform():
    # on [15, 15 + 1e-6] the density tilts by exp(-15e-6): uniform to 1e-5 relative
    g = torch.Generator().manual_seed(3)
    n = 100_000
    lo, width = 15.0, 1e-6
    z = sample_truncated_normal(_t(0.0), _t(1.0), torch.full((n,), lo, dtype=F64), _t(lo + width), g)
    assert (z >= lo).all() and (z <= lo + width).all()
    frac = (z - lo).numpy() / width
    assert abs(frac.mean() - 0.5) < 4.5 / math.sqrt(12 * n)
    assert st.kstest(frac, "uniform").pvalue > 1e-3


@pytest.mark.parametrize(
    "a,b",
    [(-INF, INF), (-1.0, 2.0), (0.5, INF), (-INF, -3.0), (12.0, 13.0), (-0.1, 0.1), (3.0, 3.2)],
)
def test_draws_ks_against_scipy_truncnorm(a, b):
    g = torch.Generator().manual_seed(1)
    n = 50_000
    z = sample_truncated_normal(_t(0.0), _t(1.0), torch.full((n,), a, dtype=F64), _t(b), g)
    p = st.kstest(z.numpy(), st.truncnorm(a, b).cdf).pvalue
    assert p > 1e-3, p  # fixed seed: the measured p-values are 0.05-0.99


def test_broadcasting_infinite_bounds_and_clipping():
    g = torch.Generator().manual_seed(2)
    mean = torch.linspace(-50, 50, 101, dtype=F64)
    lo = torch.full((3, 1), -1.0, dtype=F64)
    hi = torch.tensor([[1.0], [INF], [-0.5]], dtype=F64)
    x = sample_truncated_normal(mean, _t(0.3), lo, hi, g)
    assert x.shape == (3, 101)
    assert torch.isfinite(x).all()
    assert (x >= lo).all() and (x <= hi).all()
    # mean far right of [-1, 1] with sd 0.3: draws pile up just below 1 (within 0.3**2/49 ~ 2e-3 · 10)
    assert float((1.0 - x[0, -1]).abs()) < 0.02


def test_determinism():
    args = (_t([0.0, 3.0]), _t([1.0, 0.1]), _t([-1.0, 5.0]), _t([2.0, INF]))
    a = sample_truncated_normal(*args, torch.Generator().manual_seed(5))
    b = sample_truncated_normal(*args, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
