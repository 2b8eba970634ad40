"""The `thesis` experiment (Feng 2019, spec classification-thesis.md): grids, the thesis's tables with
their reliability flags, the Table 4.1 scores against the metric functions, the finding verdicts on
known numbers, the "manual labels saved" reading, and the smoke preset end to end through `run_grid` and
`write_report` (~45 s on 2 loaded cores), with the sensitivity variants (T, relaxed vs hard sampler, β), the
weak-context CRF, class-balanced auto-labelling and the manual labels saved."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from dubito.experiments import get, thesis
from dubito.experiments.thesis.evaluate import _Sampler

E = get("thesis")


def test_grids():
    smoke = E.cells("smoke")
    # 4 single methods + autolabel at seed 0, 4 ensembles once
    assert sorted(c.method for c in smoke) == sorted([*thesis.SINGLE, *thesis.ENSEMBLES, "autolabel"])
    # the grid itself, whether or not Fashion-MNIST is installed here (cells() leaves out unavailable data)
    paper = replace(E, unavailable=lambda preset: {}).cells("paper")
    assert len(paper) == 5 * 3 + 4  # singles and autolabel x 3 seeds, ensembles once (members = seeds 0-2)
    assert {c.seed for c in paper if c.method.startswith("ensemble_")} == {0}
    s = next(c.settings for c in paper if c.method == "ensemble_cdp")
    assert list(s["member_seeds"]) == [0, 1, 2] and s["n_samples"] == 50 and s["network"] == "cnn"
    assert thesis.DROPOUT == {"ori": "none", "mcdp": "bernoulli", "cdp": "concrete", "mdp": "multidrop"}
    # the sensitivity settings of the paper preset: the spec's T values, β x {0.1, 10} at seed 0, both class-balanced
    # modes, and manual labelling at q in {0.1, 0.2, 0.5, 1} for the manual labels saved
    cdp = next(c.settings for c in paper if c.method == "cdp")
    assert list(cdp["t_sweep"]) == [10, 20, 50, 100] and dict(cdp["beta"]) == {"factors": [0.1, 10.0], "seeds": [0]}
    al = next(c.settings for c in paper if c.method == "autolabel")["autolabel"]
    assert list(al["per_class"]) == ["balanced", "proportional"] and list(al["manual_curve"]) == [0.1, 1.0]
    assert "beta_factor" not in cdp  # the main models' cache keys are unchanged


def test_paper_numbers_and_reliability_flags():
    pn = {(p.dataset, p.variant, p.metric): p for p in E.paper_numbers}
    assert pn["fashion-mnist", "ori", "nll"].value == 3.242 and pn["fashion-mnist", "ori", "nll"].spread == 0.340
    assert pn["fashion-mnist", "mdp", "ood_auroc"].value == 0.709
    assert pn["fashion-mnist", "ensemble_cdp", "ece"].value == 0.044 and pn["fashion-mnist", "ensemble_cdp", "ece"].spread is None
    assert pn["fashion-mnist", "laplace_cdp", "nll"].value == 2.322
    # spec pitfalls 7-8: impossible ECE/MCE w. OOD pairs and the scrambled ensemble_mdp row are never flagged
    for key in (("ori", "ece_ood"), ("mdp", "mce_ood"), ("ensemble_mdp", "accuracy"), ("ensemble_mdp", "nll")):
        p = pn[("digits", *key)]
        assert p.spread is None and p.tolerance is None and "unreliable" in p.note
    # the impossible cells are impossible: ECE w. OOD > MCE w. OOD for ori and mdp
    for v in ("ori", "mdp"):
        assert pn["digits", v, "ece_ood"].value > pn["digits", v, "mce_ood"].value
    assert {p.metric for p in E.paper_numbers} <= {m.key for m in E.metrics}


def test_scores_match_the_metric_functions():
    """`scores` on random draws equals the metric functions called directly; T = 1 uses confidence for OOD."""
    from dubito.metrics import classification as cm
    from dubito.predictive.classes import ClassPredictive

    rng = np.random.default_rng(0)
    draws = rng.dirichlet(np.full(4, 0.7), size=(8, 200))
    pred, ood = ClassPredictive(draws), ClassPredictive(rng.dirichlet(np.ones(4), size=(8, 50)))
    y = rng.integers(0, 4, 200)
    m = thesis.scores(pred, y, {"a": ood}, "a")
    assert m["nll"] == pytest.approx(cm.nll(pred, y), rel=1e-12)
    assert m["ece_ood"] == pytest.approx(cm.ece(pred, y, ood=ood), rel=1e-12)
    assert m["ece"] <= m["mce"] and m["ece_ood"] <= m["mce_ood"]
    assert m["ood_auroc"] == pytest.approx(cm.ood_auroc(pred, ood, "mutual_information", y_in=y), rel=1e-12)
    assert m["miss_aupr"] == pytest.approx(cm.misclassification_aupr(pred, y, "confidence"), rel=1e-12)
    one = ClassPredictive(draws[:1])
    m1 = thesis.scores(one, y, {"a": ClassPredictive(draws[:1, :50])}, "a")
    assert m1["ood_auroc"] == m1["ood_auroc_a_conf"] and m1["ood_auroc_a_MI"] == pytest.approx(0.5)


def _row(variant, dataset="digits", **metrics):
    return SimpleNamespace(dataset=dataset, method=variant, split=0, seed=0, variants={variant: metrics},
                           artefacts={}, info={})


def test_verdicts_on_known_numbers():
    assert thesis.verdict([]) == "not checkable"
    assert thesis.verdict([True, True]) == "holds" and thesis.verdict([False]) == "does not hold"
    assert thesis.verdict([True, False]) == "partly"
    rows = [
        _row("ori", accuracy=0.57, nll=3.2, brier=0.72, ece=0.30, ece_ood=0.63, miss_auroc_conf=0.75,
             miss_auroc_H=0.74, miss_auroc_MI=0.5, pc_prec_10_conf=0.9, pc_prec_50_conf=0.7, pc_prec_100_conf=0.57,
             pc_area_conf=0.7),
        _row("cdp", accuracy=0.58, nll=2.1, brier=0.59, ece=0.12, ece_ood=0.29, ood_auroc=0.78, p_keep_start=0.9,
             p_keep_end=0.95, p_keep_sites_rising=1.0, miss_auroc_conf=0.78, miss_auroc_H=0.77, miss_auroc_MI=0.7,
             ood_auroc_letters_conf=0.7, ood_auroc_letters_H=0.72, ood_auroc_letters_MI=0.78, pc_area_conf=0.72),
        _row("mdp", accuracy=0.59, nll=1.9, brier=0.57, ece=0.11, ece_ood=0.38, ood_auroc=0.71, p_keep_start=0.9,
             p_keep_end=0.93, p_keep_sites_rising=0.75),
        _row("ensemble_cdp", ece=0.04, nll=1.45),
        _row("ensemble_mdp", ece=0.03, nll=2.5),
        _row("laplace_cdp (tuned)", accuracy=0.576, nll=2.12, ece=0.13),
        _row("cdp: no adaptation", accuracy=0.50),
        _row("cdp: uncertainty q=0.5", accuracy=0.60),
        _row("cdp: random q=0.5", accuracy=0.55),
        _row("cdp: manual q=0.5", accuracy=0.62),
    ]
    v = thesis.finding_verdicts(rows, "digits")
    assert v["H1"][0] == "holds"                       # both lower NLL/Brier/ECE, accuracy within 0.03
    assert v["H2"][0] == "partly"                      # ensemble_mdp's NLL is worse
    assert v["H3"][0] == "holds" and "ori" not in " ".join(v["H3"][1])  # no laplace_ori stored: ori not judged
    assert v["H4"][0] == "holds"                       # conf best for miss, MI best for OOD
    assert v["H5"][0] == "holds"                       # ECE w. > 1.5 x ECE w/o for ori, cdp and mdp
    assert v["H6"][0] == "partly"                      # mdp: only 75 % of the sites rise
    assert v["H7"][0] == "holds"
    assert v["H8"][0] == "holds"
    assert v["H9"][0] == "not checkable" and v["H9"][1] == []
    assert "0.780" in " ".join(v["H4"][1])


def test_manual_labels_needed():
    """Spec §2.9 "manual labels saved": first crossing of the (labels, accuracy) curve, linear in between."""
    curve = [(0, 0.5), (100, 0.6), (200, 0.7), (1000, 0.8)]
    assert thesis.manual_labels_needed(curve, 0.65) == (pytest.approx(150.0), False)
    assert thesis.manual_labels_needed(curve, 0.45) == (0.0, False)    # no adaptation already reaches it
    assert thesis.manual_labels_needed(curve, 0.8) == (1000.0, False)
    assert thesis.manual_labels_needed(curve, 0.9) == (1000.0, True)   # above every point: a lower bound
    # non-monotone curve: the first point that reaches the target
    assert thesis.manual_labels_needed([(0, 0.5), (10, 0.7), (20, 0.6), (40, 0.9)], 0.65)[0] == pytest.approx(7.5)


def test_new_checks_on_known_numbers():
    """S1 (relaxed vs hard sampler), S2 (T converged), H8 (e) labels saved, H9 weak context, H6 β lines."""
    rows = [
        _row("cdp", accuracy=0.60, nll=1.50, ece=0.05, ood_auroc=0.80, miss_auroc=0.75, p_keep_start=0.9,
             p_keep_end=0.95, p_keep_sites_rising=1.0, crf_acc_conf_w0=0.5, crf_acc_conf_grid=0.6, crf_acc_w0=0.55,
             crf_acc_wmax=0.2, crf_acc_grid=0.6, crf_w_grid=0.5, crf_w_max=32.0, crf_weak_acc_conf_w0=0.5,
             crf_weak_acc_conf_grid=0.52, crf_weak_acc_w0=0.55, crf_weak_acc_grid=0.56, crf_weak_w_grid=0.5),
        _row("cdp (hard sampler)", accuracy=0.605, nll=1.52, ece=0.06, ood_auroc=0.79, miss_auroc=0.76),
        _row("mdp", accuracy=0.60, nll=1.50, ece=0.05, ood_auroc=0.80, miss_auroc=0.75),
        _row("mdp (hard sampler)", accuracy=0.58, nll=1.52, ece=0.06, ood_auroc=0.79, miss_auroc=0.76),
        _row("cdp T=50", nll=1.51, ece=0.050, miss_auroc=0.750, ood_auroc=0.800),
        _row("cdp T=100", nll=1.50, ece=0.052, miss_auroc=0.751, ood_auroc=0.805),
        _row("cdp β×10", p_keep_start=0.9, p_keep_end=0.7, p_keep_sites_rising=0.0),
        _row("cdp: no adaptation", accuracy=0.50),
        _row("cdp: uncertainty q=0.5", accuracy=0.60, manual_labels_saved=120.0, n_selected=300.0,
             manual_saved_censored=0.0),
    ]
    v = thesis.finding_verdicts(rows, "digits")
    assert v["S1"][0] == "partly"            # cdp similar; mdp's accuracy moves by 0.02
    assert v["S2"][0] == "holds" and "T = 50 vs 100" in v["S2"][1][0]
    assert v["H8"][0] == "holds" and any("(e)" in x and "120" in x for x in v["H8"][1])
    assert v["H9"][0] == "holds" and any("weak context" in x for x in v["H9"][1])
    assert any("β = 10/N" in x and "not every site rises" in x for x in v["H6"][1]) and v["H6"][0] == "holds"


def test_h9_needs_a_gain_above_the_threshold():
    """A CRF 'gain' smaller than CRF_MIN_GAIN (0.005) is no improvement; the weak-context comparison is
    then not counted, and unaries that gain no more than ori do not 'gain more'."""
    tiny = dict(crf_acc_conf_w0=0.3310, crf_acc_conf_grid=0.3314, crf_acc_w0=0.417, crf_acc_wmax=0.267,
                crf_acc_grid=0.421, crf_w_grid=0.17, crf_w_max=32.0, crf_weak_acc_conf_w0=0.40,
                crf_weak_acc_conf_grid=0.40, crf_weak_acc_w0=0.40, crf_weak_acc_grid=0.40, crf_weak_w_grid=0.0)
    rows = [_row("ori", **tiny), _row("cdp", **{**tiny, "crf_acc_conf_grid": 0.3320})]
    v = thesis.finding_verdicts(rows, "digits")
    assert v["H9"][0] == "partly"  # collapse at large w holds; no gain does not
    assert any(x.startswith("ori:") and "gain 0.0004" in x and x.endswith("partly") for x in v["H9"][1])
    assert any("calibrated unaries gain more: cdp" in x and x.endswith("does not hold") for x in v["H9"][1])
    assert sum("not counted (strong context gains nothing here)" in x for x in v["H9"][1]) == 2


def test_sampler_switch_restores():
    """`_Sampler` switches every concrete / Multi-Drop layer to the hard sampler and back (spec §2.4)."""
    from dubito.classification import MCDropoutClassifier

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 5)), rng.integers(0, 3, 60)
    for dropout in ("concrete", "multidrop"):
        est = MCDropoutClassifier(dropout=dropout, n_samples=4, features=8, hidden=(8, 8, 8), epochs=1,
                                  validation_fraction=0.0, random_state=0).fit(X, y)
        relaxed = est.sample_logits(X, random_state=1)
        with _Sampler(est, "hard") as n:
            assert n == 4 and {m.mc_sampler for m in _Sampler(est, "hard").mods} == {"hard"}
            hard = est.sample_logits(X, random_state=1)
        assert not np.allclose(hard, relaxed)
        np.testing.assert_array_equal(est.sample_logits(X, random_state=1), relaxed)


def test_h5_threshold():
    rows = [_row("ori", ece=0.30, ece_ood=0.63), _row("cdp", ece=0.12, ece_ood=0.29), _row("mdp", ece=0.11, ece_ood=0.15)]
    v, lines = thesis.finding_verdicts(rows, "digits")["H5"]
    assert v == "partly" and sum("-> holds" in x for x in lines) == 2


def test_smoke_preset_end_to_end(tmp_path, monkeypatch):
    """Smoke preset (digits) through run_grid into a temporary store, then write_report: every cell done,
    Table 4.1 metrics finite with ECE <= MCE, the Laplace variants, and the report's sections."""
    from dubito.experiments.report import write_report
    from dubito.experiments.runner import run_grid
    from dubito.experiments.store import ResultsStore

    monkeypatch.setenv("DUBITO_THESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    store = tmp_path / "r.sqlite"
    summary = run_grid("thesis", preset="smoke", store=store, progress=False)
    assert (summary.done, summary.failed) == (9, 0), summary.failures
    rows = ResultsStore(store, create=False).rows("thesis", "smoke", status="done")
    by = {r.method: r for r in rows}
    for m in (*thesis.SINGLE, *thesis.ENSEMBLES):
        v = by[m].variants[m]
        for k in ("accuracy", "nll", "brier", "ece", "mce", "ece_ood", "mce_ood", "miss_auroc", "ood_auroc",
                  "crf_acc_w0", "crf_acc_grid", "pc_area_conf"):
            assert np.isfinite(v[k]), (m, k)
        assert v["ece"] <= v["mce"] + 1e-12 and v["ece_ood"] <= v["mce_ood"] + 1e-12
        assert 0.1 < v["accuracy"] < 1.0
        assert sum(by[m].artefacts["reliability"][m]["count"]) == by[m].info["n_pool"]
    assert {"laplace_cdp", "laplace_cdp (tuned)", "laplace_cdp +dropout"} <= set(by["cdp"].variants)
    assert "laplace_ori +dropout" not in by["ori"].variants and by["ori"].variants["ori"]["mean_mi"] == 0.0
    assert by["ensemble_cdp"].info["cache_hits"][0] is True  # reuses the seed-0 model of the cdp cell
    assert by["cdp"].variants["cdp"]["p_keep_start"] == pytest.approx(0.9, abs=1e-6)
    al = by["autolabel"].variants
    assert al["cdp: manual q=0.5"]["label_precision"] == 1.0
    assert al["cdp: manual q=0.5"]["n_selected"] == al["cdp: uncertainty q=0.5"]["n_selected"]

    # (1) T sensitivity and (5) relaxed vs hard sampler: predictions of the cell's own model
    for m in ("mcdp", "cdp", "mdp"):
        for t in (5, 10, 20):
            v = by[m].variants[f"{m} T={t}"]
            assert all(np.isfinite(v[k]) for k in ("accuracy", "nll", "ece", "ood_auroc", "miss_auroc", "mean_mi"))
    assert not any(" T=" in k for k in by["ori"].variants)
    for m in ("cdp", "mdp"):
        h = by[m].variants[f"{m} (hard sampler)"]
        assert all(np.isfinite(h[k]) for k in ("accuracy", "nll", "ece", "ece_ood", "ood_auroc"))
        assert h["nll"] != by[m].variants[m]["nll"]  # the sampler was switched ...
        b = by[m].variants[f"{m} β×10"]           # β sensitivity: a retrained model
        assert b["beta_factor"] == 10.0 and np.isfinite(b["nll"]) and np.isfinite(b["p_keep_end"])
    assert "mcdp (hard sampler)" not in by["mcdp"].variants
    # (2) weak-context CRF on the same unaries, for every method
    for m in (*thesis.SINGLE, *thesis.ENSEMBLES):
        v = by[m].variants[m]
        for k in ("crf_weak_acc_w0", "crf_weak_acc_grid", "crf_weak_acc_conf_grid", "crf_weak_acc_wmax",
                  "pc_prec_20_conf_balanced", "pc_prec_20_conf_proportional", "pc_even_20_conf_balanced"):
            assert np.isfinite(v[k]), (m, k)
        assert by[m].artefacts["crf_sweep_weak"][m]["w"] == [0.0, 32.0]
    # (3) class-balanced auto-label selection and (4) manual labels saved
    for pc in ("balanced", "proportional"):
        r = al[f"cdp: uncertainty ({pc}) q=0.5"]
        assert all(np.isfinite(r[k]) for k in ("accuracy", "label_precision", "class_count_min", "manual_labels_saved"))
    plain, bal = al["cdp: uncertainty q=0.5"], al["cdp: uncertainty (balanced) q=0.5"]
    assert bal["n_selected"] == plain["n_selected"] and bal["class_count_min"] >= plain["class_count_min"]
    assert {"cdp: manual q=0.1", "cdp: manual q=1"} <= set(al)
    for k in ("cdp: uncertainty q=0.5", "cdp: random q=0.5", "cdp: all pseudo-labelled (q = 1)"):
        assert np.isfinite(al[k]["manual_labels_saved"]) and al[k]["manual_labels_saved"] >= 0
        assert al[k]["manual_labels_saved"] <= al["cdp: manual q=1"]["n_selected"]
    assert "manual_labels_saved" not in al["cdp: manual q=0.5"]

    md = write_report("thesis", store, out_dir=tmp_path / "out", preset="smoke").read_text()
    for text in ("## digits: Table 4.1 beside the thesis", "## digits: the Laplace table", "ensemble_mdp (thesis)",
                 "## digits: uncertainty measures", "## digits: reliability diagrams", "## digits: auto-labelling",
                 "## digits: context CRF", "## digits: findings H1-H9", "**H9**", "All cells of the preset",
                 "### Beside the paper", "†",
                 "## digits: sensitivity to the number of MC samples T", "| cdp | 20 |",
                 "## digits: concrete dropout's test-time sampler, relaxed vs hard", "| cdp (hard sampler) (ours) |",
                 "## digits: concrete-dropout regulariser scale β", "| mdp β×10 | 10/N |",
                 "| cdp (weak context) |", "| ensemble_mdp (weak context) |", "cdp: uncertainty (balanced) q=0.5",
                 "manual labels saved |", "**S1**", "**S2**", "(e) manual labels saved", "weak context (overlapping"):
        assert text in md, text
    assert "n/a | n/a | n/a" not in md.split("## digits: sensitivity to the number")[1].split("## ")[0]
