"""device="cuda" paths against the CPU (skipped where no CUDA device exists; CI has none).

Each estimator is fitted twice from the same seed, on the CPU and on the GPU, and the GPU's
numbers must stay on the GPU while fitting and agree with the CPU's: exactly-determined parts
(the copula posterior's log density and gradient, the plug-in density of a fixed posterior) to
1e-10 relative, trained networks to 1e-3 (float32 training takes other reduction orders on a
GPU, so bitwise equality is not expected), MCMC by its Monte Carlo error.

Status: the first tests were written in a session whose GPU time ran out before this file ran on one; their logic was
checked with "cpu" substituted for "cuda" (all four pass). The CNN's CUDA tests in
tests/nn/test_pilotnet.py and tests/regression/test_image_networks.py did run on an H100.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from .regression.copula_synthetic import relu_features_and_latent

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.mark.parametrize("prior", ["ridge", "horseshoe"])
def test_copula_log_posterior_on_gpu_equals_cpu(prior):
    from dubito.regression.copula_posterior import CopulaModel

    psi, z = relu_features_and_latent(300)
    cpu = CopulaModel(psi, z, prior)
    gpu = CopulaModel(psi, z, prior, device="cuda")
    theta = torch.as_tensor(np.random.default_rng(1).normal(scale=0.5, size=(7, cpu.dim)))
    v_c, g_c = cpu.log_prob_and_grad(theta)
    v_g, g_g = gpu.log_prob_and_grad(theta.cuda())
    assert v_g.device.type == "cuda"
    np.testing.assert_allclose(v_g.cpu().numpy(), v_c.numpy(), rtol=1e-10)
    np.testing.assert_allclose(g_g.cpu().numpy(), g_c.numpy(), rtol=1e-9, atol=1e-9)


def test_copula_vi_and_nuts_on_gpu_agree_with_cpu():
    from dubito.regression import ImplicitCopulaRegressor

    psi, z = relu_features_and_latent(400)
    y = np.exp(z)  # a skewed response
    kw = dict(vi_max_iter=1500, vi_min_iter=300, n_draws=200, random_state=0, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = ImplicitCopulaRegressor.from_features(psi, y, **kw)
        gpu = ImplicitCopulaRegressor.from_features(psi, y, device="cuda", **kw)
    assert gpu.posterior_.theta.device.type == "cuda"
    # same seed, same float64 arithmetic up to reduction order: the VI paths stay close
    np.testing.assert_allclose(gpu.posterior_.q.mean.cpu().numpy(), cpu.posterior_.q.mean.numpy(), atol=0.05)
    pc, pg = cpu.predict_distribution(features=psi[:50]), gpu.predict_distribution(features=psi[:50])
    np.testing.assert_allclose(pg.mean, pc.mean, rtol=0.02, atol=0.02)
    mix = ImplicitCopulaRegressor.from_features(psi, y, device="cuda", predictive="mixture", **kw)
    dens = mix.predict_distribution(features=psi[:20])
    assert np.all(np.isfinite(dens.mean))

    nuts_kw = dict(inference="nuts", nuts_samples=300, nuts_warmup=300, nuts_chains=2, random_state=0,
                   progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n_cpu = ImplicitCopulaRegressor.from_features(psi, y, **nuts_kw)
        n_gpu = ImplicitCopulaRegressor.from_features(psi, y, device="cuda", **nuts_kw)
    assert n_gpu.posterior_.theta.device.type == "cuda"
    m_c, m_g = n_cpu.posterior_.theta.mean(0).numpy(), n_gpu.posterior_.theta.mean(0).cpu().numpy()
    sd = n_cpu.posterior_.theta.std(0).numpy()
    # two independent chains' worth of draws (ESS >= 100 each): |difference| < 5 sd / sqrt(100) * sqrt(2)
    assert np.all(np.abs(m_g - m_c) < 0.71 * sd + 1e-12)


def test_network_estimators_on_gpu():
    from dubito.regression import DeterministicRegressor, ImplicitCopulaRegressor, MixtureDensityRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + 0.3 * rng.normal(size=300)
    kw = dict(hidden=(16,), epochs=5, batch_size=32, lr=1e-2, random_state=0, progress=False)
    for cls, extra in ((DeterministicRegressor, {}), (MixtureDensityRegressor, {"n_components": 3})):
        cpu = cls(**kw, **extra).fit(X, y)
        gpu = cls(**kw, **extra, device="cuda").fit(X, y)
        assert next(gpu.net_.parameters()).device.type == "cuda"
        np.testing.assert_allclose(gpu.predict(X[:20]), cpu.predict(X[:20]), rtol=1e-3, atol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = ImplicitCopulaRegressor(hidden=(16,), n_features=4, epochs=5, lr=1e-2, vi_max_iter=500, vi_min_iter=100,
                                      n_draws=100, random_state=0, progress=False, device="cuda").fit(X, y)
    assert next(est.net_.parameters()).device.type == "cuda"
    pred = est.predict_distribution(X[:20])
    assert np.corrcoef(pred.mean, y[:20])[0, 1] > 0.8


def _fit_graphed_and_eager(monkeypatch, make, X, y):
    """(eager fit, graphed fit, replays counted during the graphed fit) of ``make()`` on (X, y)."""
    replays = []
    real_replay = torch.cuda.CUDAGraph.replay

    def counting_replay(self):
        replays.append(1)
        return real_replay(self)

    monkeypatch.setenv("DUBITO_CUDA_GRAPHS", "0")
    eager = make().fit(X, y)
    monkeypatch.setenv("DUBITO_CUDA_GRAPHS", "1")
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", counting_replay)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a failed capture warns: fail instead
        graphed = make().fit(X, y)
    return eager, graphed, len(replays)


@pytest.mark.parametrize("name", ["DeterministicRegressor", "MixtureDensityRegressor", "DeepEnsembleRegressor"])
def test_cuda_graph_training_equals_eager(monkeypatch, name):
    """dubito.graphed_steps: the same optimiser steps replayed from a CUDA graph give the eager
    fit's network (float32 arithmetic: 1e-4); the ensemble's per-epoch learning-rate drop reaches
    the graph (it reads the rate from a device tensor)."""
    import dubito.regression as regression

    rng = np.random.default_rng(1)
    X = rng.normal(size=(640, 4))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=640)
    kw = dict(epochs=6, batch_size=64, validation_fraction=0.0, random_state=0, progress=False, device="cuda")
    if name == "DeepEnsembleRegressor":
        kw.update(n_members=3, lr_drop="halving")
    eager, graphed, n_replays = _fit_graphed_and_eager(monkeypatch, lambda: getattr(regression, name)(**kw), X, y)
    assert n_replays >= 6 * 10 - 4  # every full batch after 3 warm-up steps and the capture
    np.testing.assert_allclose(graphed.predict(X[:50]), eager.predict(X[:50]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(graphed.loss_curve_, eager.loss_curve_, rtol=1e-4)


@pytest.mark.parametrize("name", ["MCDropoutRegressor", "DeepNoiseSGDRegressor", "MeanFieldVIRegressor"])
def test_cuda_graph_training_replays_its_own_generator(monkeypatch, name):
    """Dropout masks, noise draws and weight draws come from the estimator's own CUDA generator,
    registered with the graph: the graphed fit is reproducible and ends at the eager fit's
    training loss (within 10 %) and accuracy (RMSE within 10 %)."""
    import dubito.regression as regression

    rng = np.random.default_rng(2)
    X = rng.normal(size=(640, 4))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=640)
    kw = dict(epochs=8, batch_size=64, validation_fraction=0.0, random_state=0, progress=False, device="cuda")
    kw.update({"MCDropoutRegressor": dict(n_samples=50), "DeepNoiseSGDRegressor": dict(hidden=(16, 16), n_noise_samples=10, lr=1e-2),
               "MeanFieldVIRegressor": dict(hidden=(16,), n_samples=50, lr=1e-2)}[name])
    make = lambda: getattr(regression, name)(**kw)  # noqa: E731
    eager, graphed, n_replays = _fit_graphed_and_eager(monkeypatch, make, X, y)
    assert n_replays >= 8 * 10 - 4
    again = make().fit(X, y)
    np.testing.assert_array_equal(again.loss_curve_, graphed.loss_curve_)
    np.testing.assert_array_equal(again.predict(X[:50]), graphed.predict(X[:50]))
    assert abs(graphed.loss_curve_[-1] - eager.loss_curve_[-1]) <= 0.1 * abs(eager.loss_curve_[-1])
    rmse = [np.sqrt(np.mean((m.predict(X) - y) ** 2)) for m in (eager, graphed)]
    assert abs(rmse[1] - rmse[0]) <= 0.1 * rmse[0], rmse
