r"""One-hidden-layer MLP evaluated for many flat parameter vectors at once (spec §2.1).

Layout of one parameter vector θ ∈ R^d (the order of [C]; spec §2.1):

    θ = [ W1 (H·D, viewed as H×D, row-major) | b1 (H) | W2 (H) | b2 (1) ],   d = (D+1)·H + H + 1,
    f_θ(x) = W2 · act(W1 x + b1) + b2.

`FlatMLP(D, H, act)(theta, X)` maps θ (M, d) and X (N, D) to the (M, N) matrix f_{θ_m}(x_n).

Speed (the variational objectives evaluate 500-1000 predictors at 200 inputs per step; spec §6
compute): the predictors are processed in blocks of c nets whose (c, H, N) hidden activations
fit in ~1 MB (cache-resident, reused allocations), each block one GEMM
[W1 | b1]_block (c·H, D+1) @ [X | 1]^T (D+1, N) and one batched product with W2. For ReLU and
tanh with a θ that needs a gradient (and an X that does not), a custom autograd function
recomputes the block's activations in the backward pass instead of storing the (M, H, N)
tensor, and forms the gradients by hand:

    g_W2[m] = Σ_n g[m, n] a[m, :, n],   g_pre = act'(pre) ⊙ W2[m] ⊗ g[m],
    g_[W1|b1][m] = g_pre[m] @ [X | 1],   g_b2[m] = Σ_n g[m, n]

(act' = 1{a > 0} for ReLU, 1 − a² for tanh, a = act(pre)); about 3x faster on one core than
autograd through one (M, H, N) tensor. Other activations, or an X that needs a gradient, use
plain autograd over the same blocks.
"""

from __future__ import annotations

import torch

from dubito._validation import check_choice, check_int
from dubito.nn.batched import ACTIVATIONS

__all__ = ["FlatMLP"]

#: Hidden activations per block of predictors (2^18 numbers: 1 MB in float32).
_BLOCK_ELEMENTS = 1 << 18


def _block(m: int, hidden: int, n: int) -> int:
    return max(1, min(m, _BLOCK_ELEMENTS // max(1, hidden * n)))


def _act_(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """act(pre) in place for relu/tanh (the custom backward's activations), else out of place."""
    if activation == "relu":
        return pre.clamp_min_(0)
    if activation == "tanh":
        return pre.tanh_()
    return ACTIVATIONS[activation](pre)


class _BlockedMLP(torch.autograd.Function):
    """out[m] = W2[m] · act(Wa[m] @ Xa^T) + b2[m], blocks of predictors; activations recomputed
    in backward (module docstring). Wa (M, H, D+1) = [W1 | b1], Xa (N, D+1) = [X | 1]."""

    @staticmethod
    def forward(ctx, Wa, W2, b2, Xa, activation):
        m, H, Da = Wa.shape
        n = Xa.shape[0]
        c = _block(m, H, n)
        out = torch.empty((m, n), dtype=Wa.dtype, device=Wa.device)
        XaT = Xa.T
        for s in range(0, m, c):
            a = _act_(Wa[s:s + c].reshape(-1, Da) @ XaT, activation).view(-1, H, n)
            torch.bmm(W2[s:s + c, None, :], a, out=out[s:s + c, None, :])
        out += b2[:, None]
        ctx.save_for_backward(Wa, W2, Xa)
        ctx.activation = activation
        return out

    @staticmethod
    def backward(ctx, g):
        Wa, W2, Xa = ctx.saved_tensors
        m, H, Da = Wa.shape
        n = Xa.shape[0]
        c = _block(m, H, n)
        g = g.contiguous()
        gWa = torch.empty_like(Wa)
        gW2 = torch.empty_like(W2)
        XaT = Xa.T
        for s in range(0, m, c):
            gb = g[s:s + c, None, :]
            a = _act_(Wa[s:s + c].reshape(-1, Da) @ XaT, ctx.activation).view(-1, H, n)
            gW2[s:s + c] = (a * gb).sum(-1)
            if ctx.activation == "relu":
                a.sign_()
            else:  # tanh' = 1 - a^2
                a.mul_(a).neg_().add_(1.0)
            a.mul_(W2[s:s + c, :, None]).mul_(gb)
            # (c·H, N) @ (N, D+1), written as ((D+1, N) @ (N, c·H))^T (faster GEMM shape)
            gWa[s:s + c] = (XaT @ a.view(-1, n).T).T.view(-1, H, Da)
        return gWa, gW2, g.sum(1), None, None


class FlatMLP:
    """f_θ(x) = W2 · act(W1 x + b1) + b2 for a batch of flat θ (module docstring).

    Parameters
    ----------
    n_features : int — D.
    hidden : int, default 50 — H (spec §2.1: 50 for synthetic and small UCI sets, 100 large).
    activation : str, default "relu" — a key of ``dubito.nn.batched.ACTIVATIONS`` (spec §2.1:
        ReLU on UCI, tanh on the synthetic set).
    """

    def __init__(self, n_features: int, hidden: int = 50, activation: str = "relu"):
        self.n_features = check_int(n_features, "n_features", min_value=1)
        self.hidden = check_int(hidden, "hidden", min_value=1)
        self.activation = check_choice(activation, "activation", ACTIVATIONS)
        self._act = ACTIVATIONS[activation]

    @property
    def n_params(self) -> int:
        """d = (D+1)·H + H + 1."""
        return (self.n_features + 1) * self.hidden + self.hidden + 1

    def __repr__(self) -> str:
        return f"FlatMLP(n_features={self.n_features}, hidden={self.hidden}, activation={self.activation!r})"

    def _check_theta(self, theta: torch.Tensor) -> torch.Tensor:
        if not torch.is_tensor(theta):
            raise ValueError(f"theta must be a torch tensor of shape (M, {self.n_params}), got {type(theta).__name__}")
        if theta.ndim == 1:
            theta = theta[None]
        if theta.ndim != 2 or theta.shape[1] != self.n_params:
            raise ValueError(f"theta must have shape (M, d) with d = {self.n_params}, got {tuple(theta.shape)}")
        return theta

    def unflatten(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Views (W1 (M, H, D), b1 (M, H), W2 (M, H), b2 (M,)) of θ (M, d) (or (d,): M = 1)."""
        theta = self._check_theta(theta)
        m, D, H = theta.shape[0], self.n_features, self.hidden
        o1, o2, o3 = H * D, H * D + H, H * D + 2 * H
        return theta[:, :o1].reshape(m, H, D), theta[:, o1:o2], theta[:, o2:o3], theta[:, o3]

    def __call__(self, theta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """f_{θ_m}(x_n) for θ (M, d) and X (N, D) -> (M, N); differentiable in θ and X."""
        if not torch.is_tensor(X) or X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"X must be a torch tensor of shape (N, {self.n_features}), got "
                f"{tuple(X.shape) if torch.is_tensor(X) else type(X).__name__}"
            )
        W1, b1, W2, b2 = self.unflatten(theta)
        Wa = torch.cat([W1, b1[..., None]], dim=2)  # (M, H, D+1)
        Xa = torch.cat([X, torch.ones((X.shape[0], 1), dtype=X.dtype, device=X.device)], dim=1)
        custom = self.activation in ("relu", "tanh") and not (torch.is_grad_enabled() and X.requires_grad)
        if custom:
            return _BlockedMLP.apply(Wa, W2, b2, Xa, self.activation)
        m, H, n = Wa.shape[0], self.hidden, X.shape[0]
        c = _block(m, H, n)
        outs = [torch.bmm(W2[s:s + c, None, :], self._act(Wa[s:s + c] @ Xa.T))[:, 0] for s in range(0, m, c)]
        return torch.cat(outs) + b2[:, None]

    def to_module(self, theta_row: torch.Tensor) -> torch.nn.Sequential:
        """An ``nn.Sequential(Linear(D, H), act, Linear(H, 1))`` holding the weights of one θ (d,)."""
        W1, b1, W2, b2 = (t[0] for t in self.unflatten(theta_row.detach()))
        dtype, device = theta_row.dtype, theta_row.device
        first = torch.nn.Linear(self.n_features, self.hidden, dtype=dtype, device=device)
        last = torch.nn.Linear(self.hidden, 1, dtype=dtype, device=device)
        act = {"relu": torch.nn.ReLU(), "tanh": torch.nn.Tanh(), "gelu": torch.nn.GELU(), "silu": torch.nn.SiLU(),
               "hardtanh": torch.nn.Hardtanh()}[self.activation]
        with torch.no_grad():
            first.weight.copy_(W1)
            first.bias.copy_(b1)
            last.weight.copy_(W2[None])
            last.bias.copy_(b2.reshape(1))
        return torch.nn.Sequential(first, act, last)
