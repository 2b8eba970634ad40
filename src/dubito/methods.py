"""Registry of the regression methods the CLI and the experiments can name.

Each entry maps a short name to a factory ``make(random_state, device, progress, **overrides)``
returning an unfitted estimator with `fit` / `predict_distribution`, and a one-line
description (shown by ``dubito run --help`` and in the README's methods table).
A new method is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Method:
    name: str
    description: str
    make: Callable[..., Any]
    paper: str


# Small-data training settings of Hoffmann & Elster, Table 1 (QSAR column: lr 1e-3, lambda 1e-2,
# mini-batch 128, 60 epochs). The estimator's own defaults are the toys' (lambda = 1/N, batch
# 64), which overfit the variance head on diabetes: total coverage@95 0.78 over splits 0-2,
# against 0.89 (DE) / 0.91 (DE+Bayes) with these.
SMALL_DATA_ENSEMBLE = dict(lr=1e-3, weight_decay=1e-2, batch_size=128, epochs=60)


def _ensemble(correction: str):
    def make(random_state=0, device="cpu", progress=True, **overrides):
        from dubito.regression import DeepEnsembleRegressor

        settings = dict(SMALL_DATA_ENSEMBLE, correction=correction, random_state=random_state, device=device)
        settings["progress"] = progress
        settings.update(overrides)
        return DeepEnsembleRegressor(**settings)

    return make


def _baseline(cls_name: str):
    """Factory of an IC-NLM benchmark baseline (dubito.regression) with its own defaults."""

    def make(random_state=0, device="cpu", progress=True, **overrides):
        import dubito.regression as reg

        cls = getattr(reg, cls_name)
        if cls_name == "NaiveRegressor":  # no network: no seed, device, progress bar or epochs
            overrides.pop("epochs", None)
            return cls(**overrides)
        return cls(**{"random_state": random_state, "device": device, "progress": progress, **overrides})

    return make


METHODS: dict[str, Method] = {
    "ensemble": Method(
        "ensemble",
        "deep ensemble (5 members, mean+variance heads) with the Bayesian epistemic correction",
        _ensemble("bayes"),
        "Hoffmann & Elster 2021",
    ),
    "ensemble-standard": Method(
        "ensemble-standard",
        "deep ensemble (5 members) as Lakshminarayanan et al. 2017, no correction",
        _ensemble("none"),
        "Lakshminarayanan et al. 2017",
    ),
    "mc-dropout": Method(
        "mc-dropout",
        "MC dropout (p=0.05, 1000 masks) with a homoscedastic noise from training residuals",
        _baseline("MCDropoutRegressor"),
        "Gal & Ghahramani 2016",
    ),
    "mdn": Method(
        "mdn",
        "mixture density network, 50 Gaussian components",
        _baseline("MixtureDensityRegressor"),
        "Bishop 1994",
    ),
    "deterministic": Method(
        "deterministic",
        "plain MLP (MSE) with a homoscedastic Gaussian noise from training residuals",
        _baseline("DeterministicRegressor"),
        "Hoffmann & Klein 2023 (Deterministic DNN)",
    ),
    "icnlm": Method(
        "icnlm",
        "implicit copula neural linear model: KDE marginal, MLP on z, ridge prior, VI (10 features)",
        _baseline("ImplicitCopulaRegressor"),
        "Hoffmann & Klein 2023",
    ),
    "naive": Method(
        "naive",
        "constant prediction 0 with the residual variance mean(y^2) (the naive learner)",
        _baseline("NaiveRegressor"),
        "Hoffmann & Klein 2023 (naive learner)",
    ),
}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}") from None
