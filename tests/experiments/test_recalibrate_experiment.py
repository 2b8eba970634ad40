"""The recalibrate experiment: its grid, the calibration split, a cell end to end against the
recalibrators applied by hand, and its report tables."""

from types import SimpleNamespace

import numpy as np
import pytest

from dubito.experiments import common
from dubito.experiments import recalibrate as rc
from dubito.experiments.base import Cell
from dubito.experiments.common import network_seed

E = rc.EXPERIMENT


def test_grids(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    assert [(c.dataset, c.method, c.split) for c in E.cells("quick")] == [("yacht", "ensemble", 0)]
    assert len(E.cells("paper")) == len(rc.METHODS) * (8 * 20 + 5)


def test_calibration_split_is_a_seeded_partition():
    fit, cal = rc.cell_calibration_split(308, 0, 3)
    assert cal.size == round(0.2 * 308) and np.array_equal(np.union1d(fit, cal), np.arange(308))
    assert np.intersect1d(fit, cal).size == 0
    again = rc.cell_calibration_split(308, 0, 3)
    assert np.array_equal(again[1], cal) and not np.array_equal(rc.cell_calibration_split(308, 0, 4)[1], cal)


def test_a_cell_equals_the_recalibrators_applied_by_hand(uci_dir, monkeypatch):
    from dubito.data import load
    from dubito.methods import get_method
    from dubito.metrics import regression_summary
    from dubito.recalibrate import Recalibrator, conformal_interval

    monkeypatch.setattr(common, "_availability", {})
    fast = {"overrides": {"epochs": 30, "n_members": 2}}
    res = rc.run_cell(Cell("recalibrate", "t", "yacht", "ensemble", 0, 0, fast))
    X_tr, y_tr, X_te, y_te = load("yacht").split(0)
    fit, cal = rc.cell_calibration_split(len(y_tr), 0, 0)
    est = get_method("ensemble").make(random_state=network_seed(0, 0), progress=False, **fast["overrides"])
    est.fit(X_tr[fit], y_tr[fit])
    p_cal, p_te = est.predict_distribution(X_tr[cal]), est.predict_distribution(X_te)
    assert res.variants["ensemble"]["nll"] == pytest.approx(regression_summary(p_te, y_te)["nll"], rel=1e-12)
    for how in rc.RECALIBRATIONS:
        direct = regression_summary(Recalibrator(method=how).fit(p_cal, y_tr[cal]).transform(p_te), y_te)
        got = res.variants[f"ensemble {how}"]
        for key in ("coverage_95", "calibration_error", "crps"):
            assert got[key] == pytest.approx(direct[key], rel=1e-9, abs=1e-12)
    lo, hi = conformal_interval(p_cal, y_tr[cal], p_te, level=0.95, score="cqr")
    assert res.variants["ensemble interval-cqr"]["coverage_95"] == np.mean((y_te >= lo) & (y_te <= hi))
    assert res.info["n_calibration"] == cal.size and res.info["n_fit"] == fit.size


def _row(dataset, variants):
    return SimpleNamespace(dataset=dataset, variants=variants)


def test_report_shows_before_and_after():
    m = dict(coverage_95=0.8, coverage_50=0.4, calibration_error=0.1, nll=2.0, width_95=3.0)
    rows = [_row("boston", {"ensemble": m, "ensemble isotonic": {**m, "coverage_95": 0.9},
                            "ensemble conformal": {**m, "coverage_95": 0.96},
                            "ensemble interval-absolute": {"coverage_95": 0.95, "width_95": 4.0}})]
    text = "\n".join(rc.report_sections(rows, E.preset("paper")))
    assert "| boston | 0.8 → 0.9 → 0.96 (1) |" in text
    assert "| boston | ensemble | 0.8 / 3 | 0.95 / 4 | n/a / n/a | n/a / n/a |" in text
    assert "| wine | — |" in text
