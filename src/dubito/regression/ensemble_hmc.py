r"""A deep ensemble, then HMC from each member: "optimise, then sample" (Bayesian deep ensembles).

Stage 1 is `DeepEnsembleRegressor`'s training, unchanged (held-out early stopping, the plateau
drop). Stage 2 runs one HMC chain per member (`dubito.regression.member_hmc.batched_hmc`) on the
member's posterior over *all* its weights, on the training rows (never the held-out ones),

    U_l(theta) = sum_i 1/2 [ (y_i - eta_theta(x_i))^2 / sigma_theta^2(x_i) + log sigma_theta^2(x_i) ]
                 + lambda_prior / 2 ||theta||^2,

the sum form of the loss the member was trained on (standardised units; by default
lambda_prior = 1, a N(0, 1) prior on every weight). The predictive is the equal-weight mixture of
the L x S kept draws' components of mean eta(x) and variance sigma^2(x), Student-t with ``tail_df``
degrees of freedom as the ensemble's (Gaussian with ``tail_df=None``): the draws' spread replaces
eq. (36)'s closed-form correction (``correction`` is fixed to "none"); the held-out variance scale
then applies as for the ensemble. The draws are always kept: the estimator's held-out rows cannot judge
them against the trained members, which early stopping chose on those very rows (on boston's
validation rows such a choice kept the members on 3 of 3 splits, where the draws predicted better:
docs/results/ensemble-hmc.md). Where the posterior around the early-stopped weights overfits
(energy: the chains drift to a lower training loss), the draws predict worse. This is the recipe
of MILE (Sommer et al., ICLR 2025; the ``bde`` package), with Metropolis-corrected HMC instead of
the microcanonical sampler.

The chains start in different modes on purpose and are not meant to mix across them, so
``diagnostics_`` judges each chain on its own: split R-hat and bulk ESS, per chain, of the training
log-likelihood and of the predictive mean at up to `MONITOR_ROWS` training rows (the worst over
chains), and the mean acceptance.

Defaults (warm-up 100, 100 iterations kept every 5th, 10 leapfrog steps: 2,000 gradient
evaluations per member on all its rows) were chosen on validation rows of the small UCI sets
(docs/results/ensemble-hmc.md), never on their test rows.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from dubito._estimator import progress_bar
from dubito._validation import check_float, check_int
from dubito.early_stopping import DEFAULT_VALIDATION_FRACTION
from dubito.inference.convergence import diagnostics_dict
from dubito.nn.batched import BatchedGaussianMLP
from dubito.regression.ensemble import DEFAULT_TAIL_DF, DeepEnsembleRegressor
from dubito.regression.member_hmc import batched_hmc

__all__ = ["EnsembleHMCRegressor", "member_potential"]

#: Training rows whose predictive mean is traced for ``diagnostics_``.
MONITOR_ROWS = 20


def member_potential(net: BatchedGaussianMLP, X: torch.Tensor, y: torch.Tensor, prior_precision: float) -> torch.Tensor:
    """U_l of the module docstring for every member, shape (L,): the sum-form training loss
    sum_i l_i + (lambda_prior / 2) ||theta_l||^2 (`dubito.nn.batched.gaussian_nll` times n, plus the prior)."""
    mean, var, _ = net(X)
    u = 0.5 * ((y - mean) ** 2 / var + torch.log(var)).sum(-1)
    return u + sum(0.5 * prior_precision * (p**2).reshape(net.n_members, -1).sum(-1) for p in net.parameters())


class EnsembleHMCRegressor(DeepEnsembleRegressor):
    """`DeepEnsembleRegressor` followed by HMC from each member (module docstring).

    Parameters are the ensemble's (``correction`` is fixed to "none": the draws carry the
    epistemic spread), with defaults of their own, those the sampler's settings were chosen
    with (docs/results/ensemble-hmc.md): ``hidden=(128, 64, 32)``, the paper's net (a chain's cost
    grows with the weights), ``prior_precision=1.0``, the N(0, 1) prior of U_l, and
    ``input_encoding="none"`` (the raw inputs; "auto" would run the chains twice). Beyond them:

    n_warmup : int, default 100 — HMC iterations adapting each chain's step size (dual averaging
        to ``target_accept``; Hoffman & Gelman 2014), discarded.
    n_draws : int, default 100 — iterations after warm-up; every ``thin``-th is kept.
    thin : int, default 5 — so 20 draws per member, 100 mixture components with 5 members.
    n_leapfrog : int, default 10 — leapfrog steps per iteration (Neal 2011's usual order).
    target_accept : float, default 0.8 — Stan's and NUTS' default acceptance target.

    Fitted attributes beyond the ensemble's: ``draws_per_member_``; ``acceptance_`` and
    ``step_size_`` (L,); ``diagnostics_`` (dict, `dubito.inference.convergence`); ``net_`` holds
    the L x S drawn networks (draw s of member l at index s L + l).
    """

    correction = "none"

    def __init__(self, n_members=5, hidden=(128, 64, 32), activation="relu", lr=1e-3, weight_decay=None,
                 prior_precision=1.0, lambda_convention="per_sample", batch_size=64, epochs="auto", lr_drop="plateau",
                 random_bias=False, device="cpu", random_state=None, progress=True, checkpoint_dir=None,
                 checkpoint_every=10, validation_fraction=DEFAULT_VALIDATION_FRACTION, patience="auto",
                 variance_scaling="heldout", tail_df=DEFAULT_TAIL_DF, input_encoding="none", n_warmup=100,
                 n_draws=100, thin=5, n_leapfrog=10, target_accept=0.8):
        super().__init__(n_members=n_members, hidden=hidden, activation=activation, lr=lr,
                         weight_decay=weight_decay, prior_precision=prior_precision,
                         lambda_convention=lambda_convention, batch_size=batch_size,
                         epochs=epochs, lr_drop=lr_drop, correction="none", random_bias=random_bias, device=device,
                         random_state=random_state, progress=progress, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, validation_fraction=validation_fraction,
                         patience=patience, variance_scaling=variance_scaling, tail_df=tail_df,
                         input_encoding=input_encoding)
        del self.correction  # the class attribute: not a constructor setting here
        self.n_warmup = n_warmup
        self.n_draws = n_draws
        self.thin = thin
        self.n_leapfrog = n_leapfrog
        self.target_accept = target_accept

    def _sampler_settings(self) -> dict:
        s = dict(n_warmup=check_int(self.n_warmup, "n_warmup", min_value=0),
                 n_draws=check_int(self.n_draws, "n_draws", min_value=1),
                 thin=check_int(self.thin, "thin", min_value=1),
                 n_leapfrog=check_int(self.n_leapfrog, "n_leapfrog", min_value=1),
                 target_accept=check_float(self.target_accept, "target_accept", strictly_positive=True))
        if s["target_accept"] >= 1.0:
            raise ValueError(f"target_accept must lie in (0, 1), got {s['target_accept']}")
        if s["thin"] > s["n_draws"]:
            raise ValueError(f"thin={s['thin']} keeps no draw of n_draws={s['n_draws']}; use thin <= n_draws")
        return s

    def _settings(self) -> dict:
        return dict(super()._settings(), **self._sampler_settings())

    def _after_training(self, Xs: np.ndarray, ys: np.ndarray, seed: int) -> None:
        """Stage 2: HMC from each trained member on the standardised training rows."""
        s = self._sampler_settings()
        trained = self.net_
        L = trained.n_members
        net = copy.deepcopy(trained)  # the chains move a copy's weights in place
        device = next(trained.parameters()).device
        X = torch.as_tensor(Xs, dtype=torch.float64).to(device)
        y = torch.as_tensor(ys, dtype=torch.float64).to(device)
        params = list(net.parameters())
        lam = float(self.lambda_prior_)

        def potential():
            return member_potential(net, X, y, lam)

        total = s["n_warmup"] + s["n_draws"]
        with progress_bar(bool(self.progress)) as bar:
            task = bar.add_task("HMC from each member", total=total)
            result = batched_hmc(params, potential, n_warmup=s["n_warmup"], n_samples=s["n_draws"], thin=s["thin"],
                                 n_leapfrog=s["n_leapfrog"], target_accept=s["target_accept"],
                                 generator=torch.Generator().manual_seed(seed + 7919),
                                 progress=lambda i: bar.update(task, completed=i + 1))
        S = result.draws[0].shape[0]
        drawn = BatchedGaussianMLP(S * L, trained.n_features, trained.hidden, trained.activation,
                                   generators=[torch.Generator() for _ in range(S * L)], dtype=torch.float64)
        names = [name for name, _ in net.named_parameters()]
        drawn.load_state_dict({name: d.reshape(S * L, *d.shape[2:]) for name, d in zip(names, result.draws)})
        self.net_ = drawn.to(device)
        self.gammas_ = np.zeros(S * L)
        self.draws_per_member_ = S
        self.acceptance_ = result.acceptance.cpu().numpy()
        self.step_size_ = result.step_size.cpu().numpy()
        self.diagnostics_ = self._diagnostics(X[:MONITOR_ROWS], X, y)

    @torch.no_grad()
    def _diagnostics(self, X_monitor, X, y) -> dict:
        """Per-chain split R-hat / bulk ESS (the worst chain) of the training log-likelihood and of
        the predictive mean at the monitored rows, with the mean acceptance."""
        mean, var, _ = self.net_(X)
        S, L = self.draws_per_member_, len(self.acceptance_)
        loglik = (-0.5 * ((y - mean) ** 2 / var + torch.log(2 * np.pi * var)).sum(-1)).reshape(S, L).T.cpu().numpy()
        mon = self.net_(X_monitor)[0].reshape(S, L, -1).permute(1, 0, 2).cpu().numpy()
        per_chain = [diagnostics_dict(sampler=True, mean_trace=mon[l:l + 1], loglik_trace=loglik[l:l + 1])
                     for l in range(L)]
        worst = lambda key, fn: fn([d[key] for d in per_chain])  # noqa: E731
        out = diagnostics_dict(sampler=True, acceptance=self.acceptance_, per_chain=True)
        out.update(rhat_mean=worst("rhat_mean", max), ess_mean=worst("ess_mean", min),
                   rhat_loglik=worst("rhat_loglik", max), ess_loglik=worst("ess_loglik", min),
                   step_size=self.step_size_.tolist())
        out["converged"] = bool(np.isfinite(out["rhat_mean"]) and out["rhat_mean"] <= 1.1)
        return out

    # ------------------------------------------------------------------ persistence
    def _state(self) -> tuple[dict, dict]:
        tensors, settings = super()._state()
        settings["fitted"].update(draws_per_member=self.draws_per_member_, acceptance=self.acceptance_.tolist(),
                                  step_size=self.step_size_.tolist(), diagnostics=self.diagnostics_)
        return tensors, settings

    @classmethod
    def _from_state(cls, tensors, settings, *, device=None, where="", **kwargs) -> EnsembleHMCRegressor:
        est = super()._from_state(tensors, settings, device=device, where=where, **kwargs)
        fitted = settings["fitted"]
        est.draws_per_member_ = int(fitted["draws_per_member"])
        est.acceptance_ = np.asarray(fitted["acceptance"], dtype=np.float64)
        est.step_size_ = np.asarray(fitted["step_size"], dtype=np.float64)
        est.diagnostics_ = dict(fitted["diagnostics"])
        if est.acceptance_.shape != (est.n_members,) or est.step_size_.shape != (est.n_members,):
            raise RuntimeError("inconsistent sampler record")
        return est
