"""Registry of the methods: one name per method for the CLI, the experiments and the reports.

Each entry names an estimator class of `dubito.regression`, the settings that define the method
(``fixed``: e.g. the ensemble's correction) and a one-line description (shown by ``dubito
methods``, ``dubito run --help`` and in the README's methods table). Two ways to build one:

* ``Method.make(random_state, device, progress, **overrides)``: what ``dubito run``, the
  leaderboard and the recalibration experiment fit: the estimator's own (validated) defaults, and
  a CLI-sized budget (``cli``) where those defaults are a paper's protocol that takes tens of
  minutes on a CPU;
* ``Method.build(**settings)``: the estimator with its own defaults and the given settings only,
  no CLI budget: what the paper experiments fit with their protocols' settings.

A new method is one entry here; an experiment whose rows are configurations of a method (the
paper's "BP" is a one-member mean-variance net) names the entry it builds on in its vocabulary.

``METHODS`` are the regressors (``dubito run --method``); ``CLASSIFIERS`` the classifiers, which
the thesis experiment builds through `get_classifier` (``dubito run`` is regression only).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from dubito.classification import (
    DeepEnsembleClassifier,
    KFACLaplace,
    MCDropoutClassifier,
)
from dubito.regression import (
    DeepEnsembleRegressor,
    DeepNoiseRegressor,
    DeepNoiseSGDRegressor,
    DeterministicRegressor,
    EnsembleHMCRegressor,
    HyperVIRegressor,
    ImplicitCopulaRegressor,
    LastLayerLaplaceRegressor,
    MCDropoutRegressor,
    MeanFieldVIRegressor,
    MixtureDensityRegressor,
    NaiveRegressor,
    NUTSNetworkRegressor,
)

_RUN_KEYS = ("random_state", "device", "progress")


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    estimator: type
    paper: str
    #: settings that define the method (not overridable: another value is another method)
    fixed: dict[str, Any] = field(default_factory=dict)
    #: the CLI's budget where the estimator's defaults are a paper's CPU-hours protocol
    cli: dict[str, Any] = field(default_factory=dict)

    def build(self, **settings) -> Any:
        """An unfitted estimator: the class's defaults, the method's ``fixed`` settings and ``settings``."""
        clash = sorted(k for k in settings if k in self.fixed and settings[k] != self.fixed[k])
        if clash:
            raise ValueError(f"method {self.name!r} fixes {', '.join(f'{k}={self.fixed[k]!r}' for k in clash)}; "
                             f"another value is another method (see `dubito methods`)")
        return self.estimator(**{**self.fixed, **settings})

    def make(self, random_state=0, device="cpu", progress=True, **overrides) -> Any:
        """An unfitted estimator as ``dubito run`` fits it: ``build`` with the CLI budget (``cli``),
        then ``overrides``; seed, device and progress where the estimator takes them."""
        accepted = inspect.signature(self.estimator).parameters
        run = {k: v for k, v in zip(_RUN_KEYS, (random_state, device, progress)) if k in accepted}
        settings = {**self.cli, **overrides}
        if "epochs" in settings and "epochs" not in accepted:  # the naive learner: nothing to train
            settings.pop("epochs")
        return self.build(**run, **settings)


# The CLI's one-split `dubito run` budgets where an estimator's defaults are the paper's protocol
# and take tens of minutes on a CPU (the experiments keep the paper's settings).
# B-DeepNoise: 4x50 with SGD init: ~7.5 min per 1,000 Adam steps of each chain's init, 0.064 s per sweep at
# N = 1000 (one core). 2x20, split 0, one core (issue 19): random init with 500 + 500 sweeps ended on yacht at
# R-hat 3.19 of the predictive mean, RMSE 5.2, a 95 % band down to -18; a 300-epoch SGD init per chain and
# 2,000 + 2,000 sweeps (100 states kept per chain, as before) give RMSE ~1.0 with the band >= -0.4. No setting
# tried mixed within minutes (R-hat 1.3-2.2, up to 10,000 + 5,000 sweeps): `dubito run` says so
# (dubito.inference.convergence).
_DEEPNOISE_CLI = dict(hidden=(20, 20), n_chains=2, n_burnin=2000, n_keep=2000, thin=20, init="sgd", sgd_epochs=300)

# NUTS: the estimator's 50 units and tree depth 10 took about 1 s per iteration on diabetes (33 min for
# 2 x 1,000); split 0, one core (2026-11-27): 20 units, depth <= 6: diabetes 139 s, max R-hat 1.06, ESS 66,
# NLL 5.42, coverage@95 0.955; yacht 139 s, R-hat 1.26 (not mixed: `dubito run` says so), NLL 1.51,
# coverage 1.00 (50 units, depth 6: diabetes 142 s, R-hat 1.11; yacht 217 s, R-hat 1.22, NLL 1.56).
_NUTS_CLI = dict(hidden=(20,), max_tree_depth=6)

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        # the estimator's validated defaults (held-out share, early stopping): coverage@95 0.92-1.00 over
        # diabetes splits 0-9, where the paper's fixed epochs gave 0.64-0.84
        Method("ensemble", "deep ensemble (5 members, mean+variance heads, Student-t components) with the Bayesian "
               "epistemic correction",
               DeepEnsembleRegressor, "Hoffmann & Elster 2021", fixed=dict(correction="bayes")),
        Method("ensemble-hmc", "deep ensemble (5 members), then HMC over all weights from each member "
               "(optimise, then sample: 20 draws each)", EnsembleHMCRegressor, "Sommer et al. 2025 (MILE, bde)"),
        Method("ensemble-standard", "deep ensemble (5 members) as Lakshminarayanan et al. 2017, no correction",
               DeepEnsembleRegressor, "Lakshminarayanan et al. 2017",
               fixed=dict(correction="none", tail_df=None, input_encoding="none")),
        Method("mean-variance", "one network with mean and variance heads trained by the Gaussian NLL "
               "(the B-DeepNoise paper's BP)", DeepEnsembleRegressor, "Nix & Weigend 1994",
               fixed=dict(n_members=1, correction="none", tail_df=None, input_encoding="none")),
        Method("mc-dropout", "MC dropout (p = 0.05, or 0.01 where the held-out rows prefer it; 1000 masks) "
               "with a homoscedastic noise from held-out residuals",
               MCDropoutRegressor, "Gal & Ghahramani 2016"),
        Method("mdn", "mixture density network, 50 Gaussian components, their variances scaled on held-out rows",
               MixtureDensityRegressor, "Bishop 1994"),
        Method("deterministic", "plain MLP (MSE) with a homoscedastic Gaussian noise from training residuals",
               DeterministicRegressor, "Hoffmann & Klein 2023 (Deterministic DNN)"),
        Method("laplace", "plain MLP, then a last-layer Laplace: exact Bayesian linear regression on its last "
               "hidden layer, prior precision and noise by the marginal likelihood", LastLayerLaplaceRegressor,
               "MacKay 1992; Daxberger et al. 2021 (laplace-torch)"),
        Method("deepnoise", "B-DeepNoise Gibbs sampler, 2x20 hard tanh, 300-epoch SGD init, 2 chains x (2,000 "
               "burn-in + 2,000 kept, thin 20) (CLI-sized; the paper's 4x50: dubito bench deepnoise); says when "
               "chains have not mixed", DeepNoiseRegressor, "Zhang, Liu & Kang 2022", cli=_DEEPNOISE_CLI),
        Method("deepnoise-sgd", "frequentist DeepNoise (4x50 hard tanh, latent noise, MC-mixture NLL, Adam, "
               "300 epochs)", DeepNoiseSGDRegressor, "Zhang, Liu & Kang 2022 (the sampler's initialiser)",
               cli=dict(epochs=300, batch_size=100)),
        Method("mfvi", "mean-field Gaussian VI over the weights (Bayes by backprop), 4x50 hard tanh, early stopping, "
               "noise variance scaled on held-out rows",
               MeanFieldVIRegressor, "Blundell et al. 2015"),
        Method("nuts", "NUTS over the weights of a one-layer net (20 hard tanh), 2 chains x (500 warm-up + 500 "
               "draws), tree depth <= 6, Pyro (CLI-sized); says when chains have not mixed", NUTSNetworkRegressor,
               "Neal 1996; Hoffman & Gelman 2014 (the B-DeepNoise paper's BNN, Pequignot et al.'s HMC)",
               cli=_NUTS_CLI),
        Method("hyvi", "FuNN-HyVI: hypernetwork implicit VI, k-NN KL in predictor space, learned noise, early "
               "stopping", HyperVIRegressor, "Pequignot et al."),
        Method("icnlm", "implicit copula neural linear model: KDE marginal, MLP on z, ridge prior and a random "
               "intercept, VI (10 features), latent variance scaled on held-out rows",
               ImplicitCopulaRegressor, "Hoffmann & Klein 2023"),
        Method("naive", "constant prediction 0 with the residual variance mean(y^2) (the naive learner)",
               NaiveRegressor, "Hoffmann & Klein 2023 (naive learner)"),
    )
}


def _lookup(registry: dict[str, Method], name: str, what: str) -> Method:
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r}; available: {', '.join(sorted(registry))}") from None


def get_method(name: str) -> Method:
    return _lookup(METHODS, name, "method")


def build(name: str, **settings) -> Any:
    """``get_method(name).build(**settings)``: the estimator of a registered method with these settings."""
    return get_method(name).build(**settings)


CLASSIFIERS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("softmax", "one network's softmax probabilities (MC dropout's network without dropout; the "
               "thesis's 'ori')", MCDropoutClassifier, "Feng 2019 (ori)", fixed=dict(dropout="none")),
        Method("mc-dropout", "MC dropout (Bernoulli, fixed rate), T stochastic passes averaged",
               MCDropoutClassifier, "Gal & Ghahramani 2016", fixed=dict(dropout="bernoulli")),
        Method("concrete-dropout", "concrete dropout: rates learned by a relaxed Bernoulli, T passes averaged",
               MCDropoutClassifier, "Gal, Hron & Kendall 2017", fixed=dict(dropout="concrete")),
        Method("multidrop", "Multi-Drop: concrete dropout with a learned rate per unit, T passes averaged",
               MCDropoutClassifier, "Feng 2019 (Multi-Drop)", fixed=dict(dropout="multidrop")),
        Method("ensemble", "deep ensemble of classifiers (members differ by seed), probabilities averaged",
               DeepEnsembleClassifier, "Lakshminarayanan et al. 2017"),
        Method("kfac-laplace", "Kronecker-factored Laplace on a trained network's layers, T weight draws",
               KFACLaplace, "Ritter, Botev & Barber 2018"),
    )
}


def get_classifier(name: str) -> Method:
    return _lookup(CLASSIFIERS, name, "classification method")
