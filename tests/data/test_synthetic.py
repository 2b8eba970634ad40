import numpy as np
import pytest

from dubito.data import synthetic
from dubito.data.synthetic import toy1, toy1_function, toy2, toy2_function


def test_toy1_function_formula_at_known_points():
    # eta(x) = 1/2((4.5x)^4 - (18x)^2 + 22.5x), by hand:
    x = np.array([-1.0, 0.0, 0.5, 1.0])
    expected = [0.5 * (410.0625 - 324 - 22.5), 0.0, 0.5 * (2.25**4 - 81 + 11.25), 0.5 * (410.0625 - 324 + 22.5)]
    np.testing.assert_allclose(toy1_function(x), expected, rtol=1e-12)
    np.testing.assert_allclose(toy1_function(x[:, None]), expected, rtol=1e-12)
    grid = np.linspace(-1, 1, 20001)
    eta = toy1_function(grid)
    assert -40 < eta.min() < -38 and 54 < eta.max() < 54.5  # spec: range about [-39, 54]


def test_toy2_function_formula_at_known_points():
    X = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 2.0 / 3.0], [1.0 / 1.5, -1.0 / 1.3]])
    # (1.5x-1)^2 (1.3x+1)^2 per coordinate: 0 -> 1; 1 -> 0.25*5.29; -1 -> 6.25*0.09; 2/3 and -1/1.3 -> 0
    expected = [2.0, 2 * 0.25 * 5.29, 6.25 * 0.09 + 0.0, 0.0]
    np.testing.assert_allclose(toy2_function(X), expected, rtol=1e-12, atol=1e-12)
    g = np.linspace(-1, 1, 401)
    G = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    eta = toy2_function(G)
    assert eta.min() >= 0 and abs(eta.min()) < 1e-3 and 2.6 < eta.max() < 2.7  # spec: about [0, 2.64]


@pytest.mark.parametrize("gen, fn, p, n_default, sd_default", [(toy1, toy1_function, 1, 200, 10.0), (toy2, toy2_function, 2, 600, 0.2)])
def test_generator_shapes_truth_and_reproducibility(gen, fn, p, n_default, sd_default):
    X, y, eta = gen()
    assert X.shape == (n_default, p) and y.shape == (n_default,) and eta.shape == (n_default,)
    assert X.dtype == y.dtype == np.float64
    np.testing.assert_array_equal(eta, fn(X))
    X2, y2, _ = gen(seed=0)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    X3, y3, _ = gen(seed=1)
    assert not np.array_equal(X, X3)
    # the default noise sd is the paper's
    X0, y0, e0 = gen(noise_sd=0.0)
    np.testing.assert_array_equal(y0, e0)
    assert (y - eta).std() == pytest.approx(sd_default, rel=0.15)  # n_default draws: ~5% sd of sd


@pytest.mark.parametrize("gen, p, sd", [(toy1, 1, 10.0), (toy2, 2, 0.2), (toy1, 1, 3.0)])
def test_generator_distribution_moments(gen, p, sd):
    """Fixed seed, n = 40000; tolerances are > 4 standard errors."""
    n = 40_000
    X, y, eta = gen(n=n, seed=123, noise_sd=sd)
    r = y - eta
    assert abs(r.mean()) < 4 * sd / np.sqrt(n)
    assert abs(r.std() / sd - 1) < 4 / np.sqrt(2 * n)
    assert abs(np.mean(r**4) / r.var() ** 2 - 3) < 0.1  # Gaussian kurtosis (se ~0.025)
    assert X.min() >= -1 and X.max() <= 1
    assert np.all(np.abs(X.mean(0)) < 4 * np.sqrt(1 / 3 / n))
    assert np.all(np.abs(X.var(0) - 1 / 3) < 4 * np.sqrt(4 / 45 / n))  # var of U^2 for U~U[-1,1]: 1/5 - 1/9
    if p == 2:
        assert abs(np.corrcoef(X.T)[0, 1]) < 4 / np.sqrt(n)


def test_generator_accepts_generator_and_validates():
    rng = np.random.default_rng(5)
    X, y, eta = toy1(10, rng)
    X2, _, _ = toy1(10, np.random.default_rng(5))
    np.testing.assert_array_equal(X, X2)
    for bad in [dict(n=0), dict(n=2.5), dict(noise_sd=-1.0), dict(noise_sd=float("nan")), dict(seed=-3), dict(seed="a")]:
        with pytest.raises(ValueError):
            toy2(**bad)
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        toy2_function(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="non-finite"):
        toy1_function([np.nan])


def test_public_names_kept():
    # the ensemble engineer imports exactly these
    assert {"toy1", "toy2", "toy1_function", "toy2_function"} <= set(synthetic.__all__)
