"""TemperatureScaling (Guo et al. 2017): against a direct 1-D NLL minimisation, recovery of a known
temperature, ECE on an over-confident predictive, the transformed predictive, and bad input."""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dubito.metrics.classification import accuracy, ece
from dubito.predictive import ClassPredictive
from dubito.recalibrate.temperature import T_MAX, T_MIN, TemperatureScaling


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def synthetic(rng, n, k, t0, scale=2.0):
    """Logits z ~ N(0, scale^2); the predictive says softmax(z), the labels follow softmax(z / t0)."""
    z = rng.normal(scale=scale, size=(n, k))
    q = softmax(z / t0)
    y = np.minimum((rng.uniform(size=(n, 1)) > np.cumsum(q, axis=1)).sum(axis=1), k - 1)
    return softmax(z), y


def direct_nll(t, p, y):
    """-(1/n) sum_i log( p_iy^(1/t) / sum_c p_ic^(1/t) ), written from the probabilities (not log space)."""
    w = p ** (1.0 / t)
    with np.errstate(divide="ignore"):  # p^(1/t) underflows to 0 at the smallest grid temperatures
        return float(-np.mean(np.log(w[np.arange(len(y)), y] / w.sum(axis=1))))


# ---------------------------------------------------------------------------- the fitted T
@pytest.mark.parametrize("t0", [0.6, 2.5])
def test_temperature_equals_direct_1d_minimisation(t0):
    """T equals a dense grid in log T refined by minimize_scalar on the bracketing grid cell.

    Tolerance 1e-6 relative on T: the NLL is flat to float64 precision within ~1e-8 of its minimum.
    """
    p, y = synthetic(np.random.default_rng(0), 600, 5, t0)
    fitted = TemperatureScaling().fit(p, y)
    grid = np.linspace(np.log(T_MIN), np.log(T_MAX), 4001)
    values = np.array([direct_nll(np.exp(g), p, y) for g in grid])
    i = int(np.argmin(values))
    assert 0 < i < grid.size - 1  # an interior minimum
    res = minimize_scalar(
        lambda g: direct_nll(np.exp(g), p, y), bounds=(grid[i - 1], grid[i + 1]), method="bounded",
        options={"xatol": 1e-12},
    )
    assert fitted.temperature_ == pytest.approx(np.exp(res.x), rel=1e-6)
    assert abs(np.log(fitted.temperature_) - grid[i]) <= grid[1] - grid[0]
    assert fitted.nll_ == pytest.approx(direct_nll(fitted.temperature_, p, y), rel=1e-12)
    assert fitted.nll_ <= values.min() + 1e-12
    assert fitted.n_classes_ == 5


@pytest.mark.parametrize("t0", [0.5, 2.0])
def test_recovers_known_temperature(t0):
    """Labels drawn from softmax(z / T0), predictive softmax(z): T -> T0. N = 20000, K = 10.

    Over 20 seeds the fitted T had a relative sd of 0.8 % (T0 = 0.5) and 1.1 % (T0 = 2); tolerance 5 %.
    """
    p, y = synthetic(np.random.default_rng(1), 20000, 10, t0)
    fitted = TemperatureScaling().fit(p, y)
    assert fitted.temperature_ == pytest.approx(t0, rel=0.05)


def test_ece_goes_down_on_overconfident_predictive():
    """Predictive softmax(z), labels from softmax(z / 3): over-confident. Fit on 5000, ECE on 5000 others.

    Measured: ECE 0.289 -> 0.017 (T = 3.01). Asserted: after < 0.03 and after < before / 5.
    """
    p, y = synthetic(np.random.default_rng(1), 10000, 10, 3.0)
    ts = TemperatureScaling().fit(p[:5000], y[:5000])
    before = ece(p[5000:], y[5000:])
    after = ece(ts.transform(p[5000:]), y[5000:])
    assert ts.temperature_ > 1  # softens
    assert after < 0.03 and after < before / 5, (before, after)
    assert accuracy(ts.transform(p[5000:]), y[5000:]) == accuracy(p[5000:], y[5000:])


# ---------------------------------------------------------------------------- transform
def test_transform_is_softmax_of_scaled_log_probs():
    rng = np.random.default_rng(2)
    p, y = synthetic(rng, 300, 4, 1.7)
    ts = TemperatureScaling().fit(p, y)
    out = ts.transform(p)
    assert isinstance(out, ClassPredictive) and out.n_draws == 1
    expected = softmax(np.log(p) / ts.temperature_)
    np.testing.assert_allclose(out.probs, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out.log_probs, np.log(expected), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(out.predict(), np.argmax(p, axis=1))
    np.testing.assert_allclose(out.probs.sum(axis=1), 1.0, atol=1e-12)
    # a single draw: entropy = expected entropy, MI = 0, variation ratio = 0
    np.testing.assert_allclose(out.expected_entropy, out.predictive_entropy, atol=1e-12)
    assert np.all(out.mutual_information == 0) and np.all(out.variation_ratio == 0)
    # a ClassPredictive and its probability array give the same fit and transform
    ts2 = TemperatureScaling().fit(ClassPredictive(p), y)
    assert ts2.temperature_ == ts.temperature_
    np.testing.assert_array_equal(ts2.transform(ClassPredictive(p)).probs, out.probs)
    np.testing.assert_array_equal(TemperatureScaling().fit_transform(p, y).probs, out.probs)


def test_draws_are_reduced_to_their_mean_and_zeros_stay_zero():
    rng = np.random.default_rng(3)
    p, y = synthetic(rng, 200, 3, 1.5)
    draws = softmax((np.log(p)[None] + rng.normal(scale=0.5, size=(5, 200, 3))).reshape(-1, 3)).reshape(5, 200, 3)
    ts = TemperatureScaling().fit(draws, y)
    assert ts.temperature_ == TemperatureScaling().fit(draws.mean(axis=0), y).temperature_
    p = np.array([[0.7, 0.3, 0.0], [0.2, 0.5, 0.3]])
    out = ts.transform(p)
    assert out.probs[0, 2] == 0.0 and out.log_probs[0, 2] == -np.inf
    np.testing.assert_allclose(out.probs.sum(axis=1), 1.0, atol=1e-12)


def test_logits_predictive_fits_in_log_space():
    """from_logits keeps log p exact where p underflows: the fit still works."""
    rng = np.random.default_rng(4)
    z = rng.normal(scale=2, size=(400, 3))
    z[:, 2] -= 900.0  # p(class 2) underflows to 0 in float64 but log p stays finite
    y = rng.integers(0, 2, size=400)
    ts = TemperatureScaling().fit(ClassPredictive.from_logits(z), y)
    assert np.isfinite(ts.temperature_) and T_MIN < ts.temperature_ < T_MAX


def test_separable_calibration_hits_the_bound_with_a_warning():
    """Every label is the argmax: the NLL falls all the way to T -> 0; T stops at T_MIN and warns."""
    rng = np.random.default_rng(5)
    p = softmax(rng.normal(size=(100, 3)))
    y = np.argmax(p, axis=1)
    with pytest.warns(UserWarning, match="bound T = 0.01"):
        ts = TemperatureScaling().fit(p, y)
    assert ts.temperature_ == pytest.approx(T_MIN, rel=1e-6)


# ---------------------------------------------------------------------------- bad input
def _data():
    rng = np.random.default_rng(6)
    return synthetic(rng, 50, 4, 1.5)


def test_bad_input_length_mismatch():
    p, y = _data()
    with pytest.raises(ValueError, match="class_pred has 50 inputs but y has 49 labels"):
        TemperatureScaling().fit(p, y[:-1])


def test_bad_input_labels_outside_classes():
    p, y = _data()
    y = y.copy()
    y[3] = 4
    with pytest.raises(ValueError, match=r"label\(s\) outside 0..3"):
        TemperatureScaling().fit(p, y)
    with pytest.raises(ValueError, match="integer class labels"):
        TemperatureScaling().fit(p, y + 0.5)


def test_bad_input_other_number_of_classes():
    p, y = _data()
    ts = TemperatureScaling().fit(p, y)
    with pytest.raises(ValueError, match="K = 3 classes but this TemperatureScaling was fitted on K = 4"):
        ts.transform(softmax(np.zeros((5, 3))))


def test_bad_input_nan():
    p, y = _data()
    p = p.copy()
    p[2, 1] = np.nan
    with pytest.raises(ValueError, match="class_pred: .*hold NaN"):
        TemperatureScaling().fit(p, y)
    ts = TemperatureScaling().fit(*_data())
    with pytest.raises(ValueError, match="class_pred: .*hold NaN"):
        ts.transform(p)


def test_bad_input_transform_before_fit():
    p, _ = _data()
    with pytest.raises(ValueError, match="not fitted yet"):
        TemperatureScaling().transform(p)


def test_bad_input_zero_probability_label_and_empty():
    p = np.array([[1.0, 0.0], [0.4, 0.6], [0.3, 0.7]])
    with pytest.raises(ValueError, match="1 calibration label\\(s\\) have probability 0"):
        TemperatureScaling().fit(p, [1, 1, 0])
    with pytest.raises(ValueError, match="at least one point"):
        TemperatureScaling().fit(np.zeros((0, 2)), np.zeros(0))
