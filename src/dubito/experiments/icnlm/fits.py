"""Method -> fitted estimators and their predictives (IC-NLM with ridge / horseshoe priors by VI and NUTS, MC dropout, MDN, the deterministic net, the naive learner)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from dubito.experiments.icnlm.data import _Data
from dubito.experiments.icnlm.evaluate import _evaluate, _point_metrics, _r
from dubito.experiments.icnlm.vocab import (
    ICNLM_VARIANTS,
    MC_NOISE,
    MC_PAPER,
    NO_BAYES,
    TANH,
)
from dubito.methods import build, get_method
from dubito.predictive.samples import Samples

# ---------------------------------------------------------------------------------- methods


def _net_kwargs(s: dict, d: _Data) -> dict:
    """Training settings of a network estimator for this data (tabular: epochs from min_steps)."""
    k = dict(s[d.kind])
    if d.kind == "images":
        k["image_shape"] = d.image_shape
        return k
    steps, min_epochs = int(k.pop("min_steps")), int(k.pop("min_epochs"))
    per_epoch = math.ceil(len(d.y_tr) / int(k["batch_size"]))
    k["epochs"] = max(min_epochs, math.ceil(steps / per_epoch))
    return k


def _run_icnlm(d: _Data, s: dict, device: str, progress: bool, random_state: int):

    post = dict(s[f"posterior_{d.kind}"])
    post_device = post.pop("device", device)  # posteriors may run on the CPU beside a GPU network
    net = _net_kwargs(s, d)
    # the paper's copula has no intercept (section 3.3); the estimator's default adds a random one
    common = dict(post, intercept=False, device=device, random_state=random_state, progress=progress)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # validation_fraction=0: the paper's protocol trains the network on every training row
        est = build("icnlm", prior="ridge", inference="vi", n_features=int(s["n_features"]), validation_fraction=0.0,
                    **net, **common).fit(d.X_tr, d.y_tr)
    fit_wall = time.perf_counter() - t0
    net_seconds = fit_wall - float(est.posterior_.diagnostics.get("seconds", 0.0))
    psi_tr = est.train_features_
    psi_te = est.features(d.X_te)
    dead = np.asarray(est.dead_features_, dtype=int)
    live = np.setdiff1d(np.arange(psi_tr.shape[1]), dead)

    variants, pieces, diag, posterior = {}, {}, {}, {}
    for name in ICNLM_VARIANTS:
        _, prior, inference = name.split()
        inference = inference.lower()
        t1 = time.perf_counter()
        if prior == "ridge" and inference == "vi" and dead.size == 0:
            model, seconds = est, float(est.posterior_.diagnostics.get("seconds", 0.0))
        else:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                model = get_method("icnlm").estimator.from_features(psi_tr[:, live], d.y_tr, prior=prior,
                                                                    inference=inference,
                                                                    **dict(common, device=post_device))
            caught.extend(w)
            seconds = time.perf_counter() - t1
        pred = model.predict_distribution(features=psi_te[:, live])
        pred_tr = model.predict_distribution(features=psi_tr[d.train_sub][:, live])
        variants[name], pieces[name] = _evaluate(pred, d, pred_tr)
        variants[name]["fit_seconds"] = net_seconds + seconds
        variants[name]["posterior_seconds"] = seconds
        pq = model.posterior_
        if pq.q is not None:
            m, sd = pq.q.mean, pq.q.variance().sqrt()
            mean, sd = m.detach().cpu().numpy(), sd.detach().cpu().numpy()
        else:
            summ = pq.summary()
            mean = np.array([summ[k]["mean"] for k in pq.names])
            sd = np.array([summ[k]["sd"] for k in pq.names])
        posterior[name] = {"names": list(pq.names), "mean": _r(mean), "sd": _r(sd)}
        g = pq.diagnostics
        if inference == "vi":
            diag[name] = dict(iterations=int(g["iterations"]), converged=bool(g["converged"]),
                              seconds=float(g["seconds"]))
        else:
            diag[name] = dict(rhat_max=float(np.max(g["rhat"])), ess_bulk_min=float(np.min(g["ess_bulk"])),
                              divergences=int(np.sum(g["divergences"])), seconds=float(g["seconds"]),
                              draws=int(pq.theta.shape[0]))

    # the paper's "DNN on z, mapped back (No Bayes)": F_Y^{-1}(Phi(zhat)), zhat the net's own output
    no_bayes_note = None
    try:
        zhat = est._predict_output(est._standardise(d.X_te))
        point = np.asarray(est.marginal_.inverse_pseudo_response(zhat), dtype=np.float64)
        variants[NO_BAYES] = _point_metrics(point, d)
        variants[NO_BAYES]["fit_seconds"] = net_seconds
    except (AttributeError, NotImplementedError, TypeError, ValueError) as exc:  # a network without that head
        no_bayes_note = f"not computed: {type(exc).__name__}: {exc}"
    info = dict(
        network={**{k: (list(v) if isinstance(v, tuple) else v) for k, v in net.items()},
                 "n_features": int(s["n_features"])},
        posterior_settings=post, net_seconds=net_seconds, dead_features=dead.tolist(),
        final_train_loss=float(est.loss_curve_[-1]), diagnostics=diag, posterior=posterior,
        warnings=sorted({str(w.message).split("\n")[0][:200] for w in caught}),
    )
    if no_bayes_note:
        info["no_bayes"] = no_bayes_note
    return variants, pieces, info


def _run_icnlm_tanh(d: _Data, s: dict, device: str, progress: bool, random_state: int):
    """The IC-NLM cell with tanh features (``s`` carries activation="tanh"); variants get TANH appended."""
    variants, pieces, info = _run_icnlm(d, s, device, progress, random_state)
    info["diagnostics"] = {k + TANH: v for k, v in info["diagnostics"].items()}
    info["posterior"] = {k + TANH: v for k, v in info["posterior"].items()}
    return {k + TANH: v for k, v in variants.items()}, {k + TANH: v for k, v in pieces.items()}, info


def _run_mc_dropout(d: _Data, s: dict, device: str, progress: bool, random_state: int):

    net = _net_kwargs(s, d)
    t0 = time.perf_counter()
    n_samples = int(s.get("n_samples_images", s["n_samples"]) if d.kind == "images" else s["n_samples"])
    est = build("mc-dropout", dropout=float(s["dropout"]), n_samples=n_samples, noise="residual", **net,
                validation_fraction=0.0, device=device, random_state=random_state, progress=progress).fit(d.X_tr, d.y_tr)
    fit = time.perf_counter() - t0
    masks = est.sample_masks()
    draws = est.predict_draws(d.X_te, masks=masks)
    draws_tr = est.predict_draws(d.X_tr[d.train_sub], masks=masks)
    sigma = math.sqrt(est.noise_var_)
    variants, pieces = {}, {}
    for name, kw in ((MC_PAPER, {}), (MC_NOISE, {"noise_std": sigma})):
        variants[name], pieces[name] = _evaluate(Samples(draws, **kw), d, Samples(draws_tr, **kw))
        variants[name]["fit_seconds"] = fit
    info = dict(network={k: (list(v) if isinstance(v, tuple) else v) for k, v in net.items()},
                n_masks=int(draws.shape[0]), dropout=float(s["dropout"]), noise_sd=sigma,
                final_train_loss=float(est.loss_curve_[-1]))
    return variants, pieces, info


def _run_network(method: str, variant: str, extra: dict):
    def run(d: _Data, s: dict, device: str, progress: bool, random_state: int):

        net = _net_kwargs(s, d)
        kw = {k: s[k] for k in extra if k in s}
        t0 = time.perf_counter()
        est = build(method, **kw, **net, validation_fraction=0.0, device=device, random_state=random_state,
                    progress=progress).fit(d.X_tr, d.y_tr)
        fit = time.perf_counter() - t0
        m, art = _evaluate(est.predict_distribution(d.X_te), d, est.predict_distribution(d.X_tr[d.train_sub]))
        m["fit_seconds"] = fit
        info = dict(network={k: (list(v) if isinstance(v, tuple) else v) for k, v in {**net, **kw}.items()},
                    final_train_loss=float(est.loss_curve_[-1]))
        return {variant: m}, {variant: art}, info
    return run


def _run_naive(d: _Data, s: dict, device: str, progress: bool, random_state: int):

    t0 = time.perf_counter()
    est = build("naive", strategy="constant", constant=d.center).fit(d.X_tr, d.y_tr)
    fit = time.perf_counter() - t0
    m, art = _evaluate(est.predict_distribution(d.X_te), d, est.predict_distribution(d.X_tr[d.train_sub]))
    m["fit_seconds"] = fit
    return {"Naive": m}, {"Naive": art}, dict(center=d.center, noise_var=float(est.noise_var_))


_RUNNERS = {
    "icnlm": _run_icnlm,
    "icnlm-tanh": _run_icnlm_tanh,
    "mc-dropout": _run_mc_dropout,
    "mdn": _run_network("mdn", "MDN", ("n_components",)),
    "deterministic": _run_network("deterministic", "Deterministic", ()),
    "naive": _run_naive,
}
