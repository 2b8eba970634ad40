"""The leaderboard experiment: its grid, a cell end to end, and the target tables of its report."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from dubito.experiments import common, uci
from dubito.experiments import leaderboard as lb
from dubito.experiments.base import Cell
from dubito.experiments.common import network_seed
from dubito.methods import METHODS as REGISTRY

E = lb.EXPERIMENT


def test_grids(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    quick = E.cells("quick")
    assert [(c.dataset, c.method, c.split) for c in quick] == [("yacht", "ensemble", 0), ("yacht", "ensemble-tuned", 0)]
    paper = E.cells("paper")
    # the costly methods run on the first 5 splits of each set (protein has only 5)
    full = len(lb.METHODS) + len(lb.PEERS) - len(lb.FIRST_SPLITS_ONLY) - len(lb.COMPARED_ON)
    # protein has 5 splits, the other sets 20
    compared = sum(20 * len(set(sets) - {"protein"}) + 5 * ("protein" in sets) for sets in lb.COMPARED_ON.values())
    assert len(paper) == full * (8 * 20 + 5) + len(lb.FIRST_SPLITS_ONLY) * 9 * 5 + compared
    assert {c.split for c in paper if c.method == "deepnoise"} == set(range(5))
    # a comparison row runs only on the sets its change moved
    assert {c.dataset for c in paper if c.method == "mc-dropout-unscaled"} == {"wine", "kin8nm", "naval", "power"}
    assert {c.dataset for c in E.cells("defaults") if c.method == "ensemble-epochs"} == set(lb.SMALL_SETS)
    assert {entry for entry, _ in lb.METHODS.values()} <= set(REGISTRY)  # every row is a CLI method
    assert set(lb.TARGET_NLL) == set(uci.DATASETS)


def test_a_default_and_a_tuned_cell(uci_dir, monkeypatch):
    """A cell's numbers are those of the CLI method fitted directly with the cell's seed; a tuned
    cell records its choice. Small budgets (overrides) keep it to seconds."""
    import numpy as np

    from dubito.data import load
    from dubito.methods import get_method
    from dubito.metrics import regression_summary

    monkeypatch.setattr(common, "_availability", {})
    fast = {"overrides": {"epochs": 30, "n_members": 2}}
    res = lb.run_cell(Cell("leaderboard", "t", "yacht", "ensemble", 0, 0, fast))
    X_tr, y_tr, X_te, y_te = load("yacht").split(0)
    est = get_method("ensemble").make(random_state=network_seed(0, 0), progress=False, **fast["overrides"])
    direct = regression_summary(est.fit(X_tr, y_tr).predict_distribution(X_te), y_te)
    m = res.variants["ensemble"]
    assert m["nll"] == pytest.approx(direct["nll"], rel=1e-12) and m["rmse"] == pytest.approx(direct["rmse"], rel=1e-12)
    assert m["fit_seconds"] > 0 and res.info["stopped_by"] in ("patience", "cap")
    assert len(res.info["best_epoch"]) == 2
    assert res.info["input_encoding"] == est.input_encoding_  # the encoding "auto" kept, and both scores
    assert res.info["encoding_scores"] == est.encoding_scores_
    assert set(est.encoding_scores_) == {"none", "piecewise_linear"}
    tuned = lb.run_cell(Cell("leaderboard", "t", "yacht", "ensemble-tuned", 0, 0, {**fast, "n_trials": 2}))
    assert set(tuned.info["best_params"]) == {"lr", "prior_precision", "input_encoding"}  # the declared space
    assert np.isfinite(tuned.variants["ensemble-tuned"]["nll"]) and np.isfinite(tuned.info["tuning_nll"])
    former = lb.run_cell(Cell("leaderboard", "t", "yacht", "ensemble-tuned-former-space", 0, 0,
                              {**fast, "n_trials": 2}))
    assert set(former.info["best_params"]) == {"lr", "weight_decay", "hidden"}  # the row's own space
    # MC dropout records the rate "auto" kept and both rates' held-out NLL; its former row pins 0.05
    mcd = lb.run_cell(Cell("leaderboard", "t", "yacht", "mc-dropout", 0, 0, {"overrides": {"epochs": 20}}))
    assert mcd.info["dropout"] in (0.05, 0.01) and set(mcd.info["dropout_scores"]) == {"0.05", "0.01"}
    fixed = lb.run_cell(Cell("leaderboard", "t", "yacht", "mc-dropout-fixed-rate", 0, 0, {"overrides": {"epochs": 20}}))
    assert fixed.info["dropout"] == 0.05 and "dropout_scores" not in fixed.info
    same = mcd.variants["mc-dropout"]["nll"] == fixed.variants["mc-dropout-fixed-rate"]["nll"]
    assert same == (mcd.info["dropout"] == 0.05)  # "auto" keeping 0.05 is the fixed rate's fit, bit for bit


@pytest.mark.filterwarnings("ignore::dubito.inference.diagnostics.ConvergenceWarning")  # short VI runs
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # dead ReLU units of a 2-epoch network
def test_the_papers_icnlm_row_is_the_estimator_without_the_random_intercept_or_the_scale(uci_dir, monkeypatch):
    from dubito.data import load
    from dubito.methods import get_method
    from dubito.metrics import regression_summary

    monkeypatch.setattr(common, "_availability", {})
    fast = {"overrides": {"epochs": 2, "vi_max_iter": 300, "vi_min_iter": 100, "n_draws": 50}}
    paper = lb.run_cell(Cell("leaderboard", "t", "yacht", "icnlm-paper", 0, 0, fast)).variants["icnlm-paper"]
    default = lb.run_cell(Cell("leaderboard", "t", "yacht", "icnlm", 0, 0, fast)).variants["icnlm"]
    X_tr, y_tr, X_te, y_te = load("yacht").split(0)
    est = get_method("icnlm").make(random_state=network_seed(0, 0), progress=False, intercept=False,
                                   variance_scaling="none", **fast["overrides"])
    direct = regression_summary(est.fit(X_tr, y_tr).predict_distribution(X_te), y_te)
    assert paper["nll"] == pytest.approx(direct["nll"], rel=1e-12)
    assert abs(default["nll"] - paper["nll"]) > 1e-3  # the default row is another model (the check can fail)


def test_the_paper_budget_rows_train_with_the_icnlm_papers_rate_and_cap(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    built, real = [], lb.get_method

    class Spy:  # records the estimators that run_cell makes
        def __init__(self, name):
            self.method = real(name)

        def make(self, **kw):
            built.append(self.method.make(**kw))
            return built[-1]

    monkeypatch.setattr(lb, "get_method", Spy)
    lb.run_cell(Cell("leaderboard", "t", "yacht", "deterministic-paper", 0, 0, {}))
    lb.run_cell(Cell("leaderboard", "t", "yacht", "deterministic", 0, 0, {}))
    assert [(e.lr, e.epochs) for e in built] == [(2.5e-4, 60), (1e-3, 500)]


def test_the_epoch_budget_rows_are_the_estimators_before_auto():
    """``ensemble-epochs`` and ``mc-dropout-epochs`` keep the budget those estimators had before
    "auto": 20 epochs of patience, a 500-epoch cap, which "auto" resolves to on sets of thousands
    of rows."""
    from dubito.early_stopping import resolve_budget

    before = lb.get_method("ensemble").make(**lb.OVERRIDES["ensemble-epochs"])
    now = lb.get_method("ensemble").make()
    assert (before.patience, before.epochs) == (20, 500) and (now.patience, now.epochs) == ("auto", "auto")
    assert resolve_budget("auto", "auto", 6635, now.batch_size, held_out=True) == (20, 500)  # kin8nm
    assert "ensemble-epochs" in lb.FAST and lb.METHODS["ensemble-epochs"] == ("ensemble", False)
    dropout = lb.get_method("mc-dropout").make(**lb.OVERRIDES["mc-dropout-epochs"])
    assert (dropout.patience, dropout.epochs) == (20, 500) and lb.get_method("mc-dropout").make().patience == "auto"
    # the rows renamed before session 21's changes keep what their cells ran with: a constant rate, no scale
    assert before.lr_drop == "none" and now.lr_drop == "plateau"
    assert lb.get_method("ensemble").make(**lb.OVERRIDES["ensemble-constant-lr"]).lr_drop == "none"
    assert dropout.variance_scaling == "none" and lb.get_method("mc-dropout").make().variance_scaling == "auto"
    for row in ("mc-dropout-paper", "mc-dropout-unscaled"):
        assert lb.get_method("mc-dropout").make(**lb.OVERRIDES[row]).variance_scaling == "none"
    # the -paper rows keep the patience their cells ran with
    assert lb.get_method("mc-dropout").make(**lb.OVERRIDES["mc-dropout-paper"]).patience == 20


def _row(dataset, method, nll, coverage=0.95, seconds=1.0):
    metrics = dict(nll=nll, coverage_95=coverage, fit_seconds=seconds, predict_seconds=0.0)
    return SimpleNamespace(dataset=dataset, variants={method: metrics})


def _one_split(name):
    """The preset on split 0 only, so that one row per set is every split."""
    return replace(E.preset(name), splits=(0,))


def test_the_mdn_on_wine_is_shown_but_neither_counted_nor_best():
    rows = [_row("wine", "mdn", -2.1), _row("wine", "ensemble", 0.92)]
    lines = lb.report_sections(rows, _one_split("defaults"))
    wine = next(line for line in lines if line.startswith("| wine |"))
    assert "-2.1" in wine and "†" in wine and wine.rstrip(" |").endswith("ensemble")
    assert any("mdn 0/9" in line for line in lines)


def test_report_counts_targets_met_by_one_method():
    """A method at or below the target NLL on 6 sets meets the bar; means are over its splits
    (yacht: (-0.3 + -0.1) / 2 = -0.2 > -0.21, so not met there)."""
    rows = [_row(d, "ensemble", lb.TARGET_NLL[d] - 0.01) for d in ("boston", "concrete", "energy", "kin8nm",
                                                                    "naval", "power")]
    rows += [_row("yacht", "ensemble", -0.3), _row("yacht", "ensemble", -0.1), _row("protein", "mdn", 2.1)]
    text = "\n".join(lb.report_sections(rows, _one_split("paper")))
    assert "ensemble 6/9" in text and "mdn 1/9" in text and "The bar is 6 of 9 for one method: met." in text
    assert "| yacht | -0.21 | -0.2 (n=2) | — | ensemble |" in text
    assert "| protein | 2.63 | — | **2.1 (n=1)** | mdn |" in text
    rows = rows[1:]
    assert "not met" in "\n".join(lb.report_sections(rows, _one_split("paper")))


def test_a_set_counts_only_once_every_split_is_in():
    """A mean over 8 of naval's 20 splits is shown and marked, but neither a win nor the best until
    all 20 are stored; then it counts."""
    rows = [_row("naval", "ensemble", -8.4) for _ in range(8)] + [_row("naval", "mdn", -6.0) for _ in range(20)]
    text = "\n".join(lb.report_sections(rows, E.preset("defaults")))
    assert "| naval | -7.25 | -8.4 (n=8 of 20) ‡ | -6 (n=20) | mdn |" in text and "ensemble 0/9" in text
    rows += [_row("naval", "ensemble", -8.4) for _ in range(12)]
    text = "\n".join(lb.report_sections(rows, E.preset("defaults")))
    assert "| naval | -7.25 | **-8.4 (n=20)** | -6 (n=20) | ensemble |" in text and "ensemble 1/9" in text


def test_first_split_methods_are_marked_and_not_counted():
    """deepnoise runs on the first 5 splits in the paper preset: starred, never a win or the best."""
    rows = [_row(d, "deepnoise", lb.TARGET_NLL[d] - 1.0) for d in lb.TARGET_NLL]
    rows += [_row("boston", "ensemble", 3.0)]
    text = "\n".join(lb.report_sections(rows, _one_split("paper")))
    assert "| deepnoise* |" in text and "deepnoise 0/9" not in text and "not met" in text
    assert "| boston | 2.24 | 3 (n=1) | 1.24 (n=1) | ensemble |" in text


def test_peer_rows_are_shown_but_not_counted():
    rows = [_row(d, "ngboost", lb.TARGET_NLL[d] - 1.0) for d in lb.TARGET_NLL] + [_row("boston", "ensemble", 3.0)]
    text = "\n".join(lb.report_sections(rows, _one_split("defaults")))
    assert "| ngboost* |" in text and "ngboost 0/9" not in text and "not met" in text
    assert "| boston | 2.24 | 3 (n=1) | 1.24 (n=1) | ensemble |" in text


def test_ngboost_peer_without_ngboost_says_how_to_install(monkeypatch):
    import sys

    from dubito.experiments.peers import NGBoostPeer

    monkeypatch.setitem(sys.modules, "ngboost", None)  # import ngboost -> ImportError
    with pytest.raises(ImportError, match="pip install ngboost"):
        NGBoostPeer().fit(np.zeros((10, 2)), np.arange(10.0))


def test_ngboost_peer_matches_ngboost_refitted_with_its_stages():
    """The peer's predictive is NGBoost's Normal (loc, scale^2) refitted on every row with the
    stages the held-out 20 % chose (runs where ngboost is installed; an optional peer)."""
    ngboost = pytest.importorskip("ngboost")
    from ngboost.distns import Normal as NGBNormal

    from dubito.experiments.peers import NGBoostPeer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + 0.3 * rng.normal(size=200)
    peer = NGBoostPeer(random_state=1).fit(X, y)
    assert 1 <= peer.n_stages_ <= 2000
    ref = ngboost.NGBRegressor(Dist=NGBNormal, n_estimators=peer.n_stages_, verbose=False, random_state=1).fit(X, y)
    pred, dist = peer.predict_distribution(X[:20]), ref.pred_dist(X[:20])
    np.testing.assert_allclose(pred.mean, dist.params["loc"], rtol=1e-12)
    np.testing.assert_allclose(pred.var, dist.params["scale"] ** 2, rtol=1e-12)
