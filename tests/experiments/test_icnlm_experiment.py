"""The `icnlm` experiment (Hoffmann & Klein's IC-NLM against its benchmarks): grids, the paper's
Table 1, a cell's metrics against a direct computation, the claims logic on known numbers, and the
smoke preset end to end through `run_grid` and `write_report`."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

from dubito.experiments import Cell, common, get, icnlm
from dubito.experiments.common import network_seed
from dubito.experiments.icnlm.experiment import SMOKE_METHODS
from dubito.experiments.icnlm.vocab import (
    MC_NOISE,
    MC_PAPER,
    NO_BAYES,
    SHARES,
    TANH,
    VARIANTS,
)
from dubito.experiments.store import StoredCell
from dubito.regression import copula

E = get("icnlm")
LEVEL_KEYS = ("5", "15", "25", "35", "45", "55", "65", "75", "85", "95", "99")


def _fast_nuts(monkeypatch):
    """NUTS trees capped at depth 3 (test speed only: the horseshoe's funnel otherwise takes
    trees of 1,023 steps with the smoke preset's 40 warm-up steps); the presets use depth 10."""
    original = copula.fit_copula_posterior

    def capped(*args, **kwargs):
        return original(*args, **{**kwargs, "max_tree_depth": 3})

    monkeypatch.setattr(copula, "fit_copula_posterior", capped)


def test_paper_grid_and_settings(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    cells = E.cells("paper", datasets=list(icnlm.UCI))
    assert len(cells) == 4 * 6 * 2
    assert {c.split for c in cells} == {0, 1} and {c.method for c in cells} == set(VARIANTS)
    assert "icnlm-tanh" not in SMOKE_METHODS
    s = {c.method: c.settings for c in cells}
    # images: the paper's Adam 2.5e-4, batch 32 (spec §2.2), epochs cut to the GPU time (IMAGES_NOTE)
    assert s["icnlm"]["images"] == {"network": "cnn", "lr": 2.5e-4, "batch_size": 32, "epochs": 10}
    assert s["mdn"]["images"]["epochs"] == 10 and s["mdn"]["n_components"] == 50  # spec §3.3
    assert s["mc-dropout"]["n_samples"] == 1000 and s["mc-dropout"]["dropout"] == 0.05
    assert s["mc-dropout"]["n_samples_images"] == 50
    post = s["icnlm"]["posterior_images"]
    assert (post["vi_draws"], post["vi_rank"], post["vi_max_iter"]) == (50, 3, 14_000)  # spec §2.8
    assert (s["icnlm"]["posterior_tabular"]["nuts_samples"], post["nuts_samples"]) == (300, 200)
    assert s["icnlm"]["tabular"] == {"lr": 1e-3, "batch_size": 32, "min_steps": 3000, "min_epochs": 60}
    assert s["icnlm-tanh"]["tabular"] == dict(s["icnlm"]["tabular"], activation="tanh")
    assert s["icnlm-tanh"]["images"] == dict(s["icnlm"]["images"], activation="tanh")
    assert post["vi_min_iter"] == 10_000  # the stopping rule may end VI only after 10,000 iterations
    # driving: one episode-wise split; unavailable only without the recorder
    d = [c for c in E.cells("paper", datasets=["driving"])] if "driving" not in E.unavailable(E.preset("paper")) else []
    assert all(c.split == 0 for c in d)


def test_paper_numbers_are_table1_without_tolerances():
    pn = {(p.variant, p.metric): p for p in E.paper_numbers}
    assert len(pn) == 8 * 4
    assert pn["Naive", "acc_I"].value == pytest.approx(0.9321) and pn["Naive", "acc_II"].value == pytest.approx(0.6512)
    assert pn["IC-NLM horseshoe VI", "mse"].value == 5.66 and pn["IC-NLM ridge NUTS", "mae"].value == 1.34
    assert all(p.dataset == "driving" and p.spread is None and p.tolerance is None for p in pn.values())
    assert all("not comparable" in p.note for p in pn.values())
    assert {p.metric for p in E.paper_numbers} <= {m.key for m in E.metrics}
    variants = {v for vs in VARIANTS.values() for v in vs}
    assert {p.variant for p in E.paper_numbers} <= variants


def _smoke_cell(method, dataset="yacht", split=0):
    return Cell("icnlm", "smoke", dataset, method, split, 0, SMOKE_METHODS[method])


def test_naive_cell_against_closed_forms(uci_dir):
    """Naive learner N(c, s^2), c = training mean, s^2 = training variance: every metric has a
    closed form or a brute-force value; the mapped thresholds reproduce the paper's naive
    accuracies on the training set (known truth)."""
    from scipy.stats import norm

    from dubito.data import load
    from dubito.metrics import PAPER_NAIVE_ACCURACY

    res = icnlm.run_cell(_smoke_cell("naive"))
    _, y_tr, _, y_te = load("yacht").split(0)
    c, s2 = y_tr.mean(), y_tr.var()
    m = res.variants["Naive"]
    assert m["mae"] == pytest.approx(np.mean(np.abs(y_te - c)), rel=1e-12)
    assert m["mse"] == pytest.approx(np.mean((y_te - c) ** 2), rel=1e-12)
    assert m["nll"] == pytest.approx(-np.mean(norm.logpdf(y_te, c, np.sqrt(s2))), rel=1e-10)
    t1, t2 = res.info["thresholds_mapped"]
    for t, a in zip((t1, t2), PAPER_NAIVE_ACCURACY):
        assert np.mean(np.abs(y_tr - c) <= t) >= a > np.mean(np.abs(y_tr - c) < t)
    assert m["acc_I"] == np.mean(np.abs(y_te - c) <= t1) and m["acc_II"] == np.mean(np.abs(y_te - c) <= t2)
    assert "acc_6" not in m  # raw degrees only on driving
    u = norm.cdf(y_te, c, np.sqrt(s2))
    for key, level in zip(LEVEL_KEYS, icnlm.LEVELS):
        lo, hi = norm.interval(level, c, np.sqrt(s2))
        assert m[f"coverage_{key}"] == pytest.approx(np.mean((y_te >= lo) & (y_te <= hi)))  # = from the PIT
        assert m[f"width_{key}"] == pytest.approx(hi - lo, rel=1e-9)
    assert m["var_ratio"] == pytest.approx(np.mean((y_te - c) ** 2) / s2)
    assert "ev_spearman" not in m  # constant variance: no rank correlation
    assert res.artefacts["pit"]["Naive"] == pytest.approx(np.round(u, 5).tolist(), abs=1e-5)
    # marginal calibration: the average predictive density is the N(c, s^2) density on the grid
    md = res.artefacts["marginal_density"]
    assert md["variants"]["Naive"] == pytest.approx(norm.pdf(md["grid"], c, np.sqrt(s2)), abs=1e-6)
    assert sum(md["hist_counts"]) == len(y_te)


def test_deterministic_cell_agrees_with_a_direct_fit(uci_dir):
    """The cell's numbers equal those of the same estimator fitted directly with the cell's seed."""
    from dubito.data import load
    from dubito.metrics import calibration_error, coverage, crps, marginal_calibration
    from dubito.regression import DeterministicRegressor

    res = icnlm.run_cell(_smoke_cell("deterministic"))
    X_tr, y_tr, X_te, y_te = load("yacht").split(0)
    epochs = max(2, int(np.ceil(60 / np.ceil(len(y_tr) / 32))))
    assert res.info["network"]["epochs"] == epochs
    est = DeterministicRegressor(lr=1e-3, batch_size=32, epochs=epochs, random_state=network_seed(0, 0),
                                 validation_fraction=0.0, progress=False).fit(X_tr, y_tr)  # the paper's protocol
    pred = est.predict_distribution(X_te)
    m = res.variants["Deterministic"]
    assert m["mae"] == pytest.approx(np.mean(np.abs(y_te - pred.mean)), rel=1e-12)
    assert m["crps"] == pytest.approx(np.mean(crps(pred, y_te)), rel=1e-12)
    assert m["coverage_95"] == pytest.approx(coverage(pred, y_te, 0.95))
    assert m["calibration_error"] == pytest.approx(calibration_error(pred, y_te))
    assert m["marginal_calibration_gap"] == pytest.approx(marginal_calibration(pred, y_te).max_gap)
    assert m["coverage_error"] == pytest.approx(
        np.mean([abs(m[f"coverage_{k}"] - lv) for k, lv in zip(LEVEL_KEYS, icnlm.LEVELS)]))
    json.dumps(res.variants), json.dumps(res.artefacts), json.dumps(res.info)


# ------------------------------------------------------------------------------- claims logic


def _row(dataset, method, variants, info=None, split=0, ev_ratio=None):
    """A stored cell; ``ev_ratio`` {variant: r}: an error-variance artefact whose 20 % share has MSE r x all."""
    artefacts = {}
    if ev_ratio:
        share = list(SHARES)
        artefacts["error_variance"] = {"nu": [0.0, 1.0], "share": share, "variants": {
            v: {"mse_nu": [1.0, 1.0], "kept_nu": [0.5, 1.0],
                "mse_share": [r if abs(sh - 0.2) < 1e-9 else 1.0 for sh in share]} for v, r in ev_ratio.items()}}
    return StoredCell("icnlm", "paper", dataset, method, split, 0, "done", variants, artefacts, info or {}, {}, 1.0,
                      "0", None, None, datetime.now(timezone.utc).isoformat())


def _posterior(mean, sd):
    names = [f"beta_{j}" for j in range(len(mean))] + ["log_tau2"]
    return {"names": names, "mean": [*mean, 0.0], "sd": [*sd, 1.0]}


def _rows(ic_gap=0.01, mc_gap=0.2, vi_shift=0.0, mdn_ev=0.2):
    ic = {v: {"marginal_calibration_gap": ic_gap, "calibration_error": 0.01, "mae": 1.0, "mse": 2.0, "var_ratio": 0.5}
          for v in icnlm.ICNLM_VARIANTS}
    ic["IC-NLM horseshoe VI"].update(mae=0.9, mse=1.8)
    ic["IC-NLM horseshoe NUTS"].update(mae=0.9, mse=1.8)
    post = {v: _posterior([1.0 + (vi_shift if v.endswith("VI") else 0.0)] * 3, [0.5] * 3)
            for v in icnlm.ICNLM_VARIANTS}
    diag = {v: ({"iterations": 3000, "converged": True, "seconds": 5.0} if v.endswith("VI") else
                {"rhat_max": 1.001, "ess_bulk_min": 800.0 if "ridge" in v else 100.0, "divergences": 0,
                 "seconds": 60.0, "draws": 1000}) for v in icnlm.ICNLM_VARIANTS}
    return [
        _row("energy", "icnlm", ic, {"posterior": post, "diagnostics": diag, "n_train": 691},
             ev_ratio={"IC-NLM ridge VI": 0.5, "IC-NLM horseshoe VI": 0.4}),
        _row("energy", "mc-dropout", {MC_PAPER: {"marginal_calibration_gap": mc_gap, "calibration_error": 0.3,
                                                       "var_ratio": 4.0},
                                      MC_NOISE: {"marginal_calibration_gap": mc_gap, "calibration_error": 0.1}},
             ev_ratio={MC_PAPER: 0.8}),
        _row("energy", "mdn", {"MDN": {"marginal_calibration_gap": 0.05, "calibration_error": 0.05, "var_ratio": 1.0}},
             ev_ratio={"MDN": mdn_ev}),
        _row("energy", "deterministic", {"Deterministic": {"marginal_calibration_gap": 0.1, "calibration_error": 0.2}}),
    ]


def _claim(lines, title):
    start = next(i for i, x in enumerate(lines) if x.startswith(f"- **{title}"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("- **")), len(lines))
    return "\n".join(lines[start:end])


def test_claims_verdicts_follow_the_numbers(uci_dir):
    p = E.preset("paper")
    good = icnlm.report_sections(_rows(), p)
    assert "**holds**" in _claim(good, "Claim 4")
    assert "**holds**" in _claim(good, "Claim 5")
    assert "**holds**" in _claim(good, "Claim 3")  # horseshoe MAE/MSE below ridge in both
    c1 = _claim(good, "Claim 1")
    assert "max over beta of |mean VI - mean NUTS| / sd NUTS = 0 " in c1 and c1.count("**holds**") == 2
    c2 = _claim(good, "Claim 2")
    assert "VI faster: **holds**" in c2 and "more autocorrelated: **holds**" in c2
    assert "Not checkable here" in _claim(good, "Claim 8") and "forks" in _claim(good, "Claim 8")
    c7 = _claim(good, "Claim 7")  # MDN 0.2 < horseshoe 0.4 < ridge 0.5 < MC 0.8; MC var ratio 4, ridge 0.5
    assert "MDN best: True, horseshoe second: True, MC dropout overconfident (> 1): True" in c7
    assert "ridge overconfident: False -> **partly**" in c7
    c7 = _claim(icnlm.report_sections(_rows(mdn_ev=0.45), p), "Claim 7")
    assert "MDN best: False, horseshoe second: False" in c7
    # reversed numbers reverse the verdicts
    bad = icnlm.report_sections(_rows(ic_gap=0.5, vi_shift=0.2), p)
    assert "**does not hold**" in _claim(bad, "Claim 4")
    c1 = _claim(bad, "Claim 1")
    assert "= 0.4 " in c1 and "**partly**" in c1  # 0.2 / 0.5 sd apart; predictive still equal
    # between the benchmarks: IC-NLM below MC dropout but above MDN -> partly
    mixed = icnlm.report_sections(_rows(ic_gap=0.1), p)
    assert "**partly**" in _claim(mixed, "Claim 4")
    # the missing cells of the preset are listed with the command that runs them
    cells = "\n".join(good[: good.index("## The paper's claims, checked")])
    assert "energy · naive · split(s) 0, 1" in cells and "--methods naive" in cells


# ------------------------------------------------------------------------------- end to end


def test_tanh_feature_cell(uci_dir, monkeypatch):
    """icnlm-tanh is the icnlm cell with tanh features: its variants carry the suffix, its network
    is a tanh net, and with the same seed it differs from the ReLU cell."""
    _fast_nuts(monkeypatch)
    settings = dict(SMOKE_METHODS["icnlm"])
    settings["tabular"] = dict(settings["tabular"], activation="tanh")
    cell = Cell("icnlm", "smoke", "yacht", "icnlm-tanh", 0, 0, settings)
    res = icnlm.run_cell(cell)
    assert tuple(res.variants) == VARIANTS["icnlm-tanh"]
    assert set(res.info["diagnostics"]) == {v + TANH for v in icnlm.ICNLM_VARIANTS}
    assert res.info["network"]["activation"] == "tanh"
    relu = icnlm.run_cell(Cell("icnlm", "smoke", "yacht", "icnlm", 0, 0, SMOKE_METHODS["icnlm"]))
    a, b = res.variants["IC-NLM ridge VI" + TANH], relu.variants["IC-NLM ridge VI"]
    assert np.isfinite([a["mae"], a["nll"], a["crps"]]).all() and a["mae"] != b["mae"]


def test_smoke_preset_end_to_end(uci_dir, tmp_path, monkeypatch):
    """The smoke preset through run_grid into a temporary store, then write_report: every
    variant is stored, the report has the metric and paper tables, the claims, and the plots."""
    from dubito.experiments.report import write_report
    from dubito.experiments.runner import run_grid
    from dubito.experiments.store import ResultsStore

    _fast_nuts(monkeypatch)
    store = tmp_path / "r.sqlite"
    summary = run_grid("icnlm", preset="smoke", store=store, progress=False)
    assert (summary.done, summary.failed) == (5, 0), summary.failures
    rows = ResultsStore(store, create=False).rows("icnlm", "smoke", status="done")
    by = {r.method: r for r in rows}
    assert set(by) == set(SMOKE_METHODS)
    for method, names in ((m, VARIANTS[m]) for m in SMOKE_METHODS):
        assert tuple(by[method].variants) == names
    for v in icnlm.ICNLM_VARIANTS:
        m = by["icnlm"].variants[v]
        assert all(f"coverage_{k}" in m and f"width_{k}" in m for k in LEVEL_KEYS)
        assert np.isfinite([m["mae"], m["nll"], m["crps"], m["train_marginal_gap"]]).all()
    assert set(by["icnlm"].variants[NO_BAYES]) == {"mae", "mse", "acc_I", "acc_II", "fit_seconds"}
    info = by["icnlm"].info
    assert set(info["diagnostics"]) == set(icnlm.ICNLM_VARIANTS) and info["n_train"] == 277
    assert info["diagnostics"]["IC-NLM ridge NUTS"]["draws"] == 80  # 2 chains x 40
    live = 10 - len(info["dead_features"])
    assert all(len(p["mean"]) == live + (1 if "ridge" in v else live + 1) for v, p in info["posterior"].items())

    path = write_report("icnlm", store, out_dir=tmp_path / "out", preset="smoke")
    md = path.read_text()
    assert "## The paper's claims, checked" in md and "Claim 7" in md and "C5" in md
    assert "| method · variant |" in md and "IC-NLM horseshoe NUTS" in md
    assert "All cells of the preset that can run here are in the store." in md
    pngs = {p.name for p in (tmp_path / "out" / "icnlm").glob("*.png")}
    assert {f"yacht-{k}.png" for k in ("marginal_density", "marginal_cdf_gap", "coverage_gap", "error_variance",
                                        "pit", "calibration")} <= pngs


def test_driving_smoke_cells(tmp_path, monkeypatch):
    """The image path: 1,000 CarRacing frames, the CNN networks, 2 epochs (skipped where the
    recorder or the CNN estimators are not available)."""
    pytest.importorskip("gymnasium")
    pytest.importorskip("Box2D")
    from dubito.regression import DeterministicRegressor, ImplicitCopulaRegressor

    for cls in (DeterministicRegressor, ImplicitCopulaRegressor):
        try:
            cls(network="cnn", image_shape=(1, 64, 64))._settings()
        except (TypeError, ValueError) as exc:
            pytest.skip(f"{cls.__name__} has no network='cnn' yet: {exc}")
    _fast_nuts(monkeypatch)
    for method in ("naive", "deterministic", "icnlm"):
        res = icnlm.run_cell(Cell("icnlm", "smoke-driving", "driving-1k", method, 0, 0, SMOKE_METHODS[method]))
        for m in res.variants.values():
            assert {"acc_6", "acc_2", "acc_I"} <= set(m)
        assert res.info["frame_shape"] == [1, 64, 64] and res.info["naive_center"] == 0.0
        if method == "deterministic":
            assert res.info["network"]["network"] == "cnn"
