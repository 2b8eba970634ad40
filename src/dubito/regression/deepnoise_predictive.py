"""B-DeepNoise's predictive: the Monte-Carlo mixture over kept states and its variance split by state.

For each kept state θ_m and r = 1..R, noise is pushed through the hidden layers and the last layer is
exact (spec §3.1-3.2), giving component means μ_{m,r}(x) and variances s²_{m,r}(x)
(`state_components`, in row chunks of bounded memory); `StateMixture` is the equal-weight mixture
of those M·R Gaussians with the law-of-total-variance split over states (spec §3.3 [R]).
"""

from __future__ import annotations

import numpy as np
import torch

from dubito.predictive.mixture import GaussianMixture
from dubito.regression.deepnoise_model import forward_moments

__all__ = ["StateMixture", "state_components"]

#: (realisations x rows x width) elements per prediction chunk (2**24 float64 = 128 MB).
_CHUNK_ELEMENTS = 1 << 24


@torch.no_grad()
def state_components(states, Xs: torch.Tensor, act, n_realizations: int, seeds, width: int):
    """Component means and variances, each (N, M·R) on the CPU, standardised units, state-major:
    R = ``n_realizations`` noise draws of each of the M ``states`` (`DeepNoiseParams`) at the
    standardised inputs Xs (N, p), state k's draws from a generator seeded by ``seeds[k]`` and
    common to every row and chunk, so a row's predictive does not depend on the other rows of X or
    their order. ``width`` (the widest layer) sizes the row chunks."""
    R = n_realizations
    dev = Xs.device
    step = max(1, _CHUNK_ELEMENTS // max(1, R * width))
    means, variances = [], []
    for k, state in enumerate(states):
        m_parts, v_parts = [], []
        for start in range(0, Xs.shape[0], step):
            # state k's R noise draws: its own seed, common to every row and chunk, so a row's
            # predictive does not depend on the other rows of X or their order
            gen = torch.Generator(device=dev).manual_seed(seeds[k])
            m, v = forward_moments(state, Xs[start : start + step], act, R, gen, shared=True)
            m_parts.append(m)
            v_parts.append(v)
        means.append(torch.cat(m_parts, dim=1).T.cpu())
        variances.append(torch.cat(v_parts, dim=1).T.cpu())
    return torch.cat(means, dim=1), torch.cat(variances, dim=1)


class StateMixture(GaussianMixture):
    """Equal-weight `GaussianMixture` whose M·R components are R noise realisations of each of
    M posterior states (state-major: component m·R + r). Mean, variance, density, CDF,
    quantiles and sampling are the mixture's; the variance split is by state (spec §3.3 [R]):

        epistemic_i = (1/M) Σ_m (μ̄_im − mean_i)²,   μ̄_im = (1/R) Σ_r μ_imr
        aleatoric_i = (1/M) Σ_m [(1/R) Σ_r s²_imr + (1/R) Σ_r (μ_imr − μ̄_im)²]

    so epistemic + aleatoric = var (the plain mixture would count the spread between noise
    realisations of one state as epistemic).
    """

    def __init__(self, means, variances, n_states: int):
        means = np.asarray(means, dtype=np.float64)
        n_states = int(n_states)
        if means.ndim != 2 or n_states < 1 or means.shape[1] % n_states:
            raise ValueError(
                f"means must be (N, n_states * R); got shape {means.shape} with n_states={n_states}"
            )
        M = means.shape[1]
        super().__init__(np.full(M, 1.0 / M), means, variances)
        self._set_states(n_states)

    def _set_states(self, n_states: int) -> None:
        self.n_states = n_states
        N, M = self._mu.shape
        mu = self._mu.reshape(N, n_states, M // n_states)
        var = self._var_c.reshape(N, n_states, M // n_states)
        state_mean = mu.mean(axis=2)
        epi = ((state_mean - self._mean[:, None]) ** 2).mean(axis=1)
        alea = (var.mean(axis=2) + ((mu - state_mean[:, :, None]) ** 2).mean(axis=2)).mean(axis=1)
        for a in (epi, alea):
            a.setflags(write=False)
        self._epistemic, self._aleatoric = epi, alea

    @property
    def n_realizations(self) -> int:
        return self.n_components // self.n_states

    def _subset(self, index):
        sub = super()._subset(index)
        out = StateMixture.__new__(StateMixture)
        out.__dict__.update(sub.__dict__)
        out._set_states(self.n_states)
        return out

    def __repr__(self) -> str:
        return f"StateMixture(n_inputs={len(self)}, n_states={self.n_states}, n_realizations={self.n_realizations})"
