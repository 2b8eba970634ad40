r"""A Bayesian MLP sampled with NUTS: the "BNN" (HMC) baseline of B-DeepNoise ([P] §3, [78];
spec §4.3, which keeps it optional and small because HMC on a 4 x 50 net is too slow on CPU).

Model, in standardised units (x and y centred and scaled by the training mean and sd, ddof 0;
constant columns get sd 1, [C] ``standardize``):

    y_i = g(x_i; w) + e_i,   e_i ~ N(0, 1/tau),   w_k ~ N(0, prior_sd^2),   tau ~ Gamma(a, b),

g an MLP (``hidden`` widths, ``activation``, linear output). Prior sources: N(0, 1) on every
weight is the common BNN default (TyXe's ``IIDPrior(Normal(0, 1))``, NumPyro's BNN example);
the noise precision prior Gamma(shape 3, rate 1) on standardised y is that of NumPyro's
``examples/bnn.py`` (``prec_obs ~ Gamma(3.0, 1.0)``); [C]'s TFP HMC configuration is not
recoverable (spec §4.3). ``noise_sd`` fixes the noise instead (then the model with
``hidden=()`` is conjugate Bayesian linear regression, which the tests use as the oracle).

Sampling: `dubito.inference.nuts.run_nuts` on the potential -log p(w, log tau | data) over the
unconstrained vector theta = (all weights and biases, log tau) (the Jacobian of log tau is
included: log p(log tau) = a log tau - b tau + const); chains start from PyTorch's
``nn.Linear`` default initialisation U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (each chain its own draw)
and log tau = 0; step size and a diagonal mass matrix are adapted in warm-up (Stan defaults).

Diagnostics: raw-weight R-hat is meaningless for networks (permutation and sign symmetries,
spec pitfall 6), so ``diagnostics_`` reports split R-hat and bulk ESS of the posterior mean
function g(x; w) at up to 20 training inputs and of the noise sd, with divergences and
acceptance rates; a ConvergenceWarning is raised when that R-hat exceeds ``rhat_threshold``
(1.01, Vehtari et al. 2021, as in `run_nuts`) or any transition diverged.

``diagnostics_`` also carries the shared schema of `dubito.inference.convergence` (classic
split R-hat and bulk ESS of the predictive mean at the monitored rows and of the train
log-likelihood (1/N) sum_i log N(y_i; g(x_i; w_s), 1/tau_s), total divergences, mean
acceptance, ``converged`` at R-hat <= 1.1).

Persistence: ``save(path)`` / ``load(path, device=None)`` of the base (`dubito._estimator`):
the draws and the diagnostic traces as safetensors, the settings as JSON (no pickle).

Prediction: the equal-weight mixture over all kept draws (chains x samples),
(1/S) sum_s N(y; g(x; w_s), 1/tau_s), in the user's units, with ``noise_variances`` 1/tau_s.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from dubito import io
from dubito._estimator import DubitoRegressor, seed_base
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
)
from dubito.inference.convergence import diagnostics_dict
from dubito.inference.diagnostics import ConvergenceWarning, ess_bulk, rhat
from dubito.inference.nuts import run_nuts
from dubito.nn.batched import ACTIVATIONS
from dubito.predictive.mixture import GaussianMixture

__all__ = ["N_MONITOR", "NUTSNetworkRegressor"]

#: Training inputs at which the posterior mean function is monitored for R-hat / ESS.
N_MONITOR = 20


def _unpack(theta: torch.Tensor, widths: tuple[int, ...]):
    """theta (S, dim) -> per layer W (S, in, out), b (S, 1, out); the rest (log tau) after."""
    out, pos = [], 0
    S = theta.shape[0]
    for k_in, k_out in zip(widths[:-1], widths[1:]):
        W = theta[:, pos:pos + k_in * k_out].reshape(S, k_in, k_out)
        pos += k_in * k_out
        b = theta[:, pos:pos + k_out].reshape(S, 1, k_out)
        pos += k_out
        out.append((W, b))
    return out, pos


def _forward(theta: torch.Tensor, X: torch.Tensor, widths, act) -> torch.Tensor:
    """g(X; w_s) for every row s of theta (S, dim): (S, N)."""
    layers, _ = _unpack(theta, widths)
    h = X.expand(theta.shape[0], *X.shape)
    for i, (W, b) in enumerate(layers):
        h = torch.baddbmm(b, h, W)
        if i < len(layers) - 1:
            h = act(h)
    return h[:, :, 0]


class NUTSNetworkRegressor(DubitoRegressor):
    """Bayesian MLP regression by NUTS over all weights (and the noise precision).

    Parameters (sources: module docstring)
    ----------
    hidden : tuple of int, default (50,) — a 1 x 50 net (spec §6.2: 4 x 50 is impractical).
    activation : str, default "hardtanh" — a key of ``dubito.nn.batched.ACTIVATIONS``.
    num_warmup, num_samples : int, default 500 each, per chain; num_chains : int, default 2.
    prior_sd : float, default 1.0 — N(0, prior_sd^2) on every weight and bias.
    noise_sd : float or None — fixed noise sd in y units; None samples it.
    noise_prior : (shape, rate), default (3.0, 1.0) — Gamma prior on the noise precision of
        standardised y (NumPyro's BNN example).
    target_accept_prob : float, default 0.8; max_tree_depth : int, default 10 (Pyro/Stan).
    rhat_threshold : float, default 1.01 — see the module docstring.
    random_state : None or int; device : str, default "cpu"; progress : bool, default True.

    Fitted: ``samples_`` (chains, draws, dim) theta in standardised units; ``noise_sd_draws_``
    (chains, draws) in y units; ``monitor_rows_`` (training rows), ``monitor_trace_`` (chains,
    draws, rows) g(x; w_s) there in y units; ``loglik_trace_`` (chains, draws) the mean train
    log-likelihood per draw; ``nuts_info_`` (divergences, acceptance_rate, step_size per chain,
    seconds); ``diagnostics_`` (dict, `_diagnostics`); ``widths_``; ``x_mean_``, ``x_scale_``,
    ``y_mean_``, ``y_scale_``.
    """

    def __init__(self, hidden=(50,), activation="hardtanh", num_warmup=500, num_samples=500, num_chains=2,
                 prior_sd=1.0, noise_sd=None, noise_prior=(3.0, 1.0), target_accept_prob=0.8, max_tree_depth=10,
                 rhat_threshold=1.01, random_state=None, device="cpu", progress=True):
        self.hidden = hidden
        self.activation = activation
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.prior_sd = prior_sd
        self.noise_sd = noise_sd
        self.noise_prior = noise_prior
        self.target_accept_prob = target_accept_prob
        self.max_tree_depth = max_tree_depth
        self.rhat_threshold = rhat_threshold
        self.random_state = random_state
        self.device = device
        self.progress = progress

    def _settings(self) -> dict:
        hidden = check_widths(self.hidden)
        if self.noise_sd is not None:
            check_float(self.noise_sd, "noise_sd", strictly_positive=True)
        try:
            a, b = (float(v) for v in self.noise_prior)
        except (TypeError, ValueError):
            raise ValueError(f"noise_prior must be a pair (shape, rate), got {self.noise_prior!r}") from None
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"noise_prior shape and rate must be positive, got {self.noise_prior!r}")
        tap = check_float(self.target_accept_prob, "target_accept_prob", strictly_positive=True)
        if tap >= 1:
            raise ValueError(f"target_accept_prob must lie in (0, 1), got {tap}")
        check_bool(self.progress, "progress")
        return dict(
            hidden=hidden,
            activation=check_choice(self.activation, "activation", ACTIVATIONS),
            num_warmup=check_int(self.num_warmup, "num_warmup", min_value=0),
            num_samples=check_int(self.num_samples, "num_samples", min_value=1),
            num_chains=check_int(self.num_chains, "num_chains", min_value=1),
            prior_sd=check_float(self.prior_sd, "prior_sd", strictly_positive=True),
            noise_prior=(a, b),
            target_accept_prob=tap,
            max_tree_depth=check_int(self.max_tree_depth, "max_tree_depth", min_value=1),
            rhat_threshold=check_float(self.rhat_threshold, "rhat_threshold", min_value=1.0),
            device=self._device(),
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Sample the posterior on (X, y); X (n, p), y (n,) finite, y not constant. Returns self."""
        s = self._settings()
        X, y = self._validate_fit(X, y, min_samples=2)
        n, p = X.shape
        dev = s["device"]
        f64 = dict(dtype=torch.float64, device=dev)
        Xs, ys = self._fit_scaling(X, y)
        Xs, ys = torch.as_tensor(Xs, **f64), torch.as_tensor(ys, **f64)

        widths = (p, *s["hidden"], 1)
        act = ACTIVATIONS[s["activation"]]
        n_w = sum(k_in * k_out + k_out for k_in, k_out in zip(widths[:-1], widths[1:]))
        learn_noise = self.noise_sd is None
        dim = n_w + int(learn_noise)
        inv_prior_var = 1.0 / s["prior_sd"] ** 2
        a, b = s["noise_prior"]
        fixed_log_tau = None if learn_noise else -2.0 * math.log(float(self.noise_sd) / self.y_scale_)

        def potential(theta: torch.Tensor) -> torch.Tensor:
            w = theta[:n_w]
            resid = ys - _forward(theta[None, :n_w], Xs, widths, act)[0]
            u = 0.5 * inv_prior_var * (w * w).sum()
            if learn_noise:
                log_tau = theta[n_w]
                tau = torch.exp(log_tau)
                u = u + 0.5 * tau * (resid * resid).sum() - 0.5 * n * log_tau - (a * log_tau - b * tau)
            else:
                u = u + 0.5 * math.exp(fixed_log_tau) * (resid * resid).sum()
            return u

        seed = seed_base(self.random_state)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        init = torch.zeros(s["num_chains"], dim, dtype=torch.float64)
        pos = 0
        for k_in, k_out in zip(widths[:-1], widths[1:]):
            m = k_in * k_out + k_out
            init[:, pos:pos + m] = (torch.rand(s["num_chains"], m, generator=gen, dtype=torch.float64) * 2 - 1) / math.sqrt(k_in)
            pos += m
        res = run_nuts(potential, init=init.to(dev), num_samples=s["num_samples"], warmup_steps=s["num_warmup"],
                       num_chains=s["num_chains"], target_accept_prob=s["target_accept_prob"],
                       max_tree_depth=s["max_tree_depth"], seed=seed, device=dev, progress=bool(self.progress),
                       warn=False)
        theta = res.draws  # (chains, draws, dim)
        C, S = theta.shape[:2]
        if learn_noise:
            noise_sd = torch.exp(-0.5 * theta[:, :, n_w]) * self.y_scale_
        else:
            noise_sd = torch.full((C, S), float(self.noise_sd), dtype=torch.float64)
        self.samples_ = theta
        self.noise_sd_draws_ = noise_sd.cpu().numpy()
        self.widths_ = widths
        self.n_weights_ = n_w

        monitor = np.unique(np.round(np.linspace(0, n - 1, min(N_MONITOR, n))).astype(int))
        with torch.no_grad():
            flat = theta.reshape(C * S, dim)[:, :n_w]
            f_mon = _forward(flat, Xs[monitor], widths, act).reshape(C, S, -1)
            # (1/N) sum_i log N(y_i; g(x_i; w_s), noise_sd_s^2) in y units, per draw
            sd_std = torch.as_tensor(self.noise_sd_draws_.reshape(-1) / self.y_scale_, dtype=torch.float64,
                                     device=flat.device)
            step = max(1, (1 << 23) // max(1, n * max(widths)))  # draws per chunk: <= 64 MB activations
            parts = []
            for i in range(0, C * S, step):
                resid = ys[None, :] - _forward(flat[i:i + step], Xs, widths, act)
                sd_i = sd_std[i:i + step, None]
                parts.append((-0.5 * math.log(2 * math.pi) - torch.log(sd_i) - 0.5 * (resid / sd_i) ** 2).mean(1))
            ll = torch.cat(parts) - math.log(self.y_scale_)
        self.monitor_rows_ = monitor
        self.monitor_trace_ = f_mon.cpu().numpy() * self.y_scale_ + self.y_mean_
        self.loglik_trace_ = ll.reshape(C, S).cpu().numpy()
        self.nuts_info_ = dict(divergences=np.asarray(res.divergences), acceptance_rate=np.asarray(res.acceptance_rate),
                               step_size=np.asarray(res.step_size), seconds=float(res.seconds))
        self.diagnostics_ = self._diagnostics(s["rhat_threshold"])
        self._warn(self.diagnostics_)
        return self

    def _diagnostics(self, rhat_threshold: float) -> dict:
        """The shared schema (`dubito.inference.convergence`: split R-hat / bulk ESS of the
        predictive mean at ``monitor_rows_`` and of the train log-likelihood, divergences,
        acceptance) plus this estimator's own keys: rank R-hat / bulk ESS per monitored row
        (``rhat_function``, ``ess_function``) and of the noise sd, their extremes ``max_rhat`` /
        ``min_ess`` (what the ConvergenceWarning reads), per-chain ``divergences_per_chain``,
        ``acceptance_rate``, ``step_size``, ``seconds``."""
        info = self.nuts_info_
        f_mon, noise = self.monitor_trace_, self.noise_sd_draws_
        C, S = noise.shape
        learn_noise = self.noise_sd is None
        extra = dict(monitor_rows=self.monitor_rows_, divergences_per_chain=info["divergences"],
                     acceptance_rate=info["acceptance_rate"], step_size=info["step_size"], seconds=info["seconds"],
                     rhat_threshold=rhat_threshold,
                     rhat_function=np.full(f_mon.shape[2], np.nan), ess_function=np.full(f_mon.shape[2], np.nan),
                     rhat_noise=float("nan"), ess_noise=float("nan"))
        if C * S >= 8 and S >= 4:
            extra["rhat_function"] = np.atleast_1d(rhat(f_mon))
            extra["ess_function"] = np.atleast_1d(ess_bulk(f_mon))
            if learn_noise:
                extra["rhat_noise"] = float(rhat(noise))
                extra["ess_noise"] = float(ess_bulk(noise))
        r_all = np.r_[extra["rhat_function"], extra["rhat_noise"]]
        e_all = np.r_[extra["ess_function"], extra["ess_noise"]]
        extra["max_rhat"] = float(np.nanmax(r_all)) if np.any(np.isfinite(r_all)) else float("nan")
        extra["min_ess"] = float(np.nanmin(e_all)) if np.any(np.isfinite(e_all)) else float("nan")
        return diagnostics_dict(sampler=True, mean_trace=f_mon, loglik_trace=self.loglik_trace_,
                                divergences=info["divergences"], acceptance=info["acceptance_rate"], **extra)

    @staticmethod
    def _warn(diag: dict) -> None:
        n_div = int(diag["divergences"])
        if n_div:
            warnings.warn(f"NUTSNetworkRegressor: {n_div} divergent transition(s) after warm-up; the draws may "
                          "be biased — raise target_accept_prob", ConvergenceWarning, stacklevel=3)
        worst = diag["max_rhat"]
        if math.isfinite(worst) and worst > diag["rhat_threshold"]:
            warnings.warn(f"NUTSNetworkRegressor: max R-hat of the mean function / noise {worst:.3f} > "
                          f"{diag['rhat_threshold']} — chains have not mixed; run longer", ConvergenceWarning,
                          stacklevel=3)

    # ------------------------------------------------------------------ predict
    def _draws(self, n_samples, random_state) -> np.ndarray:
        """Indices of the kept draws (chain-major): all for ``n_samples`` None or >= their number,
        else n of them without replacement, sorted, by ``numpy.random.default_rng(random_state)``."""
        check_fitted(self, ["samples_"])
        total = self.samples_.shape[0] * self.samples_.shape[1]
        if n_samples is None:
            return np.arange(total)
        n = check_int(n_samples, "n_samples", min_value=1)
        if n >= total:
            return np.arange(total)
        return np.sort(np.random.default_rng(random_state).choice(total, size=n, replace=False))

    def sample_parameters(self, n_samples=None, *, random_state=0) -> np.ndarray:
        """The network weights w_s of the kept draws `sample_functions` picks (standardised units),
        float64 (S', n_weights_)."""
        idx = self._draws(n_samples, random_state)
        theta = self.samples_.reshape(-1, self.samples_.shape[-1])[:, :self.n_weights_]
        return theta[torch.as_tensor(idx, device=theta.device)].cpu().numpy()

    @torch.no_grad()
    def sample_functions(self, X, n_samples=None, *, random_state=0) -> np.ndarray:
        """g(x; w_s) for the kept draws (chains x samples, chain-major), y units: (S', N). All of them
        by default; ``n_samples``: that many, picked by ``random_state`` (the same draws for any X)."""
        Xs = self._standardise(X, fitted_attributes=["samples_"])
        theta = self.samples_.reshape(-1, self.samples_.shape[-1])[:, :self.n_weights_]
        if n_samples is not None:
            theta = theta[torch.as_tensor(self._draws(n_samples, random_state), device=theta.device)]
        Xs = torch.as_tensor(Xs, dtype=torch.float64, device=theta.device)
        act = ACTIVATIONS[self.activation]
        step = max(1, (1 << 23) // max(1, Xs.shape[0] * max(self.widths_)))
        out = [_forward(theta[i:i + step], Xs, self.widths_, act).cpu() for i in range(0, theta.shape[0], step)]
        return torch.cat(out).numpy() * self.y_scale_ + self.y_mean_

    def predict_distribution(self, X) -> GaussianMixture:
        """(1/S) sum_s N(y; g(x; w_s), noise_sd_s^2) over all kept draws, y units; ``predict``
        (the base's) is its mean."""
        f = self.sample_functions(X).T  # (N, S)
        var = np.broadcast_to(self.noise_sd_draws_.reshape(1, -1) ** 2, f.shape)
        return GaussianMixture(np.full(f.shape[1], 1.0 / f.shape[1]), f, var, noise_variances=var)

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict, dict]:
        """Tensors: all kept draws (``samples``), the noise sd draws, the scaling, the diagnostic
        traces and ``nuts.*``; settings ``params`` and ``fitted`` (the common record, widths,
        n_weights, seconds, rhat_threshold)."""
        info = self.nuts_info_
        fitted = dict(self._common_fitted(), widths=[int(w) for w in self.widths_], n_weights=int(self.n_weights_),
                      seconds=float(info["seconds"]), rhat_threshold=float(self.diagnostics_["rhat_threshold"]))
        tensors = {"samples": self.samples_.to(torch.float64),
                   "monitor_rows": torch.as_tensor(np.asarray(self.monitor_rows_), dtype=torch.int64)}
        tensors.update(self._scaling_tensors())
        for key in ("noise_sd_draws", "monitor_trace", "loglik_trace"):
            tensors[key] = torch.as_tensor(np.asarray(getattr(self, key + "_"), dtype=np.float64))
        for key in ("divergences", "acceptance_rate", "step_size"):
            tensors[f"nuts.{key}"] = torch.as_tensor(np.asarray(info[key], dtype=np.float64))
        return tensors, {"params": io.json_params(self), "fitted": fitted}

    @classmethod
    def _from_state(cls, tensors, settings, *, device=None, where="", **kwargs) -> "NUTSNetworkRegressor":
        """Inverse of `_state` (files of older versions: y_mean / y_scale in ``fitted``); a file
        whose shapes do not fit together raises RuntimeError (one ValueError from `load`)."""
        fitted = settings["fitted"]
        est = cls(**io.params_from_json(settings["params"], tuples=("hidden", "noise_prior"), device=device))
        s = est._settings()
        p = est._restore_common(fitted)
        est._restore_scaling(tensors, fitted, p)
        widths = tuple(int(w) for w in fitted["widths"])
        n_w = sum(k_in * k_out + k_out for k_in, k_out in zip(widths[:-1], widths[1:]))
        est.samples_ = tensors["samples"].to(s["device"], torch.float64)
        est.noise_sd_draws_ = tensors["noise_sd_draws"].double().numpy()
        est.monitor_rows_ = tensors["monitor_rows"].numpy().astype(np.intp)
        est.monitor_trace_ = tensors["monitor_trace"].double().numpy()
        est.loglik_trace_ = tensors["loglik_trace"].double().numpy()
        est.nuts_info_ = dict(divergences=tensors["nuts.divergences"].numpy().astype(np.int64),
                              acceptance_rate=tensors["nuts.acceptance_rate"].double().numpy(),
                              step_size=tensors["nuts.step_size"].double().numpy(),
                              seconds=float(fitted["seconds"]))
        est.widths_, est.n_weights_ = widths, int(fitted["n_weights"])
        C, S = est.noise_sd_draws_.shape
        if not (widths == (p, *s["hidden"], 1) and est.n_weights_ == n_w
                and tuple(est.samples_.shape) == (C, S, n_w + int(est.noise_sd is None))
                and est.monitor_trace_.shape == (C, S, est.monitor_rows_.size)
                and est.loglik_trace_.shape == (C, S) and est.nuts_info_["divergences"].shape == (C,)):
            raise RuntimeError("inconsistent tensor shapes")
        est.diagnostics_ = est._diagnostics(float(fitted["rhat_threshold"]))
        return est
