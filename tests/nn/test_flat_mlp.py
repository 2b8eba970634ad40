"""FlatMLP (spec §2.1, test 7): outputs against nn.Sequential nets built from the spec's flat
layout by hand, d for every row of the spec's table, gradients against autograd / finite
differences, and bad input. float64, tolerance 1e-12 (relative 1e-10 for gradients)."""
import numpy as np
import pytest
import torch

from dubito.nn.flat_mlp import FlatMLP

# spec §2.1 table: data set -> (D, H, d)
TABLE = {
    "synthetic": (1, 50, 151), "boston": (13, 50, 751), "concrete": (8, 50, 501), "energy": (8, 50, 501),
    "wine": (11, 50, 651), "yacht": (6, 50, 401), "powerplant": (4, 100, 601), "navalC": (16, 100, 1801),
    "protein": (9, 100, 1101),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_n_params_matches_spec_table(name):
    D, H, d = TABLE[name]
    assert FlatMLP(D, H).n_params == d


def _reference(theta_row: torch.Tensor, D: int, H: int, act) -> torch.nn.Sequential:
    """nn.Sequential from θ = [W1 (H×D row-major) | b1 | W2 | b2], sliced independently of FlatMLP."""
    first, last = torch.nn.Linear(D, H, dtype=torch.float64), torch.nn.Linear(H, 1, dtype=torch.float64)
    with torch.no_grad():
        first.weight.copy_(theta_row[: H * D].reshape(H, D))
        first.bias.copy_(theta_row[H * D : H * D + H])
        last.weight.copy_(theta_row[H * D + H : H * D + 2 * H].reshape(1, H))
        last.bias.copy_(theta_row[-1:])
    return torch.nn.Sequential(first, act, last)


ACTS = {"relu": torch.nn.ReLU(), "tanh": torch.nn.Tanh(), "gelu": torch.nn.GELU()}


@pytest.mark.parametrize("activation", sorted(ACTS))
@pytest.mark.parametrize("D,H,M,N", [(1, 50, 7, 20), (13, 50, 60, 200), (4, 100, 3, 5)])
def test_output_equals_sequential_from_each_row(activation, D, H, M, N):
    # (13, 50, 60, 200): several blocks of predictors (2^18 // (50*200) = 26 per block)
    gen = torch.Generator().manual_seed(D * 1000 + M)
    net = FlatMLP(D, H, activation)
    theta = torch.randn(M, net.n_params, generator=gen, dtype=torch.float64)
    X = torch.randn(N, D, generator=gen, dtype=torch.float64)
    out = net(theta, X)
    assert out.shape == (M, N)
    for m in range(M):
        ref = _reference(theta[m], D, H, ACTS[activation])(X)[:, 0]
        torch.testing.assert_close(out[m], ref, rtol=0, atol=1e-12)
        torch.testing.assert_close(net.to_module(theta[m])(X)[:, 0], ref, rtol=0, atol=1e-12)
    W1, b1, W2, b2 = net.unflatten(theta)
    assert W1.shape == (M, H, D) and b1.shape == (M, H) and W2.shape == (M, H) and b2.shape == (M,)


@pytest.mark.parametrize("activation", ["relu", "tanh", "gelu"])
def test_gradient_equals_autograd_of_sequential(activation):
    """The custom backward (relu/tanh) and the autograd path give the gradient of Σ w ⊙ f."""
    gen = torch.Generator().manual_seed(3)
    D, H, M, N = 5, 50, 40, 150  # 2^18 // (50*150) = 34 per block: two blocks
    net = FlatMLP(D, H, activation)
    theta = torch.randn(M, net.n_params, generator=gen, dtype=torch.float64, requires_grad=True)
    X = torch.randn(N, D, generator=gen, dtype=torch.float64)
    w = torch.randn(M, N, generator=gen, dtype=torch.float64)
    (grad,) = torch.autograd.grad((net(theta, X) * w).sum(), theta)
    ref = torch.zeros_like(theta)
    for m in range(M):
        row = theta[m].detach().clone().requires_grad_()
        # functional reference with the same slicing as _reference, differentiable in row
        W1, b1 = row[: H * D].reshape(H, D), row[H * D : H * D + H]
        W2, b2 = row[H * D + H : H * D + 2 * H], row[-1]
        f = ACTS[activation](X @ W1.T + b1) @ W2 + b2
        (ref[m],) = torch.autograd.grad((f * w[m]).sum(), row)
    torch.testing.assert_close(grad, ref, rtol=1e-10, atol=1e-12)


def test_gradcheck_custom_backward_and_input_gradient():
    gen = torch.Generator().manual_seed(4)
    for activation in ("relu", "tanh"):
        net = FlatMLP(3, 6, activation)
        theta = torch.randn(4, net.n_params, generator=gen, dtype=torch.float64, requires_grad=True)
        X = torch.randn(7, 3, generator=gen, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t, net=net, X=X: net(t, X.detach()), (theta,))
        assert torch.autograd.gradcheck(net, (theta, X))  # X with grad: autograd path


def test_float32_matches_float64():
    gen = torch.Generator().manual_seed(5)
    net = FlatMLP(13, 50)
    theta = torch.randn(500, net.n_params, generator=gen, dtype=torch.float64)
    X = torch.randn(200, 13, generator=gen, dtype=torch.float64)
    out32 = net(theta.float(), X.float()).double()
    assert float((out32 - net(theta, X)).abs().max()) < 1e-3 * float(net(theta, X).abs().max())


def test_single_row_theta_and_bad_input():
    net = FlatMLP(2, 3)
    theta = torch.zeros(net.n_params, dtype=torch.float64)
    assert net(theta, torch.ones(4, 2, dtype=torch.float64)).shape == (1, 4)
    with pytest.raises(ValueError, match="theta must have shape"):
        net(torch.zeros(2, net.n_params + 1), torch.ones(4, 2))
    with pytest.raises(ValueError, match="X must be a torch tensor of shape"):
        net(torch.zeros(2, net.n_params), torch.ones(4, 3))
    with pytest.raises(ValueError, match="theta must be a torch tensor"):
        net(np.zeros((2, net.n_params)), torch.ones(4, 2))
    with pytest.raises(ValueError, match="activation"):
        FlatMLP(2, 3, "sigmoid")
    with pytest.raises(ValueError, match="hidden"):
        FlatMLP(2, 0)
