"""ImplicitCopulaRegressor.save / load (safetensors + JSON through dubito.io, no pickle).

Oracle: the fitted model itself. After a round trip every prediction must be bit-identical
(``assert_array_equal``) for the three feature sources, both priors, VI and NUTS, plug-in and
mixture predictives. Short fits (the posteriors need not be good, only reproducible).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from dubito import io
from dubito._validation import NotFittedError
from dubito.regression import ImplicitCopulaRegressor
from dubito.regression.marginal import KDEMarginal

SHORT = dict(vi_max_iter=200, vi_min_iter=50, n_draws=40, nuts_samples=15, nuts_warmup=10, random_state=0,
             progress=False)


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.exp(X[:, 0] + 0.3 * rng.normal(size=n))
    return X, y


def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 1)).double()


def _fit(source, prior, inference, **kw):
    X, y = _data()
    settings = {**SHORT, "prior": prior, "inference": inference, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short runs, dead ReLU units
        if source == "network":
            return ImplicitCopulaRegressor(hidden=(8,), n_features=4, epochs=2, lr=1e-2, **settings).fit(X, y)
        model = _torch_model()
        if source == "wrapped":
            return ImplicitCopulaRegressor.wrap(model, "3", X, y, constant_feature=False, **settings)
        with torch.no_grad():
            psi = model[:4](torch.as_tensor(X)).numpy()
        return ImplicitCopulaRegressor.from_features(psi, y, **settings)


def _inputs(est, n=6):
    if est.network == "cnn" and est.feature_source_ == "network":
        return {"X": np.random.default_rng(1).normal(size=(n, 36))}  # 6x6 images
    Xn, _ = _data(n, seed=1)
    if est.feature_source_ == "features":
        with torch.no_grad():
            return {"features": _torch_model()[:4](torch.as_tensor(Xn)).numpy()}
    return {"X": Xn}


def _assert_same_predictions(a, b):
    kw = _inputs(a)
    for kind in ("plugin", "mixture"):
        a.set_params(predictive=kind)
        b.set_params(predictive=kind)
        pa, pb = a.predict_distribution(**kw), b.predict_distribution(**kw)
        np.testing.assert_array_equal(pa.grid, pb.grid)
        np.testing.assert_array_equal(pa.density, pb.density)
        np.testing.assert_array_equal(a.predict(**kw), b.predict(**kw))
        y = pa.quantile(np.broadcast_to([0.1, 0.5, 0.9], (pa.grid.shape[0], 3)))
        np.testing.assert_array_equal(a.log_density(y, **kw), b.log_density(y, **kw))


CASES = [(s, p, i) for s in ("features",) for p in ("ridge", "horseshoe") for i in ("vi", "nuts")] + [
    ("network", "ridge", "vi"), ("network", "horseshoe", "nuts"), ("wrapped", "ridge", "nuts"),
    ("wrapped", "horseshoe", "vi")]


@pytest.mark.parametrize("source,prior,inference", CASES)
def test_round_trip_gives_identical_predictions(source, prior, inference, tmp_path):
    est = _fit(source, prior, inference)
    path = tmp_path / "icnlm.safetensors"
    est.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["icnlm.safetensors"]  # atomic: no temp file left
    back = ImplicitCopulaRegressor.load(path, model=est.model_ if source == "wrapped" else None)
    assert back.get_params() == est.get_params()
    assert back.feature_source_ == source and back.n_features_ == est.n_features_ == 4
    assert back.n_train_ == est.n_train_ == 120
    np.testing.assert_array_equal(back.train_features_, est.train_features_)
    a, b = est.posterior_, back.posterior_
    assert (b.prior, b.inference, b.p, b.names, b.nu, b.tau2_fixed) == (a.prior, a.inference, a.p, a.names, a.nu,
                                                                        a.tau2_fixed)
    assert b.intercept is a.intercept is True  # the default
    assert torch.equal(a.theta, b.theta)
    if inference == "vi":
        for x, z in zip(a.point_estimate("mean"), b.point_estimate("mean")):
            assert torch.equal(x, z)
        assert b.theta_by_chain is None and b.diagnostics["converged"] is a.diagnostics["converged"]
        np.testing.assert_array_equal(b.diagnostics["elbo"], a.diagnostics["elbo"])
    else:
        assert b.q is None and torch.equal(a.theta_by_chain, b.theta_by_chain)
        for k in ("rhat", "ess_bulk", "divergences", "step_size"):
            assert b.diagnostics[k].dtype == a.diagnostics[k].dtype
            np.testing.assert_array_equal(b.diagnostics[k], a.diagnostics[k])
    assert b.settings == a.settings
    np.testing.assert_array_equal(back.marginal_.cdf_grid_, est.marginal_.cdf_grid_)
    if source == "network":
        np.testing.assert_array_equal(back.loss_curve_, est.loss_curve_)
        np.testing.assert_array_equal(back.dead_features_, est.dead_features_)
        assert back.n_features_in_ == 3
        np.testing.assert_array_equal(back.features(_data(5, 2)[0]), est.features(_data(5, 2)[0]))
    _assert_same_predictions(est, back)
    # the file is safetensors with JSON metadata, not a pickle
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert header["__metadata__"]["dubito_class"] == "ImplicitCopulaRegressor"


def test_cnn_round_trip(tmp_path):
    from dubito.nn import PilotNet

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 36))
    y = np.exp(X[:, :6].mean(1) + 0.3 * rng.normal(size=80))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ImplicitCopulaRegressor(network="cnn", image_shape=(1, 6, 6), hidden=(8,), n_features=4, epochs=2,
                                      lr=1e-2, **SHORT).fit(X, y)
    est.save(tmp_path / "cnn.safetensors")
    back = ImplicitCopulaRegressor.load(tmp_path / "cnn.safetensors")
    assert isinstance(back.net_, PilotNet) and back.image_shape == (1, 6, 6) and back.network == "cnn"
    assert back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.features(X[:5]), est.features(X[:5]))
    _assert_same_predictions(est, back)


def test_configured_marginal_and_device_round_trip(tmp_path):
    marginal = KDEMarginal(bandwidth=0.3, grid_size=1024, bounds=(0.0, None))
    est = _fit("features", "ridge", "vi", marginal=marginal, image_shape=(1, 2, 2))
    est.save(tmp_path / "m.safetensors")
    back = ImplicitCopulaRegressor.load(tmp_path / "m.safetensors", device="cpu")
    assert back.image_shape == (1, 2, 2) and back.device == "cpu"
    m = back.marginal
    assert isinstance(m, KDEMarginal) and (m.bandwidth, m.grid_size, m.bounds) == (0.3, 1024, (0.0, None))
    assert back.marginal_.bounds_ == (0.0, np.inf) and back.marginal_.grid_.size == 1024
    assert back.posterior_.theta.device.type == "cpu"
    _assert_same_predictions(est, back)


def test_wrapped_model_must_be_passed_again(tmp_path):
    est = _fit("wrapped", "ridge", "vi")
    path = tmp_path / "w.safetensors"
    est.save(path)
    with pytest.raises(ValueError, match=r"feature layer '3'.*load\(path, model=your_model\)"):
        ImplicitCopulaRegressor.load(path)
    with pytest.raises(ValueError, match=r"layer '3' is not a submodule"):
        ImplicitCopulaRegressor.load(path, model=torch.nn.Sequential(torch.nn.Linear(3, 1)))
    with pytest.raises(TypeError, match="torch.nn.Module"):
        ImplicitCopulaRegressor.load(path, model="model")
    # a fresh copy of the same network works (the module is the user's, matched by layer name)
    back = ImplicitCopulaRegressor.load(path, model=_torch_model())
    _assert_same_predictions(est, back)
    other = _fit("features", "ridge", "vi")
    other.save(tmp_path / "f.safetensors")
    with pytest.raises(ValueError, match="feature source 'features', not a wrapped one: do not pass model="):
        ImplicitCopulaRegressor.load(tmp_path / "f.safetensors", model=_torch_model())


@pytest.mark.filterwarnings("ignore::dubito.inference.diagnostics.ConvergenceWarning")
def test_unsaveable_marginal_and_unfitted_model(tmp_path):
    class PhiMarginal:
        def pseudo_response(self, y):
            return np.asarray(y, dtype=np.float64)

        def inverse_pseudo_response(self, z):
            return np.asarray(z, dtype=np.float64)

        def log_pdf(self, y):
            return stats.norm.logpdf(y)

    X, y = _data()
    est = ImplicitCopulaRegressor.from_features(np.abs(X), stats.norm.ppf(stats.rankdata(y) / 121),
                                                marginal=PhiMarginal(), **SHORT)
    with pytest.raises(ValueError, match=r"cannot save a model built with marginal=.*PhiMarginal.*marginal=None"):
        est.save(tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
    with pytest.raises(NotFittedError, match="not fitted"):
        ImplicitCopulaRegressor().save(tmp_path / "x.safetensors")


def test_bad_files(tmp_path):
    p = tmp_path / "garbage.safetensors"
    p.write_bytes(b"this is not a model file at all" * 10)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        ImplicitCopulaRegressor.load(p)
    est = _fit("features", "horseshoe", "vi")
    est.save(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        ImplicitCopulaRegressor.load(p)
    io.save_tensors(p, {"w": torch.zeros(2)}, "DeterministicRegressor", {})
    with pytest.raises(ValueError, match="holds a DeterministicRegressor"):
        ImplicitCopulaRegressor.load(p)
    # a readable file of the right class whose contents do not fit together
    est.save(p)
    tensors, settings = io.load_tensors(p, "ImplicitCopulaRegressor")
    bad = dict(tensors)
    bad["posterior.theta"] = bad["posterior.theta"][:, :3]
    io.save_tensors(p, bad, "ImplicitCopulaRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent contents.*parameter names"):
        ImplicitCopulaRegressor.load(p)
    del bad["posterior.theta"]
    io.save_tensors(p, bad, "ImplicitCopulaRegressor", settings)
    with pytest.raises(ValueError, match="inconsistent contents.*posterior.theta"):
        ImplicitCopulaRegressor.load(p)
    io.save_tensors(p, tensors, "ImplicitCopulaRegressor", {**settings, "fitted": {**settings["fitted"], "version": 9}})
    with pytest.raises(ValueError, match="state version 9"):
        ImplicitCopulaRegressor.load(p)
    io.save_tensors(p, tensors, "ImplicitCopulaRegressor", {**settings, "fitted": {**settings["fitted"], "n_train": 7}})
    with pytest.raises(ValueError, match="do not match n_train"):
        ImplicitCopulaRegressor.load(p)


def test_a_file_written_before_the_random_intercept_loads_as_the_papers_model(tmp_path):
    est = _fit("features", "ridge", "vi", intercept=False)
    p = tmp_path / "old.safetensors"
    est.save(p)
    tensors, settings = io.load_tensors(p, "ImplicitCopulaRegressor")
    params = {k: v for k, v in settings["params"].items() if k != "intercept"}
    posterior = {k: v for k, v in settings["posterior"].items() if k != "intercept"}
    io.save_tensors(p, tensors, "ImplicitCopulaRegressor", {**settings, "params": params, "posterior": posterior})
    back = ImplicitCopulaRegressor.load(p)
    assert back.intercept is False and back.posterior_.intercept is False
    _assert_same_predictions(est, back)
    # an intercept setting that the stored posterior does not have is refused
    io.save_tensors(p, tensors, "ImplicitCopulaRegressor", {**settings, "params": {**params, "intercept": True},
                                                            "posterior": posterior})
    with pytest.raises(ValueError, match="intercept does not match"):
        ImplicitCopulaRegressor.load(p)


def test_json_arrays_of_a_record_dtype_are_refused_before_numpy_allocates_them():
    # issue 22, part 3: a JSON dtype "V1000000000" in a crafted file tried 9.3 GB
    import time

    from dubito.regression.copula_io import _from_json

    np.testing.assert_array_equal(_from_json({"__ndarray__": [[1, 2]], "dtype": "int64"}), [[1, 2]])
    start = time.perf_counter()
    for bad in ("V1000000000", "U100000", "object", "complex128", "float128" if hasattr(np, "float128") else "c16"):
        with pytest.raises(TypeError, match="not a plain number type"):
            _from_json({"stats": {"__ndarray__": [[0] * 10] * 10, "dtype": bad}})
    assert time.perf_counter() - start < 1.0
