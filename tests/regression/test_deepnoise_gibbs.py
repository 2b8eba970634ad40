"""B-DeepNoise Gibbs sweep: shapes, finiteness and determinism (spec §7.14)."""
import torch

from dubito.regression.deepnoise_gibbs import (
    gibbs_sweep,
    init_latents,
    random_init,
    train_log_likelihood,
)
from dubito.regression.deepnoise_model import DeepNoisePriors


def _data(n=200, p=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, p, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def _chain(seed, n_sweeps=5, **kw):
    X, y = _data()
    g = torch.Generator().manual_seed(seed)
    params = random_init((3, 8, 8, 1), g)
    latents = init_latents(params, X, y, "hardtanh", g)
    for _ in range(n_sweeps):
        gibbs_sweep(params, latents, X, y, DeepNoisePriors(), "hardtanh", g, **kw)
    return params, latents


def test_smoke_sweep_shapes_and_finite():
    params, latents = _chain(1)
    assert params.widths == (3, 8, 8, 1)
    for t in params.to_flat().values():
        assert t.dtype == torch.float64 and torch.isfinite(t).all()
    for t in latents.to_flat().values():
        assert t.shape == (200, 8) and torch.isfinite(t).all()
    X, y = _data()
    ll = train_log_likelihood(params, X, y, "hardtanh", 20, torch.Generator().manual_seed(0))
    assert -10.0 < ll < 5.0


def test_determinism_same_seed_identical_chain():
    a, la = _chain(7, latent_batch_size=16)
    b, lb = _chain(7, latent_batch_size=16)
    for k, v in a.to_flat().items():
        assert torch.equal(v, b.to_flat()[k]), k
    for k, v in la.to_flat().items():
        assert torch.equal(v, lb.to_flat()[k]), k
    c, _ = _chain(8)
    assert not torch.equal(a.W[0], c.W[0])
