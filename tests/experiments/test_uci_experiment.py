"""The `uci` experiment (deep ensembles on the UCI benchmark): grid, paper numbers, cells."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dubito.experiments import Cell, common, get, uci

E = get("uci")

# Lakshminarayanan et al. (2017), Table 1, deep ensembles: (NLL, RMSE) means and their +-.
TABLE1 = {
    "boston": ((2.41, 0.25), (3.28, 1.00)),
    "concrete": ((3.06, 0.18), (6.03, 0.58)),
    "energy": ((1.38, 0.22), (2.09, 0.29)),
    "kin8nm": ((-1.20, 0.02), (0.09, 0.00)),
    "naval": ((-5.63, 0.05), (0.00, 0.00)),
    "power": ((2.79, 0.04), (4.11, 0.17)),
    "protein": ((2.83, 0.02), (4.71, 0.06)),
    "wine": ((0.94, 0.12), (0.64, 0.04)),
    "yacht": ((1.18, 0.21), (1.58, 0.48)),
}
KEYS = {"rmse", "nll", "nll_normal", "crps", "coverage_95", "width_95", "ratio_epi_ale"}


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No local copies and no reachable mirror; the availability cache cleared."""
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("DUBITO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DUBITO_DATA_URL", "http://127.0.0.1:9/")  # discard port: refused at once
    monkeypatch.setattr(common, "_availability", {})


def test_quick_grid(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    cells = E.cells("quick")
    assert [(c.dataset, c.split, c.seed) for c in cells] == [
        ("yacht", 0, 0), ("yacht", 1, 0), ("energy", 0, 0), ("energy", 1, 0)]
    assert all(c.method == "ensemble" and c.settings["epochs"] <= 10 for c in cells)


def test_paper_grid(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    cells = E.cells("paper")
    counts = {d: sum(c.dataset == d for c in cells) for d in uci.DATASETS}
    assert counts == {**{d: 20 for d in uci.DATASETS}, "protein": 5}
    assert len(cells) == 165
    s = cells[0].settings
    assert (s["n_members"], s["hidden"], s["hidden_large"], s["epochs"], s["batch_size"]) == (5, 50, 100, 40, 100)
    assert s["lr_drop"] == "none"  # "fixed learning rate"


def test_paper_numbers_table1():
    pn = {(p.dataset, p.variant, p.metric): p for p in E.paper_numbers}
    assert len(pn) == 27  # NLL beside both our mixture NLL and the paper's Gaussian NLL
    for d, ((nll, nll_pm), (rmse, rmse_pm)) in TABLE1.items():
        assert (pn[d, "DE", "nll"].value, pn[d, "DE", "nll"].spread) == (nll, nll_pm)
        assert (pn[d, "DE", "nll_normal"].value, pn[d, "DE", "nll_normal"].spread) == (nll, nll_pm)
        assert (pn[d, "DE", "rmse"].value, pn[d, "DE", "rmse"].spread) == (rmse, rmse_pm)
    assert all("sd over splits" in p.note for p in pn.values())
    assert "standard deviation" in E.notes and "sqrt(20)" in E.notes
    assert {p.metric for p in E.paper_numbers} <= {m.key for m in E.metrics}


def test_unavailable_offline_lists_every_dataset(offline):
    missing = E.unavailable(E.preset("quick"))
    assert set(missing) == {"yacht", "energy"}
    assert all("download failed" in r for r in missing.values())
    assert E.cells("quick") == []


def test_unavailable_empty_with_local_copies(uci_dir, monkeypatch):
    monkeypatch.setattr(common, "_availability", {})
    assert E.unavailable(E.preset("paper")) == {}


def _tiny(dataset="yacht", split=0, epochs=2):
    return Cell("uci", "test", dataset, "ensemble", split, 0, dict(uci.SETTINGS, epochs=epochs))


def test_run_cell_yacht(uci_dir):
    res = uci.run_cell(_tiny())
    assert list(res.variants) == ["DE", "EXT"]
    de, ext = res.variants["DE"], res.variants["EXT"]
    for m in (de, ext):
        assert KEYS <= set(m) and all(np.isfinite(v) for v in m.values())
    assert de["rmse"] == ext["rmse"]
    assert ext["width_95"] > de["width_95"] and ext["ratio_epi_ale"] > de["ratio_epi_ale"]
    assert res.info["n_train"] == 277 and res.info["n_test"] == 31  # standard split of 308 rows
    assert res.info["settings"]["hidden"] == [50] and res.info["settings"]["n_members"] == 5
    assert len(res.artefacts["pit"]["DE"]) == 31
    json.dumps(res.variants), json.dumps(res.artefacts), json.dumps(res.info)
    assert uci.run_cell(_tiny()).variants == res.variants  # fixed seeds


def test_nll_normal_is_the_moment_matched_gaussian(uci_dir):
    """nll_normal equals the NLL of N(mixture mean, mixture variance); the mixture's own NLL
    (nll) can be lower or higher, but both are finite and close on a trained ensemble."""
    from dubito.data import load
    from dubito.metrics import nll
    from dubito.predictive.normal import Normal
    from dubito.regression import DeepEnsembleRegressor

    X_tr, y_tr, X_te, y_te = load("yacht").split(0)
    est = DeepEnsembleRegressor(n_members=3, hidden=(50,), epochs=3, batch_size=100, lr=0.01,
                                weight_decay=1e-8, lr_drop="none", random_state=0, progress=False).fit(X_tr, y_tr)
    pred = est.predict_distribution(X_te)
    m = uci._metrics(pred, y_te)
    assert m["nll_normal"] == pytest.approx(float(np.mean(nll(Normal(pred.mean, pred.var), y_te))), rel=1e-10)
