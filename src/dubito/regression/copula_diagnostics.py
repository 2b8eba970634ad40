"""The convergence diagnostics of a fitted `ImplicitCopulaRegressor` (its ``diagnostics_``).

They follow the shared schema of `dubito.inference.convergence`. VI: no R-hat; ``stopped_by_cap``
when the ELBO stopping rule was not met by ``vi_max_iter``. NUTS: split R-hat and bulk ESS of the
predictive mean per draw, E[Y | x, theta_j] = E[F_Y^{-1}(Phi(Z))] with Z ~ N(s_j psi' beta_j, s_j^2)
(`_GH_NODES`-node Gauss-Hermite), at up to `N_MONITOR` training rows (`monitor_mean_trace`), and of
the mean copula log-likelihood (1/n) log phi_n(z; S Psi beta, S^2) (eq. 6) per draw
(`loglik_trace`); divergences, acceptance.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dubito.inference.convergence import diagnostics_dict
from dubito.regression.copula_posterior import CopulaModel, copula_scales

__all__ = ["N_MONITOR", "copula_diagnostics", "loglik_trace", "monitor_mean_trace"]

#: Training rows at which the NUTS chains' predictive mean is monitored (as B-DeepNoise, spec §2.4).
N_MONITOR = 20
#: Gauss-Hermite nodes for E[Y | x, theta_j] = E[F_Y^{-1}(Phi(Z))], Z ~ N(m_j, s_j^2), in the diagnostics.
_GH_NODES = 32


def loglik_trace(post, psi_t: torch.Tensor, z_t: torch.Tensor, device) -> np.ndarray | None:
    """(chains, draws) mean copula log-likelihood per NUTS draw of the posterior ``post`` on the
    training features and pseudo responses (float64 tensors); None for VI (no chains)."""
    if post.theta_by_chain is None:
        return None
    model = CopulaModel(psi_t, z_t, post.prior, nu=post.nu, tau2=post.tau2_fixed, intercept=post.intercept,
                        device=device)
    C, S, dim = post.theta_by_chain.shape
    flat = post.theta_by_chain.reshape(C * S, dim)
    ll = torch.cat([model.log_likelihood(flat[i:i + 256]) for i in range(0, C * S, 256)]) / psi_t.shape[0]
    return ll.reshape(C, S).cpu().numpy()


@torch.no_grad()
def monitor_mean_trace(post, train_features: np.ndarray, marginal):
    """(rows, trace): up to `N_MONITOR` training rows and E[Y | x, theta_j] there per NUTS draw,
    (chains, draws, rows), in y units (module docstring); (rows, None) for VI."""
    n = train_features.shape[0]
    rows = np.unique(np.round(np.linspace(0, n - 1, min(N_MONITOR, n))).astype(int))
    if post.theta_by_chain is None:
        return rows, None
    C, S, dim = post.theta_by_chain.shape
    theta = post.theta_by_chain.reshape(C * S, dim)
    psi = post.design(torch.tensor(np.ascontiguousarray(train_features[rows]), dtype=torch.float64,
                                   device=theta.device))
    s = copula_scales(psi, post._prior_variances(theta))             # (J, rows)
    m = s * (theta[:, :post.n_coef] @ psi.T)                         # (J, rows)
    t, w = np.polynomial.hermite.hermgauss(_GH_NODES)
    z = m.cpu().numpy()[..., None] + s.cpu().numpy()[..., None] * (math.sqrt(2.0) * t)
    y = np.asarray(marginal.inverse_pseudo_response(z), dtype=np.float64)
    mean = (y * w).sum(-1) / math.sqrt(math.pi)
    return rows, mean.reshape(C, S, len(rows))


def copula_diagnostics(post, rows, mean_trace, loglik) -> dict:
    """``diagnostics_``: the shared schema (module docstring) plus ``inference``, the VI
    ``iterations`` / ``seconds`` or the NUTS per-chain ``divergences_per_chain``,
    ``acceptance_rate``, ``step_size``, ``seconds`` and the coefficients' largest rank R-hat /
    smallest bulk ESS (``rhat_theta_max``, ``ess_theta_min``). ``rows`` and ``mean_trace`` are
    `monitor_mean_trace`'s, ``loglik`` is `loglik_trace`'s."""
    g = post.diagnostics
    if post.inference == "vi":
        return diagnostics_dict(sampler=False, stopped_by_cap=not bool(g.get("converged", False)), inference="vi",
                                iterations=int(g.get("iterations", 0)), seconds=float(g.get("seconds", np.nan)))
    rh = np.asarray(g.get("rhat", np.nan), dtype=np.float64)
    es = np.asarray(g.get("ess_bulk", np.nan), dtype=np.float64)
    return diagnostics_dict(
        sampler=True, mean_trace=mean_trace, loglik_trace=loglik,
        divergences=g.get("divergences"), acceptance=g.get("acceptance_rate"), inference="nuts",
        monitor_rows=rows, divergences_per_chain=np.asarray(g.get("divergences", [])),
        acceptance_rate=np.asarray(g.get("acceptance_rate", [])), step_size=np.asarray(g.get("step_size", [])),
        seconds=float(g.get("seconds", np.nan)),
        rhat_theta_max=float(np.max(rh)) if rh.size else float("nan"),
        ess_theta_min=float(np.min(es)) if es.size else float("nan"))
