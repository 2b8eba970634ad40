"""Bad inputs and settings: one clear error each (dubito._validation)."""

import numpy as np
import pytest
import torch

from dubito._validation import DataTypeError, NotFittedError
from dubito.regression import DeepEnsembleRegressor

QUICK = dict(n_members=2, hidden=(4,), epochs=1, batch_size=8, progress=False, random_state=0)


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    return X, X @ [1.0, -2.0, 0.5] + rng.normal(size=30)


@pytest.fixture(scope="module")
def fitted(Xy):
    return DeepEnsembleRegressor(**QUICK).fit(*Xy)


def _with(a, idx, value):
    a = a.copy()
    a[idx] = value
    return a


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda X, y: (_with(X, (3, 1), np.nan), y), ValueError, "Input X contains NaN"),
        (lambda X, y: (_with(X, (0, 0), np.inf), y), ValueError, "Input X contains infinity"),
        (lambda X, y: (X, _with(y, 5, np.nan)), ValueError, "Input y contains NaN"),
        (lambda X, y: (X, _with(y, 5, -np.inf)), ValueError, "Input y contains infinity"),
        (lambda X, y: (X, y[:-1]), ValueError, "inconsistent numbers of samples: \\[30, 29\\]"),
        (lambda X, y: (X[:, 0], y), ValueError, "X must be 2-D .* got a 1-D array of shape \\(30,\\)"),
        (lambda X, y: (X[:, :, None], y), ValueError, "X must be 2-D .* got a 3-D array"),
        (lambda X, y: (X[:1], y[:1]), ValueError, "1 sample\\(s\\) .* minimum of 2 is required"),
        (lambda X, y: (X[:, :0], y), ValueError, "0 feature\\(s\\)"),
        (lambda X, y: (X, np.full_like(y, 3.5)), ValueError, "y is constant \\(every value is 3.5\\)"),
        (lambda X, y: (X.astype(str), y), ValueError, "X holds strings"),
        (lambda X, y: (X, y.astype(str)), ValueError, "y holds strings"),
        (lambda X, y: (_with(X.astype(object), (0, 0), "a"), y), ValueError, "X has dtype object with entries that are not numbers"),
        (lambda X, y: (_with(X.astype(object), (0, 0), {"a": 1}), y), DataTypeError, "X has dtype object with non-numeric entries"),
        (lambda X, y: (X, None), ValueError, "requires y to be passed"),
        (lambda X, y: (X + 1j, y), ValueError, "Complex data not supported"),
    ],
    ids=["nan-X", "inf-X", "nan-y", "inf-y", "lengths", "1d-X", "3d-X", "one-row", "no-features",
         "constant-y", "str-X", "str-y", "object-str", "object-dict", "y-None", "complex"],
)
def test_bad_fit_inputs(Xy, make, exc, match):
    X, y = make(*Xy)
    with pytest.raises(exc, match=match):
        DeepEnsembleRegressor(**QUICK).fit(X, y)


def test_object_error_is_also_a_value_error():
    assert issubclass(DataTypeError, ValueError) and issubclass(DataTypeError, TypeError)


def test_predict_before_fit():
    est = DeepEnsembleRegressor()
    for call in (est.predict, est.predict_distribution, est.predict_components):
        with pytest.raises(NotFittedError, match="DeepEnsembleRegressor instance is not fitted yet"):
            call(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        est.sample_posterior(np.zeros((2, 3)), 5)


@pytest.mark.parametrize(
    "X, match",
    [
        (np.zeros((4, 2)), "X has 2 features, but DeepEnsembleRegressor is expecting 3 features"),
        (np.zeros(3), "X must be 2-D .* got a 1-D array of shape \\(3,\\)\\. Reshape your data: X.reshape\\(1, -1\\)"),
        (_with(np.zeros((4, 3)), (1, 1), np.nan), "Input X contains NaN"),
        (np.zeros((0, 3)), "0 sample\\(s\\)"),
        (np.array([["a", "b", "c"]]), "X holds strings"),
    ],
    ids=["n-features", "1d", "nan", "empty", "strings"],
)
def test_bad_predict_inputs(fitted, X, match):
    for call in (fitted.predict, fitted.predict_distribution):
        with pytest.raises(ValueError, match=match):
            call(X)


@pytest.mark.parametrize(
    "setting, match",
    [
        (dict(n_members=0), "n_members must be >= 1"),
        (dict(n_members=2.5), "n_members must be an integer"),
        (dict(hidden=(8, 0)), "hidden widths must be >= 1"),
        (dict(hidden="abc"), "hidden widths must be an integer"),
        (dict(activation="sigmoid"), "activation must be one of"),
        (dict(lr=-1.0), "lr must be > 0"),
        (dict(weight_decay=0.0), "weight_decay must be > 0"),
        (dict(lambda_convention="mean"), "lambda_convention must be one of"),
        (dict(batch_size=0), "batch_size must be >= 1"),
        (dict(epochs=0), "epochs must be >= 1"),
        (dict(lr_drop="cosine"), "lr_drop must be one of"),
        (dict(correction="laplace"), "correction must be one of"),
        (dict(random_bias="yes"), "random_bias must be True or False"),
        (dict(device="tpu-9"), "device must be a torch device string"),
    ],
)
def test_bad_settings_fail_at_fit(Xy, setting, match):
    est = DeepEnsembleRegressor(**{**QUICK, **setting})  # __init__ never raises
    with pytest.raises(ValueError, match=match):
        est.fit(*Xy)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda(Xy):
    with pytest.raises(ValueError, match="CUDA is not available"):
        DeepEnsembleRegressor(**{**QUICK, "device": "cuda"}).fit(*Xy)


def test_bad_call_arguments(fitted, Xy):
    X, _ = Xy
    with pytest.raises(ValueError, match="correction must be one of"):
        fitted.predict_distribution(X, correction="ext")
    with pytest.raises(ValueError, match="n_members must be >= 1"):
        fitted.predict_distribution(X, n_members=0)
    with pytest.raises(ValueError, match="target must be one of"):
        fitted.sample_posterior(X, 3, target="z")
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        fitted.sample_posterior(X, 0)


def test_tensors_lists_and_constant_columns_are_accepted(Xy):
    X, y = Xy
    Xc = np.column_stack([X, np.full(len(X), 0.1)])  # constant column: sd := 1, no NaN
    est = DeepEnsembleRegressor(**QUICK).fit(torch.as_tensor(Xc, dtype=torch.float32), torch.as_tensor(y))
    assert est.x_scale_[-1] == 1.0
    p1 = est.predict(Xc.tolist())
    p2 = est.predict(torch.as_tensor(Xc))
    assert np.all(np.isfinite(p1)) and p1.shape == (30,)
    np.testing.assert_allclose(p1, p2)
    assert np.all(np.isfinite(est.predict_distribution(Xc).var))
