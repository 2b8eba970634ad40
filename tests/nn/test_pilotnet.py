"""PilotNet (dubito.nn.pilotnet) and MLP.features: shapes, layer table, masks, dropout modes.

Oracles: brute-force convolutions (a loop over kernel positions), manual forwards with
torch.nn.functional, and single-mask calls for the batched MC-dropout pass.
"""

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from dubito.nn import MLP, PilotNet
from dubito.nn.pilotnet import CONV_LAYERS, activation_width, check_image_shape, conv_table


def _net(shape=(1, 16, 16), hidden=(12, 8), out=1, dropout=0.0, seed=0, dtype=torch.float64, **kw):
    return PilotNet(shape, hidden, out, dropout=dropout, generator=torch.Generator().manual_seed(seed), dtype=dtype,
                    **kw)


def _x(n, shape=(1, 16, 16), seed=1):
    return torch.rand((n, math.prod(shape)), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _positions(size, kernel, stride):
    """Brute force: count the kernel placements (every stride-th start) that fit in the axis."""
    return sum(1 for start in range(size) if start % stride == 0 and start + kernel <= size)


# ---------------------------------------------------------------- layer table
@pytest.mark.parametrize("shape", [(1, 64, 64), (3, 66, 200), (1, 16, 16), (1, 32, 32), (2, 8, 11), (1, 1, 1),
                                   (1, 3, 40)])
def test_layer_table_by_brute_force(shape):
    table = conv_table(shape)
    assert [(t["channels"], t["stride"]) for t in table] == [(c, s) for c, _, s in CONV_LAYERS]
    c, h, w = shape
    for t, (_, k, _) in zip(table, CONV_LAYERS):
        (kh, kw), (oc, oh, ow) = t["kernel"], t["out_shape"]
        assert t["in_channels"] == c and oc == t["channels"]
        # PilotNet's kernel where the axis fits it, else cut to the axis (one output position)
        for size, kernel, out in ((h, kh, oh), (w, kw, ow)):
            assert kernel == min(k, size)
            assert out == _positions(size, kernel, t["stride"]) >= 1
        c, h, w = oc, oh, ow
    # ... and the module produces exactly those shapes
    net = _net(shape, hidden=(5,))
    h = torch.zeros((2, *shape), dtype=torch.float64)
    for conv, t in zip(net.convs, table):
        h = conv(h)
        assert tuple(h.shape[1:]) == t["out_shape"]


def test_layer_table_for_the_driving_frames_and_the_paper():
    assert [t["out_shape"] for t in conv_table((1, 64, 64))] == [
        (24, 30, 30), (36, 13, 13), (48, 5, 5), (64, 3, 3), (64, 1, 1)]
    assert [t["kernel"] for t in conv_table((1, 64, 64))] == [(5, 5)] * 3 + [(3, 3)] * 2
    assert [t["kernel"] for t in conv_table((16, 16))] == [(5, 5), (5, 5), (1, 1), (1, 1), (1, 1)]
    # PilotNet on the paper's 66 x 200 frames (Bojarski et al. 2016, Fig. 4)
    assert [t["out_shape"][1:] for t in conv_table((3, 66, 200))] == [(31, 98), (14, 47), (5, 22), (3, 20), (1, 18)]
    net = PilotNet((1, 64, 64))
    assert sum(p.numel() for p in net.parameters()) == 142_219  # the module docstring's table
    assert net.flat_features == 64
    # widest per-row buffer: conv 2's unfolded input, 24 * 5 * 5 * 13 * 13
    assert activation_width((1, 64, 64)) == net.activation_width == 24 * 25 * 169
    assert activation_width((1, 4, 4), hidden=(5000,)) == 5000
    # 4x4: kernels cut to 4x4, then 1x1; the widest row is a 64-channel output (or conv 5's input)
    assert activation_width((1, 4, 4)) == 64


def test_image_shape_forms():
    assert check_image_shape((64, 64)) == (1, 64, 64)
    assert check_image_shape([3, 8, 9]) == (3, 8, 9)
    assert check_image_shape((np.int64(2), 5, 5)) == (2, 5, 5)
    for bad in [None, 64, (64,), (1, 2, 3, 4), (0, 8, 8), (1, 8.0, 8), (True, 8, 8), "64x64"]:
        with pytest.raises(ValueError, match="must be \\(C, H, W\\) or \\(H, W\\) of positive ints"):
            check_image_shape(bad)


# ---------------------------------------------------------------- forward and features
def _manual_features(net, x, masks=None):
    """Conv trunk + dense tail written out with F.conv2d / F.linear (masks: one per layer, (C,H,W)/(w,))."""
    h = x.reshape(-1, *net.image_shape)
    for i, conv in enumerate(net.convs):
        h = F.relu(F.conv2d(h, conv.weight, conv.bias, stride=conv.stride))
        if masks is not None:
            h = h * masks[i]
    h = h.flatten(1)
    for j, layer in enumerate(net.tail.layers[:-1]):
        h = F.relu(F.linear(h, layer.weight, layer.bias))
        if masks is not None:
            h = h * masks[len(net.convs) + j]
    return h


def test_shapes_and_features_equal_a_manual_forward():
    net = _net(hidden=(12, 8), out=3, dropout=0.3)
    x = _x(7)
    net.eval()
    out, psi = net(x), net.features(x)
    assert out.shape == (7, 3) and psi.shape == (7, 8)
    manual = _manual_features(net, x)
    torch.testing.assert_close(psi, manual, rtol=0, atol=1e-14)
    last = net.tail.layers[-1]
    torch.testing.assert_close(out, F.linear(manual, last.weight, last.bias), rtol=0, atol=1e-14)
    # features ignore dropout whatever the mode
    net.train()
    assert torch.equal(net.features(x), psi)


def test_mlp_features_equal_a_manual_forward():
    mlp = MLP(5, (7, 4), 2, dropout=0.5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = _x(6, shape=(5,))
    h = x
    for layer in mlp.layers[:-1]:
        h = torch.relu(h @ layer.weight.T + layer.bias)
    mlp.train()
    assert mlp.features(x).shape == (6, 4)
    torch.testing.assert_close(mlp.features(x), h, rtol=0, atol=1e-14)
    mlp.eval()
    torch.testing.assert_close(mlp(x), h @ mlp.layers[-1].weight.T + mlp.layers[-1].bias, rtol=0, atol=1e-14)
    assert torch.equal(MLP(3, (), 1).features(x[:, :3].float()), x[:, :3].float())  # no hidden layer: x itself


def test_no_hidden_layer_features_are_the_flattened_trunk():
    net = _net(hidden=(), dropout=0.2).eval()
    x = _x(4)
    assert net.features(x).shape == (4, 64)
    torch.testing.assert_close(net.features(x), _manual_features(net, x), rtol=0, atol=1e-14)
    masks = net.sample_masks(3, torch.Generator().manual_seed(0))
    assert len(masks) == 5 and net(x, masks).shape == (3, 4, 1)


# ---------------------------------------------------------------- MC dropout masks
def test_masked_forward_equals_single_mask_calls_and_manual_masks():
    net = _net(hidden=(12, 8), out=2, dropout=0.3).eval()
    x = _x(5)
    T = 6
    masks = net.sample_masks(T, torch.Generator().manual_seed(3))
    assert [tuple(m.shape) for m in masks] == [(T, *s) for s in net.conv_shapes] + [(T, 12), (T, 8)]
    full = net(x, masks)
    assert full.shape == (T, 5, 2)
    last = net.tail.layers[-1]
    for t in range(T):
        one = [m[t : t + 1] for m in masks]
        assert torch.equal(full[t], net(x, one)[0])  # bit for bit on a CPU in float64
        manual = F.linear(_manual_features(net, x, [m[t] for m in masks]), last.weight, last.bias)
        torch.testing.assert_close(full[t], manual, rtol=1e-12, atol=1e-12)
    # (T, n, p) input: pass t sees x[t]
    stacked = torch.stack([_x(5, seed=s) for s in range(T)])
    both = net(stacked, masks)
    for t in range(T):
        assert torch.equal(both[t], net(stacked[t], [m[t : t + 1] for m in masks])[0])
    # each mask is one network for every row: a row's draws do not depend on the other rows
    # (up to the rounding of dense products over a different number of rows)
    torch.testing.assert_close(net(x[2:3], masks)[:, 0], full[:, 2], rtol=1e-13, atol=1e-13)


def test_masks_of_ones_give_the_eval_output():
    net = _net(dropout=0.0).eval()
    x = _x(4)
    masks = net.sample_masks(3, torch.Generator().manual_seed(0))
    assert all(torch.equal(m, torch.ones_like(m)) for m in masks)
    torch.testing.assert_close(net(x, masks), net(x).expand(3, 4, 1), rtol=1e-13, atol=1e-13)


def test_masks_are_seeded_bernoulli_with_the_dropout_rate():
    p = 0.3
    net = _net(dropout=p)
    masks = net.sample_masks(200, torch.Generator().manual_seed(1))
    again = net.sample_masks(200, torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(masks, again))
    flat = torch.cat([m.flatten() for m in masks])
    assert set(np.unique(flat.numpy()).round(12)) == {0.0, round(1 / (1 - p), 12)}
    # fraction dropped ~ Binomial(N, p) / N: within 5 binomial sds (seed fixed)
    N = flat.numel()
    assert abs(float((flat == 0).double().mean()) - p) < 5 * math.sqrt(p * (1 - p) / N)


def test_bad_masks_and_inputs():
    net = _net(hidden=(12, 8), dropout=0.2)
    x = _x(3)
    masks = net.sample_masks(4, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="one mask per convolution and per hidden layer \\(5 \\+ 2 = 7"):
        net(x, masks[:-1])
    with pytest.raises(ValueError, match="mask 1 must have shape"):
        net(x, [masks[0], masks[1][:, :3], *masks[2:]])
    with pytest.raises(ValueError, match="T = 4 masks"):
        net(torch.stack([x] * 3), masks)
    with pytest.raises(ValueError, match="takes rows of C\\*H\\*W = 256 values, got 255"):
        net(x[:, :255])
    with pytest.raises(ValueError, match="activation must be one of"):
        PilotNet((8, 8), activation="elu")
    with pytest.raises(ValueError, match="dropout must lie in \\[0, 1\\)"):
        PilotNet((8, 8), dropout=1.0)


# ---------------------------------------------------------------- training-mode dropout and init
def test_training_dropout_is_per_row_and_seeded():
    net = _net(dropout=0.5)
    x = _x(1).expand(6, -1)  # six identical rows
    net.train()
    a = net(x, generator=torch.Generator().manual_seed(0))
    b = net(x, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    assert len(torch.unique(a)) == 6  # each row its own mask
    net.eval()
    e = net(x)
    assert torch.equal(e, net(x, generator=torch.Generator().manual_seed(0)))  # eval: no dropout
    assert not torch.equal(a, e)
    no_drop = _net(dropout=0.0).train()
    assert torch.equal(no_drop(x), no_drop.eval()(x))


def test_initialisation_is_seeded_and_uniform_within_fan_in_bounds():
    a, b, c = _net(seed=5), _net(seed=5), _net(seed=6)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["convs.1.weight"], sc["convs.1.weight"])
    for conv in a.convs:
        bound = 1 / math.sqrt(conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1])
        w = conv.weight.detach()
        assert float(w.abs().max()) <= bound and float(conv.bias.detach().abs().max()) <= bound
        if w.numel() > 1000:  # U(-b, b): the sample reaches near both ends and has sd b/sqrt(3)
            assert float(w.max()) > 0.95 * bound and float(w.min()) < -0.95 * bound
            assert abs(float(w.std()) - bound / math.sqrt(3)) < 0.05 * bound
    assert PilotNet((8, 8), dtype=torch.float32).convs[0].weight.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_forward_matches_cpu():
    cpu = _net(dropout=0.2).eval()
    gpu = _net(dropout=0.2, device="cuda").eval()
    assert next(gpu.parameters()).device.type == "cuda"
    x = _x(5)
    masks = cpu.sample_masks(4, torch.Generator().manual_seed(0))
    torch.testing.assert_close(gpu(x.cuda()).cpu(), cpu(x), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gpu(x.cuda(), [m.cuda() for m in masks]).cpu(), cpu(x, masks), rtol=1e-10,
                               atol=1e-10)
    gpu.train()
    out = gpu(x.cuda(), generator=torch.Generator(device="cuda").manual_seed(0))
    assert out.device.type == "cuda" and torch.isfinite(out).all()
