"""The `thesis` experiment (Feng 2019, spec classification-thesis.md): grids, the thesis's tables with
their reliability flags, the Table 4.1 scores against the metric functions, the finding verdicts on
known numbers, and the smoke preset end to end through `run_grid` and `write_report` (~35 s)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dubito.experiments import get, thesis

E = get("thesis")


def test_grids():
    smoke = E.cells("smoke")
    # 4 single methods + autolabel at seed 0, 4 ensembles once
    assert sorted(c.method for c in smoke) == sorted([*thesis.SINGLE, *thesis.ENSEMBLES, "autolabel"])
    paper = E.cells("paper")
    assert len(paper) == 5 * 3 + 4  # singles and autolabel x 3 seeds, ensembles once (members = seeds 0-2)
    assert {c.seed for c in paper if c.method.startswith("ensemble_")} == {0}
    s = next(c.settings for c in paper if c.method == "ensemble_cdp")
    assert list(s["member_seeds"]) == [0, 1, 2] and s["n_samples"] == 50 and s["network"] == "cnn"
    assert thesis.DROPOUT == {"ori": "none", "mcdp": "bernoulli", "cdp": "concrete", "mdp": "multidrop"}


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

    md = write_report("thesis", store, out_dir=tmp_path / "out", preset="smoke").read_text()
    for text in ("## digits: Table 4.1 beside the thesis", "## digits: the Laplace table", "ensemble_mdp (thesis)",
                 "## digits: uncertainty measures", "## digits: reliability diagrams", "## digits: auto-labelling",
                 "## digits: context CRF", "## digits: findings H1-H9", "**H9**", "All cells of the preset",
                 "### Beside the paper", "†"):
        assert text in md, text
