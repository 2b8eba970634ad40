"""The `ood` experiment (Pequignot et al., OOD detection for regression): grids and settings, the
paper's tables, the formulas a cell uses (MC dropout loss conversion, LPP, sigma ratio) against
closed forms, AUROC invariance (spec §7 test 6), the findings logic on known numbers, and the smoke
preset end to end through `run_grid` and `write_report`."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dubito.experiments import get, ood
from dubito.experiments.ood.paper import AUROC_TOLERANCE
from dubito.experiments.ood.report import (
    _finding1,
    _finding2,
    _finding3,
    _finding4,
    _Table,
)
from dubito.experiments.ood.vocab import HMC_DATASETS, SIZE, SYNTHETIC, _resolve

E = get("ood")


# ------------------------------------------------------------------------------------ grids


def test_paper_grid_and_settings(uci_dir):
    cells = E.cells("paper-full")
    # 7 methods on ood-wave and the 5 small sets, 6 on the 3 large sets (no HMC), 3 seeds, one split
    assert len(cells) == (6 * 7 + 3 * 6) * 3
    assert {c.split for c in cells} == {0} and {c.seed for c in cells} == {0, 1, 2}
    assert [c.key[2:] for c in E.cells("paper")] == [c.key[2:] for c in cells if c.seed == 0]
    assert {c.dataset for c in cells if c.method == "nuts"} == set(HMC_DATASETS)
    r = {(c.dataset, c.method): _resolve(dict(c.settings), c.dataset) for c in cells}
    s = r["boston", "funn-hyvi"]
    assert (s["n_ll_samples"], s["n_kl_samples"], s["lr"], s["lr_factor"], s["min_lr"]) == (100, 500, 0.005, 0.7, 1e-4)
    assert (s["prior_sd"], s["latent_dim"], tuple(s["generator_hidden"])) == (0.5, 5, (20, 40))  # spec §2.6-2.7
    assert (s["n_predictors"], s["n_ood"], s["n_entropy_draws"], s["n_param_entropy"]) == (1000, 10_000, 100, 1000)
    assert r["boston", "mfvi"]["patience_factor"] == 2 and "patience_factor" not in r["boston", "funn-mfvi"]
    assert r["boston", "deterministic-ensemble"]["epochs"] == 1000 and r["power", "deterministic-ensemble"]["epochs"] == 500
    assert r["ood-wave", "deterministic-ensemble"]["epochs"] == 3000 and r["boston", "deterministic-ensemble"]["optimizer"] == "sgd"
    assert r["boston", "mc-dropout"]["epochs"] == 2000 and r["ood-wave", "mc-dropout"]["full_batch"]
    assert SIZE["large"]["hidden"] == 100 and SIZE["large"]["batch_size"] == 500
    assert SIZE["large"]["patience"] == 10 and SIZE["small"]["patience"] == 30
    assert SIZE["synthetic"]["activation"] == "tanh" and SIZE["synthetic"]["n_points"] == 50
    assert ood.SIGMA_L["boston"] == 2.5 and ood.SIGMA_L["naval"] == 0.2 and ood.SIGMA_L["ood-wave"] == 0.1


def test_budget_preset_is_the_spec_plan(uci_dir):
    cells = E.cells("budget")
    r = {(c.dataset, c.method): _resolve(dict(c.settings), c.dataset) for c in cells}
    s = r["boston", "nn-hyvi"]
    assert (s["n_ll_samples"], s["n_kl_samples"], s["n_points"], s["max_epochs"], s["patience"], s["min_lr"]) == \
        (50, 200, 100, 300, 10, 1e-4)  # spec §6 plan
    assert r["boston", "deterministic-ensemble"]["n_points"] == 100  # every method's predictor entropy at the same T
    assert r["ood-wave", "nn-hyvi"].get("n_points", 50) == 50
    assert {c.dataset for c in cells} == set(ood.DATASETS)  # ood-wave and the eight UCI sets
    assert {d for d, m in r if m == "nuts"} == {SYNTHETIC, *ood.SMALL}  # as the paper: no HMC on the large sets
    assert (r["protein", "funn-hyvi"]["max_epochs"], r["protein", "funn-hyvi"]["patience"]) == (300, 10)


def test_paper_numbers():
    pn = {(p.dataset, p.variant, p.metric): p for p in E.paper_numbers}
    assert pn["boston", "FuNN-HyVI", "auroc"].value == 1.0 and pn["naval", "MFVI", "auroc"].value == 0.8669
    assert pn["power", "MC dropout", "auroc"].value == 0.9144
    assert ("naval", "HMC", "auroc") not in pn and ("boston", "MC dropout", "h_param") not in pn
    assert pn["protein", "FuNN-HyVI", "h_pred"].value == 372 and pn["wine", "FuNN-HyVI", "h_param"].value == -1596
    assert pn["concrete", "Ensemble", "rmse"].value == 4.52 and pn["concrete", "Ensemble", "rmse"].spread == 0.04
    assert pn["yacht", "NN-HyVI", "rmse"].spread is None and "garbled" in pn["yacht", "NN-HyVI", "rmse"].note
    assert ("power", "MFVI", "rmse") not in pn and pn["power", "Ensemble", "lpp"].value == -60.64
    assert all(p.tolerance == AUROC_TOLERANCE for p in pn.values() if p.metric == "auroc")
    assert {p.metric for p in E.paper_numbers} <= {m.key for m in E.metrics}
    assert {p.variant for p in E.paper_numbers} <= set(ood.VARIANT.values())


# ------------------------------------------------------------------------------------ formulas


def test_mc_dropout_weight_decay_gives_the_same_gradient_as_the_authors_loss():
    """[C]: sum_B (y - f)^2/(2 s^2) + Adam weight decay lam (= lam/2 ||w||^2 in the loss); ours: mean_B
    (y - f)^2 + wd/2 ||w||^2. With wd from `mc_dropout_weight_decay` the gradients are proportional
    (factor 2 s^2 / B), so Adam takes the same steps (checked with autograd on a random linear model)."""
    n_train, B, s = 455, 50, 2.5
    lam = 0.1 / math.sqrt(math.floor(10 * n_train / 9))
    wd = ood.mc_dropout_weight_decay(s, n_train, B)
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(B, 3, generator=g, dtype=torch.float64), torch.randn(B, generator=g, dtype=torch.float64)
    w = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    theirs = ((y - X @ w) ** 2).sum() / (2 * s**2) + lam / 2 * (w * w).sum()
    ours = ((y - X @ w) ** 2).mean() + wd / 2 * (w * w).sum()
    g1, = torch.autograd.grad(theirs, w)
    g2, = torch.autograd.grad(ours, w)
    torch.testing.assert_close(g2, g1 * 2 * s**2 / B, rtol=1e-12, atol=0)
    assert wd == pytest.approx(2 * 6.25 * 0.1 / math.sqrt(505) / 50)


def test_lpp_with_one_predictor_is_the_gaussian_density():
    """Spec §7 test 11: one predictor -> ln N(y; f, sigma_l^2) - ln s_y; stable for sigma_l = 0.1 and
    residuals of 10 (log-density -5000 + const, finite)."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    f, y = rng.normal(size=(1, 30)), rng.normal(size=30)
    want = np.mean(norm.logpdf(y, f[0], 0.7)) - math.log(3.0)
    assert ood.lpp_mixture(f, y, 0.7, 3.0) == pytest.approx(want, rel=1e-12)
    far = ood.lpp_mixture(np.zeros((1000, 5)), np.full(5, 10.0), 0.1)
    assert far == pytest.approx(norm.logpdf(10.0, 0.0, 0.1), rel=1e-12) and np.isfinite(far)
    # two predictors: the equal mixture, by hand
    f2 = np.array([[0.0], [1.0]])
    mix = math.log(0.5 * norm.pdf(0.3, 0.0, 0.5) + 0.5 * norm.pdf(0.3, 1.0, 0.5))
    assert ood.lpp_mixture(f2, np.array([0.3]), 0.5) == pytest.approx(mix, rel=1e-12)


def test_lpp_gaussian_against_scipy():
    from scipy.stats import norm

    rng = np.random.default_rng(1)
    draws, y = rng.normal(size=(5, 40)), rng.normal(size=40)
    sd = np.sqrt(draws.var(axis=0, ddof=1) + 0.3**2)
    want = np.mean(norm.logpdf(y, draws.mean(axis=0), sd)) - math.log(2.0)
    assert ood.lpp_gaussian(draws, y, 0.3, 2.0) == pytest.approx(want, rel=1e-12)
    legacy = np.mean(norm.logpdf(y, draws.mean(axis=0), draws.std(axis=0, ddof=1)))
    assert ood.lpp_gaussian(draws, y, 0.0) == pytest.approx(legacy, rel=1e-12)


def test_sigma_ratio_by_hand():
    x = np.array([-4.0, -2.0, -1.0, 0.0, 0.4, 1.0, 1.8])
    sig = np.array([4.0, 2.0, 9.0, 3.0, 9.0, 9.0, 6.0])
    # in the regions: -4, -2 ([-4, -1.5]), 0 ([-0.3, 0.3]), 1.8 ([1.5, 2]) -> mean 15/4
    assert ood.sigma_ratio(x, sig, np.array([0.5, 1.5])) == pytest.approx(15 / 4)
    assert ood.sigma_ratio(x, sig, np.array([1.0]), ((-4.0, -2.0),)) == pytest.approx(3.0)


def test_auroc_is_the_same_from_variance_sd_and_entropy():
    """Spec §7 test 6: U(x) = ½ ln(2πe sigma²) is monotone in sigma² and sigma, so the AUROC from each
    is identical (OOD positive); and it equals sklearn's roc_auc_score."""
    entropy = pytest.importorskip("dubito.metrics.entropy")
    from sklearn.metrics import roc_auc_score

    from dubito.metrics.ood import auroc

    rng = np.random.default_rng(0)
    d_in = rng.normal(0, rng.uniform(0.1, 1.0, 300), size=(50, 300))   # 50 predictors at 300 inputs
    d_out = rng.normal(0, rng.uniform(0.3, 2.0, 200), size=(50, 200))
    var_in, var_out = d_in.var(axis=0, ddof=1), d_out.var(axis=0, ddof=1)
    u_in, u_out = entropy.spread_entropy(d_in), entropy.spread_entropy(d_out)
    np.testing.assert_allclose(u_in, 0.5 * np.log(2 * np.pi * np.e * var_in), rtol=1e-12)
    a_var, a_sd, a_u = auroc(var_in, var_out), auroc(np.sqrt(var_in), np.sqrt(var_out)), auroc(u_in, u_out)
    assert a_var == a_sd == a_u
    labels = np.r_[np.zeros(300), np.ones(200)]
    assert a_u == pytest.approx(roc_auc_score(labels, np.r_[var_in, var_out]), abs=1e-12)
    assert 0.5 < a_u < 1.0


# ------------------------------------------------------------------------------------ findings


def _row(dataset, variant, **metrics):
    return SimpleNamespace(dataset=dataset, method=variant, split=0, seed=0, variants={variant: metrics},
                           artefacts={}, info={})


def test_findings_on_known_numbers():
    rows = [
        _row("boston", "FuNN-HyVI", auroc=1.0, h_param=300.0, h_pred=250.0, rmse=3.0, lpp=-4.10, lpp_formula=-4.09),
        _row("boston", "Ensemble", auroc=0.999, rmse=2.7),
        _row("boston", "NN-HyVI", auroc=0.99, h_param=1500.0, h_pred=-400.0, rmse=2.6, lpp=-4.1, lpp_formula=-4.2),
        _row("boston", "MFVI", auroc=0.96, h_param=500.0, rmse=30.0),
        _row("boston", "MC dropout", auroc=0.95, rmse=2.3),
        _row("ood-wave", "FuNN-HyVI", sigma_ratio=8.0),
        _row("ood-wave", "MFVI", sigma_ratio=1.2),
        _row("ood-wave", "MC dropout", sigma_ratio=5.0),
    ]
    t = _Table(rows)
    f1, f2, f3, f4 = _finding1(t), _finding2(t), _finding3(t), _finding4(t)
    assert "**partly**" in f1[0]  # > 2 and > 2 x MFVI, but not > 2 x MC dropout
    assert "**holds**" in f2[0]
    assert "**holds**" in f3[0]
    assert "**partly**" in f4[0] and "MFVI 30 (outside)" in f4[0]  # MFVI's RMSE and NN-HyVI's LPP gap fail
    rows[1].variants["Ensemble"]["auroc"] = 0.9
    assert "**partly**" in _finding3(_Table(rows))[0]


# ------------------------------------------------------------------------------------ end to end


def test_smoke_preset_end_to_end(uci_dir, tmp_path, monkeypatch):
    """The smoke preset (every method on ood-wave and yacht) through run_grid into a temporary
    store, then write_report: every cell done with finite metrics, Markdown with the paper tables,
    the findings, the sigma quartiles and the wave band plots."""
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "cache"))  # the variational cells' checkpoints
    pytest.importorskip("dubito.regression.hyper_vi")
    pytest.importorskip("dubito.metrics.entropy")
    from dubito.experiments.report import write_report
    from dubito.experiments.runner import run_grid
    from dubito.experiments.store import ResultsStore

    store = tmp_path / "r.sqlite"
    summary = run_grid("ood", preset="smoke", store=store, progress=False)
    assert (summary.done, summary.failed) == (14, 0), summary.failures
    rows = ResultsStore(store, create=False).rows("ood", "smoke", status="done")
    assert {(r.dataset, r.method) for r in rows} == {(d, m) for d in ("ood-wave", "yacht") for m in ood.VARIANT}
    for r in rows:
        (variant, m), = r.variants.items()
        assert variant == ood.VARIANT[r.method]
        assert 0.0 <= m["auroc"] <= 1.0 and np.isfinite([m["rmse"], m["lpp"], m["h_pred"]]).all(), (r.method, m)
        assert ("h_param" in m) == (r.method != "mc-dropout")
        h = r.artefacts["sigma_hist"]
        assert sum(h["train"]["counts"]) == r.info["n_train"] and sum(h["ood"]["counts"]) == 2000
        if r.dataset == "ood-wave":
            assert len(r.artefacts["sigma_curve"]["sigma"]) == 500 and m["sigma_ratio"] > 0
            assert r.info["n_train"] == 120 and r.info["y_scale"] == 1.0
        else:
            assert r.info["n_train"] == 277 and r.info["n_test"] == 31  # 308 rows, test_size 0.1
    ens = next(r for r in rows if r.method == "deterministic-ensemble")
    assert ens.info["optimizer"] == "sgd" and "lpp_legacy" in ens.variants["Ensemble"]
    assert next(r for r in rows if r.method == "mc-dropout").info["mask_mode"] == "shared"

    path = write_report("ood", store, out_dir=tmp_path / "out", preset="smoke")
    md = path.read_text()
    for text in ("## The paper's claims, checked (spec §6 findings)", "Finding 1", "Finding 4",
                 "## sigma on train, test and OOD points", "All cells of the preset that can run here are in the store.",
                 "### Beside the paper", "FuNN-HyVI", "| method · variant |"):
        assert text in md, text
    pngs = {p.name for p in (tmp_path / "out" / "ood").glob("*.png")}
    assert {"ood-wave-curve_1d-funn-hyvi.png", "ood-wave-curve_1d-nuts.png"} <= pngs
    assert {"ood-wave-sigma_hist.png", "yacht-sigma_hist.png"} <= pngs  # the paper's histograms, drawn
    assert "](ood/yacht-sigma_hist.png)" in md


def test_a_variational_cell_run_again_resumes_its_checkpoint(tmp_path, monkeypatch):
    """A HyVI cell checkpoints under DUBITO_CACHE; the same cell run again (as after an interrupted
    run) resumes the finished checkpoint instead of training, and gives the same metrics."""
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path))
    cell = next(c for c in E.cells("smoke") if c.dataset == "ood-wave" and c.method == "funn-hyvi")
    first = ood.run_cell(cell)
    path = tmp_path / "ood-checkpoints" / "smoke" / "ood-wave" / "funn-hyvi" / "split0-seed0" / "hyper_vi.safetensors"
    assert path.is_file() and first.info["resumed"] is False
    again = ood.run_cell(cell)
    assert again.info["resumed"] is True
    drop = lambda v: {k: x for k, x in v["FuNN-HyVI"].items() if k != "fit_seconds"}  # noqa: E731
    assert drop(again.variants) == drop(first.variants)
    from dubito.io import load_tensors

    trained = load_tensors(path, "HyperVITrainingCheckpoint")[1]["record"]["seconds"]
    assert again.variants["FuNN-HyVI"]["fit_seconds"] >= trained > 0  # the first run's training, kept
    assert not (tmp_path / "ood-checkpoints" / "smoke" / "ood-wave" / "mc-dropout").exists()  # HyVI/MFVI only
