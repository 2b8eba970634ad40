"""UniformBox, the OOD distribution ν (spec §1, test 10): samples inside the box, bounds from
the given data, uniformity (Kolmogorov-Smirnov against U[low, high], scipy), zero-width features
without NaN, determinism, bad input."""
import numpy as np
import pytest
import torch
from scipy import stats

from dubito.data.ood_box import UniformBox


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)) * [1.0, 3.0, 0.1, 1.0] + [0.0, 5.0, -2.0, 0.0]
    X[:, 3] = 7.5  # a constant feature (as naval's two)
    return X


def test_bounds_are_the_data_min_and_max():
    X = _data()
    box = UniformBox.from_data(X)
    np.testing.assert_array_equal(box.low, X.min(axis=0))
    np.testing.assert_array_equal(box.high, X.max(axis=0))
    assert box.n_features == 4
    assert box.contains(X).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_samples_inside_box_and_uniform(dtype):
    X = _data()
    box = UniformBox.from_data(X)
    S = box.sample(4000, torch.Generator().manual_seed(1), dtype=dtype)
    assert S.shape == (4000, 4) and S.dtype == dtype
    S = S.double().numpy()
    assert np.isfinite(S).all()
    tol = 1e-6 * np.abs(X).max() if dtype == torch.float32 else 0.0  # float32 rounding of low + width * u
    assert (S >= box.low - tol).all() and (S <= box.high + tol).all()
    np.testing.assert_array_equal(S[:, 3], np.float32(7.5) if dtype == torch.float32 else 7.5)  # zero width
    for j in range(3):
        p = stats.kstest(S[:, j], stats.uniform(box.low[j], box.high[j] - box.low[j]).cdf).pvalue
        assert p > 1e-3


def test_sample_numpy_inside_and_deterministic():
    box = UniformBox([-4.0], [2.0])  # the synthetic ν = U[-4, 2] (spec §4)
    a, b = box.sample_numpy(5000, seed=3), box.sample_numpy(5000, seed=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (5000, 1) and a.min() >= -4.0 and a.max() < 2.0
    assert abs(a.mean() - (-1.0)) < 4 * 6 / np.sqrt(12 * 5000)  # mean -1, sd 6/sqrt(12)
    g1 = box.sample(10, torch.Generator().manual_seed(2))
    g2 = box.sample(10, torch.Generator().manual_seed(2))
    assert torch.equal(g1, g2)


def test_tensor_input_and_scalar_bounds():
    box = UniformBox.from_data(torch.tensor([[0.0, 1.0], [2.0, 1.0]]))
    np.testing.assert_array_equal(box.low, [0.0, 1.0])
    np.testing.assert_array_equal(box.width, [2.0, 0.0])
    assert UniformBox(0.0, 1.0).n_features == 1


@pytest.mark.parametrize(
    "low,high,match",
    [([0.0, 2.0], [1.0, 1.0], "low > high at feature"), ([0.0, np.nan], [1.0, 1.0], "NaN or inf"),
     ([0.0], [1.0, 2.0], "same shape"), ([[0.0]], [[1.0]], "1-D array"), ("ab", [1.0], "array of numbers")],
)
def test_bad_bounds(low, high, match):
    with pytest.raises(ValueError, match=match):
        UniformBox(low, high)


def test_bad_data_and_n():
    with pytest.raises(ValueError, match="2-D"):
        UniformBox.from_data(np.zeros(5))
    with pytest.raises(ValueError, match="NaN or inf"):
        UniformBox.from_data(np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match="2-D"):
        UniformBox.from_data(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="n must be"):
        UniformBox([0.0], [1.0]).sample(-1)
