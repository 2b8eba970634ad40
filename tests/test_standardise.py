"""Standardisation by the training data (`dubito._standardise`), against scikit-learn's StandardScaler."""
import numpy as np
from sklearn.preprocessing import StandardScaler

from dubito._standardise import column_scaling, standardise_fit


def test_column_scaling_is_standard_scalers_and_centres_a_constant_column():
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 2.0, size=(50, 4))
    X[:, 2] = 7.5  # constant: centred only
    mean, scale = column_scaling(X)
    ref = StandardScaler().fit(X)
    assert np.allclose(mean, ref.mean_, rtol=0, atol=1e-12)
    assert np.allclose(scale, ref.scale_, rtol=1e-12, atol=0) and scale[2] == 1.0
    assert np.allclose(((X - mean) / scale)[:, 2], 0.0)


def test_standardise_fit_uses_the_population_sd_of_y():
    X = np.arange(12.0).reshape(6, 2)
    y = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 9.0])
    x_mean, x_scale, y_mean, y_scale = standardise_fit(X, y)
    assert y_mean == 4.0 and y_scale == np.sqrt(np.mean((y - 4.0) ** 2))  # ddof = 0
    assert np.array_equal(x_mean, [5.0, 6.0]) and np.allclose(x_scale, np.std(X, axis=0))
