"""The piecewise-linear input encoding (dubito.nn.piecewise_linear) against its definition."""

import numpy as np
import pytest
import torch

from dubito.nn.piecewise_linear import PiecewiseLinearEncoding, ramps


def _ramp_brute_force(x: float, edges: np.ndarray) -> np.ndarray:
    """Gorishniy et al.'s Eq. (PLE) one bin at a time: 0 left of the bin, 1 right of it, linear inside;
    the first bin linear below its left edge, the last linear above its right edge."""
    T = len(edges) - 1
    out = np.empty(T)
    for t in range(T):
        lo, hi = edges[t], edges[t + 1]
        if x < lo and t > 0:
            out[t] = 0.0
        elif x >= hi and t < T - 1:
            out[t] = 1.0
        else:
            out[t] = (x - lo) / (hi - lo)
    return out


def test_ramps_match_the_definition_and_reconstruct_x_everywhere():
    edges = np.array([-1.0, -0.2, 0.5, 2.0])
    x = np.array([-3.0, -1.0, -0.5, -0.2, 0.0, 0.5, 1.0, 2.0, 7.5])
    r = ramps(x, edges)
    np.testing.assert_allclose(r, np.stack([_ramp_brute_force(v, edges) for v in x]), rtol=0, atol=1e-15)
    # b_0 + sum_t w_t r_t(x) = x, also outside [b_0, b_T] (the open end bins extrapolate linearly)
    np.testing.assert_allclose(edges[0] + r @ np.diff(edges), x, rtol=0, atol=1e-12)
    assert np.all(r[:, 1:-1] >= 0) and np.all(r[:, 1:-1] <= 1)


def test_fit_places_edges_at_quantiles_and_skips_columns_without_two_bins():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=400), np.full(400, 3.0), rng.integers(0, 2, 400).astype(float),
                         rng.integers(0, 5, 400).astype(float)])
    enc = PiecewiseLinearEncoding.fit(X, n_bins=8)
    np.testing.assert_allclose(enc.edges[0], np.quantile(X[:, 0], np.linspace(0, 1, 9)))
    assert enc.edges[1].size == 0 and enc.edges[2].size == 0  # constant; binary (one bin): nothing new
    assert set(enc.edges[3]) <= {0.0, 1.0, 2.0, 3.0, 4.0} and len(enc.edges[3]) >= 3  # tied quantiles merged
    Z = enc.transform(X)
    assert Z.shape == (400, 4 + 8 + len(enc.edges[3]) - 1) == (400, enc.n_outputs)
    np.testing.assert_array_equal(Z[:, :4], X)  # the raw columns first, unchanged
    np.testing.assert_allclose(Z[:, 4:].mean(axis=0), 0, atol=1e-12)  # the ramps standardised on the fit rows
    np.testing.assert_allclose(Z[:, 4:].std(axis=0), 1, atol=1e-12)
    with pytest.raises(ValueError, match="fitted on 4 columns"):
        enc.transform(X[:, :3])
    with pytest.raises(ValueError, match="n_bins"):
        PiecewiseLinearEncoding.fit(X, n_bins=1)


def test_tensors_round_trip_and_inconsistent_ones_are_refused():
    X = np.random.default_rng(1).normal(size=(50, 3))
    X[:, 1] = 0.0
    enc = PiecewiseLinearEncoding.fit(X)
    tensors = enc.to_tensors("encoding.")
    back = PiecewiseLinearEncoding.from_tensors(tensors, "encoding.")
    np.testing.assert_array_equal(back.transform(X), enc.transform(X))
    bad = dict(tensors, **{"encoding.edge_counts": torch.tensor([17, 0, 16])})
    with pytest.raises(RuntimeError, match="edge counts"):
        PiecewiseLinearEncoding.from_tensors(bad, "encoding.")
    with pytest.raises(RuntimeError, match="not increasing"):
        PiecewiseLinearEncoding([np.array([0.0, 1.0, 1.0])], np.zeros(2), np.ones(2))
