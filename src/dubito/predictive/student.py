r"""Per-input mixture of Student-t components with given means and variances.

    p(y | x_i) = sum_m w_im t_nu(y; mu_im, s_im),   s_im^2 = sigma_im^2 (nu - 2) / nu,

t_nu(y; mu, s) the location-scale Student-t density with nu > 2 degrees of freedom. The scale
is set so that each component keeps the variance sigma_im^2 of a Gaussian one: the mixture has
the mean, variance and variance decomposition of `GaussianMixture` with the same arguments, and
only its tails are heavier (a t_nu is a Gaussian whose precision is Gamma(nu/2, nu/2)
distributed: the component variance itself is uncertain). What the deep ensembles return with
``tail_df`` (`dubito.regression.ensemble`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp, stdtr, stdtrit

from dubito.predictive.base import StoredMoments
from dubito.predictive.mixture import GaussianMixture, _row_blocks, draw_components

__all__ = ["StudentTMixture", "check_df"]


def check_df(df) -> float:
    """nu as a float > 2 (a finite variance), else one ValueError naming it."""
    if isinstance(df, bool) or not isinstance(df, (int, float, np.integer, np.floating)):
        raise ValueError(f"df (the Student-t degrees of freedom) must be a number > 2, got {df!r}")
    df = float(df)
    if not (math.isfinite(df) and df > 2):
        raise ValueError(f"df (the Student-t degrees of freedom) must be finite and > 2 (a finite variance), got {df}")
    return df


class StudentTMixture(StoredMoments):
    r"""Per-input mixture of Student-t components (module docstring), all with ``df`` = nu.

    * mean, var, epistemic_var and aleatoric_var: those of ``GaussianMixture(weights, means,
      variances, noise_variances=...)`` (each component keeps its variance)
    * log p(y) = logsumexp_m [log w_m + log t_nu((y - mu_m) / s_m) - log s_m]
    * F(y) = sum_m w_m T_nu((y - mu_m) / s_m)   (T_nu: `scipy.special.stdtr`)
    * F^{-1}(q): bisection inside the bracket [min_m, max_m] of the component quantiles
      mu_m + s_m T_nu^{-1}(q) (F is at most q at the lower end and at least q at the upper), to
      1e-10 of the smallest component scale; exact for one component
    * sampling: component by its weight, then mu_m + s_m T with T ~ t_nu

    Parameters
    ----------
    weights, means, variances, noise_variances : as `GaussianMixture` (variances are the
        component variances, not the squared scales).
    df : float > 2, the degrees of freedom nu shared by every component.
    """

    def __init__(self, weights, means, variances, df, *, noise_variances=None):
        self._init(GaussianMixture(weights, means, variances, noise_variances=noise_variances), check_df(df))

    def _init(self, gauss: GaussianMixture, df: float) -> None:
        self._gauss, self._df = gauss, df
        self._mean, self._var, self._std = gauss.mean, gauss.var, gauss.std
        self._epistemic, self._aleatoric = gauss.epistemic_var, gauss.aleatoric_var
        factor = math.sqrt((df - 2.0) / df)  # the Gaussian twin's sds, logs and log weights, rescaled
        self._scale = gauss._sd * factor
        self._log_scale = gauss._logsd + math.log(factor)
        self._logw = gauss._logw
        self._log_norm = gammaln((df + 1) / 2) - gammaln(df / 2) - 0.5 * math.log(df * math.pi)

    # ------------------------------------------------------------------ parameters
    @property
    def df(self) -> float:
        """nu, the degrees of freedom of every component."""
        return self._df

    @property
    def weights(self) -> np.ndarray:
        """Normalised component weights, (N, M), read-only."""
        return self._gauss.weights

    @property
    def means(self) -> np.ndarray:
        """Component means, (N, M), read-only."""
        return self._gauss.means

    @property
    def variances(self) -> np.ndarray:
        """Component variances sigma^2, (N, M), read-only (the squared scales are sigma^2 (nu - 2) / nu)."""
        return self._gauss.variances

    @property
    def noise_variances(self) -> np.ndarray | None:
        """Observation-noise part of each component variance, (N, M), or None."""
        return self._gauss.noise_variances

    @property
    def n_components(self) -> int:
        return self._gauss.n_components

    # ------------------------------------------------------------------ distribution
    def _log_prob(self, y: np.ndarray) -> np.ndarray:
        n, k = y.shape
        mu, s, out = self.means, self._scale, np.empty((n, k))
        half = (self._df + 1) / 2
        for b in _row_blocks(n, k * mu.shape[1]):
            z = (y[b, :, None] - mu[b, None, :]) / s[b, None, :]
            a = self._logw[b, None, :] - self._log_scale[b, None, :] - half * np.log1p(z * z / self._df)
            out[b] = logsumexp(a, axis=-1)
        return out + self._log_norm

    def _cdf(self, y: np.ndarray) -> np.ndarray:
        n, k = y.shape
        mu, s, w, out = self.means, self._scale, self.weights, np.empty((n, k))
        for b in _row_blocks(n, k * mu.shape[1]):
            t = stdtr(self._df, (y[b, :, None] - mu[b, None, :]) / s[b, None, :])
            out[b] = np.einsum("nkm,nm->nk", t, w[b])
        return np.clip(out, 0.0, 1.0)

    def _quantile(self, q: np.ndarray, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
        qc = np.clip(q, 1e-300, 1 - 1e-16)
        mu, s = self.means, self._scale
        zq = stdtrit(self._df, qc)  # (N, k)
        if mu.shape[1] == 1:
            return mu[:, :1] + s[:, :1] * zq
        ends = mu[:, None, :] + s[:, None, :] * zq[:, :, None]  # (N, k, M)
        live = (self.weights > 0)[:, None, :]
        lo = np.where(live, ends, np.inf).min(axis=-1)
        hi = np.where(live, ends, -np.inf).max(axis=-1)
        return self._bisect(lo, hi, qc, tol * s.min(axis=1)[:, None], max_iter)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        idx = draw_components(np.asarray(self.weights), n, rng)  # (n, N)
        cols = np.arange(len(self))[None, :]
        return self.means[cols, idx] + self._scale[cols, idx] * rng.standard_t(self._df, size=idx.shape)

    def _subset(self, index: np.ndarray) -> "StudentTMixture":
        obj = StudentTMixture.__new__(StudentTMixture)
        obj._init(self._gauss._subset(index), self._df)
        return obj

    def __repr__(self) -> str:
        return f"StudentTMixture(n_inputs={len(self)}, n_components={self.n_components}, df={self._df:g})"
