"""Joint posterior draws of a deep ensemble with the Bayesian correction: Algorithm 2 of Hoffmann &
Elster (2021), in closed form per member (`DeepEnsembleRegressor.sample_posterior`).

Per draw: l ~ U{1..k}; W ~ N(W_l, gamma_l I); eta(x) = W h_l(x) + b_l for every row x;
y ~ N(eta(x), sigma_l^2(x)), or eta(x) + sigma_l(x) sqrt((nu - 2) / nu) T with T ~ t_nu for Student-t
components (so sigma_l^2(x) stays the variance).
"""

from __future__ import annotations

import numpy as np

__all__ = ["sample_members"]

#: Draws x rows x features per block: keeps the (draws, rows, p_h) gather under ~32 MB of float64.
_BLOCK_ELEMENTS = 1 << 22


def sample_members(mean, var, h, sd_w, n_samples: int, *, target: str, tail_df, rng) -> np.ndarray:
    """(n_samples, N) joint draws in standardised units from the members' eta_l(x) ``mean`` (k, N),
    noise variances ``var`` (k, N), last-layer features ``h`` (k, N, p_h) and weight sds ``sd_w`` (k,)
    (sqrt(gamma_l); zeros for the conventional ensemble). ``target="eta"`` stops before the noise."""
    k, N, p = h.shape
    out = np.empty((n_samples, N))
    step = max(1, _BLOCK_ELEMENTS // max(1, N * p))
    for start in range(0, n_samples, step):
        m = min(step, n_samples - start)
        member = rng.integers(k, size=m)
        E = rng.standard_normal((m, p))
        eta = mean[member] + sd_w[member, None] * np.einsum("mp,mnp->mn", E, h[member])
        if target == "y" and tail_df is None:
            eta = eta + np.sqrt(var[member]) * rng.standard_normal((m, N))
        elif target == "y":
            nu = float(tail_df)
            eta = eta + np.sqrt(var[member] * (nu - 2) / nu) * rng.standard_t(nu, (m, N))
        out[start : start + m] = eta
    return out
