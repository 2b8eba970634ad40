r"""Predictive from S draws of the prediction at each input (posterior samples, dropout masks).

Two readings of the same draws f_1..f_S (shape (S, N)):

* with ``noise_std`` (the model's observation noise, per draw and/or input): the exact
  predictive of that model, the equal-weight Gaussian mixture
  p(y | x_i) = (1/S) sum_s N(y; f_si, s_si^2), delegated to ``GaussianMixture``;
* without it: a Gaussian kernel density estimate of the draws,
  p(y | x_i) = (1/S) sum_s N(y; f_si, h_i^2), the same mixture with one bandwidth h_i.
"""

from __future__ import annotations

import numpy as np

from dubito.predictive.base import StoredMoments, as_numpy
from dubito.predictive.mixture import GaussianMixture
from dubito.predictive.normal import _frozen, _require_finite, _require_positive

__all__ = ["Samples"]

#: Relative bandwidth given to an input whose draws are all equal (our choice: sqrt of the
#: float64 resolution, i.e. a near point mass that still has a finite density and CDF).
_H_FLOOR = float(np.sqrt(np.finfo(np.float64).eps))


class Samples(StoredMoments):
    r"""Predictive built from draws (S, N) of the prediction at N inputs.

    With ``noise_std`` s (scalar, (S,), (N,) or (S, N); broadcast to (S, N)): the
    equal-weight Gaussian mixture over draws, p(y | x_i) = (1/S) sum_s N(y; f_si, s_si^2)
    (``as_mixture()`` returns it). mean_i = (1/S) sum_s f_si;
    epistemic_var_i = Var_s(f_si) (ddof=0); aleatoric_var_i = (1/S) sum_s s_si^2;
    var = epistemic + aleatoric (law of total variance). A 1-D ``noise_std`` whose length
    is both S and N is ambiguous and refused: pass shape (S, 1) or (1, N).

    Without ``noise_std``: a Gaussian KDE per input, p(y | x_i) = (1/S) sum_s N(y; f_si, h_i^2)
    with bandwidth

    * ``"scott"`` (default): h_i = sd_i S^(-1/5)  (Scott 1992, *Multivariate Density
      Estimation*; exactly ``scipy.stats.gaussian_kde``'s default in 1-D),
    * ``"silverman"``: h_i = sd_i (3S/4)^(-1/5)  (Silverman 1986, as in scipy's
      ``bw_method="silverman"``),
    * a positive float (the same absolute h for every input) or a positive (N,) array,

    where sd_i is the standard deviation of the draws with ddof=1, as scipy uses. An input
    whose draws are all equal (h_i <= 16 eps max_s |f_si|, below what y - f can resolve)
    gets h_i = sqrt(eps) max(max_s |f_si|, 1) instead (eps = float64 resolution; our
    choice): a near point mass with a finite density. The rules need S >= 2.
    mean_i = (1/S) sum_s f_si and var_i = Var_s(f_si) (ddof=0) + h_i^2 (the KDE's exact
    variance); ``epistemic_var``/``aleatoric_var`` are None (a KDE does not know the split).
    Sampling picks a draw uniformly and adds h_i Z (or s_si Z), Z ~ N(0, 1).
    """

    def __init__(self, draws, *, noise_std=None, bandwidth="scott"):
        draws = as_numpy(draws, "draws")
        if draws.ndim != 2 or min(draws.shape) < 1:
            raise ValueError(
                f"draws must have shape (S, N) (S draws at N inputs, both >= 1), got {draws.shape}"
            )
        _require_finite(draws, "draws")
        s, n = draws.shape
        self._draws = _frozen(draws)
        self._mean = _frozen(draws.mean(axis=0))
        spread = draws.var(axis=0)  # ddof=0
        self._mixture = None
        self.bandwidth = bandwidth

        if noise_std is not None:
            noise = self._broadcast_noise(noise_std, s, n)
            self._noise_std = _frozen(noise)
            self._bandwidth = None
            self._epistemic = _frozen(spread)
            self._aleatoric = _frozen(np.mean(noise * noise, axis=0))
            self._var = _frozen(self._epistemic + self._aleatoric)
        else:
            h = self._bandwidth_from(bandwidth, draws, n)
            self._noise_std = None
            self._bandwidth = _frozen(h)
            self._epistemic = self._aleatoric = None
            self._var = _frozen(spread + h * h)
        self._std = _frozen(np.sqrt(self._var))

    # ------------------------------------------------------------------ validation
    @staticmethod
    def _broadcast_noise(noise_std, s: int, n: int) -> np.ndarray:
        arr = as_numpy(noise_std, "noise_std")
        if arr.ndim == 1:
            if arr.shape[0] == s and s == n and s > 1:
                raise ValueError(
                    f"noise_std of shape {arr.shape} is ambiguous when S = N = {s} (per draw or "
                    f"per input?): pass shape ({s}, 1) for per-draw or (1, {n}) for per-input noise"
                )
            if arr.shape[0] == s:
                arr = arr[:, None]
            elif arr.shape[0] == n:
                arr = arr[None, :]
        ok = arr.ndim <= 2 and all(a in (1, b) for a, b in zip(arr.shape[::-1], (n, s)))
        if not ok:
            raise ValueError(
                f"noise_std must be a scalar or have shape ({s},), ({n},) or ({s}, {n}) "
                f"to match draws ({s}, {n}), got {as_numpy(noise_std).shape}"
            )
        _require_positive(arr, "noise_std")
        return np.broadcast_to(arr, (s, n))

    @staticmethod
    def _bandwidth_from(bandwidth, draws: np.ndarray, n: int) -> np.ndarray:
        s = draws.shape[0]
        if isinstance(bandwidth, str):
            rule = bandwidth.lower()
            if rule == "scott":
                factor = s ** (-1.0 / 5.0)
            elif rule == "silverman":
                factor = (3.0 * s / 4.0) ** (-1.0 / 5.0)
            else:
                raise ValueError(
                    f"bandwidth must be 'scott', 'silverman', a positive float or a positive "
                    f"({n},) array, got {bandwidth!r}"
                )
            if s < 2:
                raise ValueError(
                    f"bandwidth rule {bandwidth!r} needs at least 2 draws per input, got {s}; "
                    "pass an explicit bandwidth or noise_std"
                )
            h = draws.std(axis=0, ddof=1) * factor
            size = np.abs(draws).max(axis=0)
            # all equal, or equal up to float resolution (h could not be resolved in y - f)
            equal = ~(h > 16 * np.finfo(np.float64).eps * size) | (h < np.finfo(np.float64).tiny)
            return np.where(equal, _H_FLOOR * np.maximum(size, 1.0), h)
        h = as_numpy(bandwidth, "bandwidth")
        if h.ndim == 0:
            h = np.full(n, float(h))
        if h.shape != (n,):
            raise ValueError(
                f"bandwidth must be 'scott', 'silverman', a positive float or a positive ({n},) "
                f"array, got shape {h.shape}"
            )
        _require_positive(h, "bandwidth")
        return h

    # ------------------------------------------------------------------ parameters
    @property
    def draws(self) -> np.ndarray:
        """The draws, (S, N), read-only."""
        return self._draws

    @property
    def n_draws(self) -> int:
        return int(self._draws.shape[0])

    @property
    def bandwidth_(self) -> np.ndarray | None:
        """KDE bandwidth h_i per input, (N,); None when ``noise_std`` was given."""
        return self._bandwidth

    @property
    def noise_std(self) -> np.ndarray | None:
        """Per-draw observation-noise std broadcast to (S, N), or None (KDE)."""
        return self._noise_std

    def as_mixture(self) -> GaussianMixture:
        """The same predictive as an equal-weight ``GaussianMixture`` over the draws.

        With ``noise_std``: components N(f_si, s_si^2), all of it noise, so the mixture's
        epistemic/aleatoric split equals this object's. For a KDE: components N(f_si, h_i^2);
        the mixture then reports the generic total-variance split (Var of draws, h^2),
        which this object does not claim.
        """
        if self._mixture is None:
            s, n = self._draws.shape
            w = np.broadcast_to(np.full((1, 1), 1.0 / s), (n, s))
            mu = _frozen(self._draws.T)
            if self._noise_std is None:
                var = np.broadcast_to((self._bandwidth**2)[:, None], (n, s))
                noise = None
            else:
                var = _frozen((self._noise_std**2).T)
                noise = var
            self._mixture = GaussianMixture._from_arrays(w, mu, var, noise)
        return self._mixture

    # ------------------------------------------------------------------ distribution
    def _log_prob(self, y: np.ndarray) -> np.ndarray:
        return self.as_mixture()._log_prob(y)

    def _cdf(self, y: np.ndarray) -> np.ndarray:
        return self.as_mixture()._cdf(y)

    def _quantile(self, q: np.ndarray, tol: float = 1e-10, max_iter: int = 400) -> np.ndarray:
        return self.as_mixture()._quantile(q, tol, max_iter)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        s, m = self._draws.shape
        idx = rng.integers(s, size=(n, m))
        cols = np.arange(m)[None, :]
        scale = self._bandwidth[None, :] if self._noise_std is None else self._noise_std[idx, cols]
        return self._draws[idx, cols] + scale * rng.standard_normal((n, m))

    def _subset(self, index: np.ndarray) -> "Samples":
        if self._noise_std is None:
            out = Samples(self._draws[:, index], bandwidth=self._bandwidth[index])
        else:
            out = Samples(self._draws[:, index], noise_std=self._noise_std[:, index])
        out.bandwidth = self.bandwidth
        return out

    def __repr__(self) -> str:
        kind = "kde" if self._noise_std is None else "mixture"
        return f"Samples(n_inputs={len(self)}, n_draws={self.n_draws}, {kind})"
