r"""Kronecker-factored curvature of `KFACLaplace`: the factors A and G, the matrix-normal posterior
they give, its weight draws and the Laplace evidence that picks the prior precision.

Spec ``shared/specs/classification-thesis.md`` §2.7 ([RBB18] = Ritter, Botev & Barber, "A Scalable
Laplace Approximation for Neural Networks", ICLR 2018; [MG15] = Martens & Grosse, "Optimizing
Neural Networks with Kronecker-factored Approximate Curvature", ICML 2015). The estimator, its
defaults and its prediction are described in `dubito.classification.laplace`.

Curvature (eq. 2.37, layer-wise block diagonal, cross-layer blocks dropped). For each chosen
``nn.Linear`` layer s = W a_in + b, with a = [a_in, 1] (the homogeneous 1 when the layer has a
bias) and g = ∂(-log p(y | x)) / ∂s per example,

    A = E_x[a a^T]  ((in+1) x (in+1)),        G = E_x,y[g g^T]  (out x out),
    F̃ = G ⊗ A  for θ = vec_row([W | b])   (torch's row-major flatten of the (out, in+1) matrix,
                                            = the spec's column-stacking of its (in+1) x out W).

For one example this is exact: ∂θ = g ⊗ a, so ∂θ ∂θ^T = (g g^T) ⊗ (a a^T). Over several
examples KFAC replaces E[(g g^T) ⊗ (a a^T)] by E[g g^T] ⊗ E[a a^T] [MG15 §3]; the two agree when
a (or g) is the same for every example, not in general.

The labels y of G (``fisher``):

* ``"sampled"`` (default): the true Fisher, one label y ~ p(y | x, ω*) drawn per input (spec §2.7
  [R], the default of [RBB18]/[MG15]);
* ``"exact"``: the true Fisher with the expectation over y taken exactly,
  G = E_x[Σ_y p(y | x) g_y g_y^T] (K backward passes; spec §2.7: "may use the exact ...");
* ``"empirical"``: the empirical Fisher with the data labels, the thesis's eq. 2.32 (spec §2.7:
  "keep ... behind a flag").

Posterior per layer (eq. 2.39; [RBB18] eq. 8 with N and τ):

    W ~ MN(W*, Ā^{-1}, Ḡ^{-1}),   Ā = √s A + δ I,   Ḡ = √s G + δ I,
    i.e. vec_row(θ) ~ N(vec_row(θ*), (Ḡ ⊗ Ā)^{-1}),

with s = ``scale`` (the "scale of the Kronecker factors", N in eq. 2.39) and δ = √τ
(``damping_mode="sqrt"``, eq. 2.39 read literally, spec §2.7 [R]) or δ = τ (``"direct"``, the
spec's flag), τ = ``damping`` (alias ``prior_precision``: the thesis calls τ a damping, but it
acts as the prior precision, spec pitfall 9). Note (Ḡ ⊗ Ā) ≠ s G ⊗ A + τ I (spec §6.18).

Sampling (spec §2.7): θ_t = θ* + L_G^{-T} E_t L_A^{-1}, E_t an (out, in+1) matrix of i.i.d.
N(0, 1), Ā = L_A L_A^T and Ḡ = L_G L_G^T (Cholesky, jittered if needed; triangular solves,
never an explicit inverse; spec pitfall 15). Then Cov(vec_row θ_t) = Ḡ^{-1} ⊗ Ā^{-1}. Layers
are sampled independently; the T weight samples of one call are shared by all inputs.

Prior precision by the marginal likelihood (``prior_precision="marglik"``, the default; Immer et
al., "Scalable Marginal Likelihood Estimation for Model Selection in Deep Learning", ICML 2021;
laplace-torch's ``optimize_prior_precision(method="marglik")``; MacKay 1992). The Laplace evidence
of the sampled layers' weights θ (P numbers, prior N(0, π^{-1} I)) at the MAP θ* is

    log p(D | τ) ≈ (s/N) Σ_n log p(y_n | x_n, θ*) - (π/2) ||θ*||² + (P/2) log π - ½ log det(Ḡ ⊗ Ā),

with π = δ² the prior precision the posterior carries (the constant of its diagonal: τ itself in
"sqrt" mode) and Ḡ ⊗ Ā the precision that is sampled, layer by layer. log det(Ḡ ⊗ Ā) = q log det Ḡ
+ o log det Ā for Ḡ (o x o) and Ā (q x q), and with the eigenvalues a_j of √s A and g_i of √s G
it is Σ_ij log(g_i + δ) + log(a_j + δ) in closed form (laplace-torch's Kronecker log determinant
with ``damping=True``, its form of Ritter et al.'s Ḡ ⊗ Ā; laplace-torch's default is instead
s G ⊗ A + τ I, a posterior this class does not sample). The factor s/N tempers the likelihood as
the curvature s G ⊗ A does (laplace-torch's ``temperature`` = N/s; s = N: the plain likelihood);
the log-likelihood term does not depend on τ. In t = log δ the evidence is strictly concave (-e^{2t}
||θ*||²/2 + P t - ½ Σ log(c + e^t), each term concave), so its maximiser is the one root of the
derivative P - δ² ||θ*||² - ½ Σ_l (q_l Σ_i δ/(g_i+δ) + o_l Σ_j δ/(a_j+δ)), found by Brent's method
(``scipy.optimize.brentq``) on a bracket in δ ∈ [1e-20, 1e20]. ``prior_precision_`` records the
chosen τ (δ = √τ in "sqrt" mode, δ = τ in "direct" mode), ``log_marginal_likelihood_`` its evidence
(None when fit saw no labels: the log-likelihood term needs them, the choice of τ does not) and
``log_marginal_likelihood(tau)`` evaluates it at any τ.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import brentq

from dubito._estimator import progress_bar
from dubito._validation import to_numpy_if_tensor
from dubito.classification.labels import check_labels

__all__ = ["jittered_cholesky", "kron_evidence", "kronecker_factors", "sample_matrix_normal"]

#: The bracket of δ searched for the evidence's maximiser (module docstring).
_LOG_DELTA_BOUNDS = (-20.0 * np.log(10.0), 20.0 * np.log(10.0))


def jittered_cholesky(m: torch.Tensor, *, max_tries: int = 8) -> torch.Tensor:
    """Lower Cholesky factor of the symmetric PSD ``m``; on failure adds ε I with ε = 1e-10·mean
    diag, ×100 per try (spec pitfall 15). Raises ValueError after ``max_tries``."""
    m = 0.5 * (m + m.transpose(-1, -2))
    chol, info = torch.linalg.cholesky_ex(m)
    if int(info) == 0:
        return chol
    eye = torch.eye(m.shape[-1], dtype=m.dtype, device=m.device)
    eps = 1e-10 * max(float(torch.diagonal(m).abs().mean()), 1e-300)
    for _ in range(max_tries):
        chol, info = torch.linalg.cholesky_ex(m + eps * eye)
        if int(info) == 0:
            return chol
        eps *= 100.0
    raise ValueError("a Kronecker factor is not positive definite even with jitter; use damping > 0")


def sample_matrix_normal(mean: torch.Tensor, chol_g: torch.Tensor, chol_a: torch.Tensor, n_samples: int, *,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    r"""T = ``n_samples`` draws of θ (out, q) with vec_row(θ) ~ N(vec_row(mean), (Ḡ ⊗ Ā)^{-1}).

    θ_t = mean + L_G^{-T} E_t L_A^{-1} with Ḡ = L_G L_G^T (out x out), Ā = L_A L_A^T (q x q) and E_t
    i.i.d. N(0, 1) (spec §2.7): Cov = (L_G^{-T} L_G^{-1}) ⊗ (L_A^{-T} L_A^{-1}) = Ḡ^{-1} ⊗ Ā^{-1}.
    Triangular solves in the factors' dtype; returns (T, out, q) in ``mean``'s dtype.
    """
    out, q = mean.shape
    e = torch.randn((n_samples, out, q), generator=generator, dtype=chol_g.dtype, device=chol_g.device)
    x = torch.linalg.solve_triangular(chol_g.transpose(0, 1), e, upper=True, left=True)   # L_G^{-T} E
    x = torch.linalg.solve_triangular(chol_a, x, upper=False, left=False)                 # ... L_A^{-1}
    return mean.unsqueeze(0) + x.to(mean.dtype)


class _KronEvidence:
    r"""The Laplace evidence of the module docstring as a function of δ, from the eigenvalues of
    √s A and √s G of each sampled layer, ||θ*||², P and the tempered log-likelihood (or None)."""

    def __init__(self, eigs: list[tuple[np.ndarray, np.ndarray]], theta_sq: float, loglik: float | None):
        self.eigs = [(np.clip(a, 0.0, None), np.clip(g, 0.0, None)) for a, g in eigs]
        self.theta_sq = float(theta_sq)
        self.n_params = int(sum(a.size * g.size for a, g in eigs))
        self.loglik = loglik

    def __call__(self, delta: float) -> float:
        """log p(D | δ); without the log-likelihood term when it is None."""
        logdet = sum(a.size * np.sum(np.log(g + delta)) + g.size * np.sum(np.log(a + delta)) for a, g in self.eigs)
        value = -0.5 * delta**2 * self.theta_sq + self.n_params * np.log(delta) - 0.5 * logdet
        return float(value + (self.loglik or 0.0))

    def slope(self, t: float) -> float:
        """d/dt log p(D | δ = e^t): P - δ² ||θ*||² - ½ Σ_l (q Σ_i δ/(g_i+δ) + o Σ_j δ/(a_j+δ)); decreasing."""
        d = np.exp(t)
        frac = sum(a.size * np.sum(d / (g + d)) + g.size * np.sum(d / (a + d)) for a, g in self.eigs)
        return float(self.n_params - d * d * self.theta_sq - 0.5 * frac)

    def argmax(self) -> float:
        """The δ maximising the (strictly concave in log δ) evidence: the root of `slope`."""

        lo, hi = _LOG_DELTA_BOUNDS
        if self.theta_sq <= 0.0:
            raise ValueError("the sampled layers' weights are all zero: the marginal likelihood grows without bound "
                             "in the prior precision; pass a number (prior_precision=...)")
        if self.slope(lo) <= 0.0:
            return float(np.exp(lo))
        if self.slope(hi) >= 0.0:
            return float(np.exp(hi))
        return float(np.exp(brentq(self.slope, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)))


def kron_evidence(factors, layers, scale: float, log_likelihood: float | None, n_fit: int) -> _KronEvidence:
    """The evidence of fitted factors [(A, G), ...] of ``layers`` (`_Layer`): the eigenvalues of √s A
    and √s G per layer (float64, ``torch.linalg.eigvalsh``), ||θ*||² over the layers' [W | b] and the
    tempered log-likelihood (s/N) Σ log p(y | x, θ*) (module docstring; None without labels)."""
    root = np.sqrt(scale)
    eigs = [(root * torch.linalg.eigvalsh(a).cpu().numpy(), root * torch.linalg.eigvalsh(g).cpu().numpy())
            for a, g in factors]
    theta_sq = float(sum(float((lay.theta.double() ** 2).sum()) for lay in layers))
    tempered = None if log_likelihood is None else float(scale / n_fit * log_likelihood)
    return _KronEvidence(eigs, theta_sq, tempered)


def kronecker_factors(net, params, layers, batches, fisher, gen, dev, *, progress: bool = False,
                      total: int | None = None):
    """A = E[a a^T] and G = E[g g^T] of every layer in ``layers`` (`_Layer`) over ``batches`` (x, y or
    None) on ``dev`` (module docstring): (factors [(A, G), ...] in float64, examples seen, K, the
    untempered Σ log p(y | x, θ*) or None once a batch has no labels).

    Dropout is off (evaluation mode) and the network builds no graph before the first sampled layer;
    the parameters' ``requires_grad`` and every module's mode are restored afterwards (also on error).
    ``fisher`` picks the labels of G, ``gen`` draws the sampled Fisher's labels; ``progress`` shows a
    bar over the ``total`` batches."""
    for lay in layers:
        q = lay.module.in_features + int(lay.bias)
        lay.a_sum = torch.zeros((q, q), dtype=torch.float64, device=dev)
        lay.g_sum = torch.zeros((lay.module.out_features,) * 2, dtype=torch.float64, device=dev)
    acts: dict[int, torch.Tensor] = {}
    outs: dict[int, torch.Tensor] = {}

    def capture(i):
        def hook(module, args, out):
            a = args[0]
            if a.dim() != 2:
                raise ValueError(f"layer {layers[i].name!r} received an input of shape {tuple(a.shape)}; KFAC here "
                                 "needs (batch, features) inputs to nn.Linear")
            if i in acts:
                raise ValueError(f"layer {layers[i].name!r} is called more than once per forward pass (shared "
                                 "weights); KFAC here needs one call per layer")
            acts[i] = a.detach()
            if not out.requires_grad:  # nothing before needs a gradient: make s a leaf
                out = out.detach().requires_grad_(True)
            outs[i] = out
            return out
        return hook

    grad_flags = [p.requires_grad for p in params]
    modes = {m: m.training for m in net.modules()}
    handles = []
    k = None
    n_seen = 0
    loglik = 0.0  # Σ log p(y | x, θ*) over labelled batches; None once a batch has no labels
    try:
        for p in params:
            p.requires_grad_(False)  # the backbone builds no graph; s of the first layer is a leaf
        net.eval()
        handles = [lay.module.register_forward_hook(capture(i)) for i, lay in enumerate(layers)]
        with progress_bar(progress) as bar:
            task = bar.add_task("KFAC factors (batches)", total=total)
            for xb, yb in batches:
                acts.clear()
                outs.clear()
                with torch.enable_grad():
                    try:
                        logits = net(xb)
                    except RuntimeError as exc:
                        raise ValueError(f"the model failed on inputs of shape {tuple(xb.shape)} ({exc}); check "
                                         "image_shape and the number of columns of X") from None
                    if logits.dim() != 2 or logits.shape[0] != xb.shape[0] or logits.shape[1] < 2:
                        raise ValueError(f"the model must return logits of shape (batch, K) with K >= 2; for "
                                         f"{xb.shape[0]} inputs it returned {tuple(logits.shape)}")
                    if k is None:
                        k = int(logits.shape[1])
                    elif logits.shape[1] != k:
                        raise ValueError(f"the model returned {logits.shape[1]} classes after {k}")
                    missing = [lay.name for i, lay in enumerate(layers) if i not in outs]
                    if missing:
                        raise ValueError(f"layers {missing} were not used by the model's forward pass")
                    if yb is not None:
                        yl, _ = check_labels(to_numpy_if_tensor(yb), k)
                        yb = torch.as_tensor(yl, device=dev)
                        if loglik is not None:
                            logp = F.log_softmax(logits.detach().double(), dim=1)
                            loglik += float(logp.gather(1, yb.view(-1, 1)).sum())
                    else:
                        loglik = None
                    accumulate(layers, acts, outs, logits, yb, fisher, gen)
                n_seen += int(xb.shape[0])
                bar.update(task, advance=1)
    finally:
        for h in handles:
            h.remove()
        for p, flag in zip(params, grad_flags):
            p.requires_grad_(flag)
        for m, md in modes.items():
            m.training = md
    if n_seen == 0:
        raise ValueError("fit received no data (an empty iterable of batches)")
    factors = [(lay.a_sum / n_seen, lay.g_sum / n_seen) for lay in layers]
    for lay in layers:
        lay.a_sum = lay.g_sum = None
    return factors, n_seen, k, loglik


def accumulate(layers, acts, outs, logits, y, fisher, gen) -> None:
    """Add Σ_b a_b a_b^T and Σ_b g_b g_b^T of this batch (g = ∂(-log p(y|x))/∂s per example).

    The batch's sums are formed in the model's dtype (float32: relative error ~1e-7 sqrt(B)) and
    accumulated over batches in float64."""
    for i, lay in enumerate(layers):
        a = acts[i]
        if lay.bias:
            a = torch.cat([a, torch.ones((a.shape[0], 1), dtype=a.dtype, device=a.device)], dim=1)
        lay.a_sum += (a.T @ a).double()
    logp = F.log_softmax(logits, dim=1)
    s_list = [outs[i] for i in range(len(layers))]
    if fisher == "exact":
        pi = logp.detach().exp()
        k = logits.shape[1]
        for c in range(k):
            loss = -(pi[:, c].sqrt() * logp[:, c]).sum()   # Σ_b √π_bc (-log p(c | x_b))
            grads = torch.autograd.grad(loss, s_list, retain_graph=c < k - 1)
            for lay, g in zip(layers, grads):
                lay.g_sum += (g.T @ g).double()
        return
    if fisher == "sampled":
        labels = torch.multinomial(logp.detach().exp().double(), 1, generator=gen).squeeze(1)
    else:
        if y is None:
            raise ValueError("fisher='empirical' needs the labels y (the batches carry none)")
        labels = y
    loss = -logp.gather(1, labels.view(-1, 1)).sum()
    grads = torch.autograd.grad(loss, s_list)
    for lay, g in zip(layers, grads):
        lay.g_sum += (g.T @ g).double()
