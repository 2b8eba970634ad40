"""The `ensembles` experiment (Hoffmann & Elster 2021): grid, paper numbers, availability, cells."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dubito.experiments import Cell, get
from dubito.experiments import ensembles as ens

E = get("ensembles")

# Table 2 of the paper as printed in the spec (§4), coverages in percent.
SPEC_TABLE2 = {
    "qsar": {"rmse": (0.555, 0.557, 0.555, 0.557), "epi_coverage": (24.8, 28.4, 42.2, 47.7),
             "total_coverage": (95.4, 95.4, 95.4, 95.4), "ratio_epi_ale": (0.030, 0.036, 0.088, 0.098)},
    "yacht": {"rmse": (0.085, 0.078, 0.085, 0.078), "epi_coverage": (75.8, 87.1, 82.3, 90.3),
              "total_coverage": (98.4, 98.4, 98.4, 98.4), "ratio_epi_ale": (0.284, 0.383, 0.412, 0.509)},
    "blog": {"rmse": (0.684, 0.683, 0.684, 0.683), "epi_coverage": (41.0, 44.7, 41.6, 45.0),
             "total_coverage": (96.8, 96.8, 96.8, 96.8), "ratio_epi_ale": (0.093, 0.092, 0.094, 0.092)},
    "msd": {"rmse": (0.795, 0.795, 0.795, 0.795), "epi_coverage": (20.4, 22.8, 20.5, 22.8),
            "total_coverage": (95.2, 95.3, 95.2, 95.3), "ratio_epi_ale": (0.024, 0.027, 0.024, 0.027)},
}
T2_VARIANTS = ("DE L=5", "DE L=10", "EXT L=5", "EXT L=10")
TOY_KEYS = {"rmse", "rmse_eta", "epi_coverage", "total_coverage", "ratio_epi_ale", "ratio_of_means", "nll"}


def _write_user_files(root):
    """Tiny files in the raw formats of qsar, blog and msd under ``root`` (a DUBITO_DATA)."""
    rng = np.random.default_rng(0)
    (root / "qsar").mkdir()
    rows = rng.normal(size=(40, 9)).round(3)
    (root / "qsar" / "qsar_aquatic_toxicity.csv").write_text("\n".join(";".join(map(str, r)) for r in rows) + "\n")
    (root / "blog").mkdir()
    for name, n in (("blogData_train.csv", 30), ("blogData_test-2012.03.01.00_00.csv", 6)):
        rows = rng.integers(0, 5, size=(n, 281))
        (root / "blog" / name).write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    (root / "msd").mkdir()
    rows = np.column_stack([rng.integers(1950, 2010, size=30), rng.normal(size=(30, 90)).round(3)])
    (root / "msd" / "YearPredictionMSD.txt").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")


@pytest.fixture
def no_user_files(monkeypatch, uci_dir, tmp_path):
    """DUBITO_DATA with the UCI copies (yacht) but no qsar/blog/msd files."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "yacht").symlink_to(uci_dir / "yacht")
    monkeypatch.setenv("DUBITO_DATA", str(root))
    return root


# ------------------------------------------------------------------------------ grid


def test_quick_grid(no_user_files):
    cells = E.cells("quick")
    assert [c.dataset for c in cells] == ["toy1", "toy2-N200", "toy2-L", "yacht"]
    assert {(c.method, c.split, c.seed) for c in cells} == {("ensemble", 0, 0)}
    assert all(c.settings["epochs"] <= 10 for c in cells)


def test_paper_grid_without_user_files(no_user_files):
    cells = E.cells("paper")
    by = {}
    for c in cells:
        by.setdefault(c.dataset, []).append((c.split, c.seed))
    toy2n = [f"toy2-N{n}" for n in (100, 200, 400, 800, 1600, 3200, 6400)]
    assert list(by) == ["toy1", *toy2n, "toy2-L", "yacht"]  # qsar, blog, msd skipped
    for d in ["toy1", *toy2n, "toy2-L"]:
        assert by[d] == [(k, 0) for k in range(5)]
    assert by["yacht"] == [(k, 0) for k in range(10)]
    assert len(cells) == 55
    assert all(c.settings["epochs"] is None for c in cells)  # each dataset's paper epochs


def test_variant_names():
    assert ens.variant_names("toy1") == ["DE", "EXT"]
    assert ens.variant_names("toy2-N3200") == ["DE", "EXT"]
    assert ens.variant_names("toy2-L") == [f"{m} L={k}" for m in ("DE", "EXT") for k in (1, 2, 3, 5, 10)]
    for d in ("yacht", "qsar", "blog", "msd"):
        assert ens.variant_names(d) == ["DE L=5", "DE L=10", "EXT L=5", "EXT L=10"]


def test_protocol_matches_spec_table1_and_toys():
    p = ens.PROTOCOL
    assert (p["toy1"]["n_train"], p["toy1"]["lr"], p["toy1"]["epochs"], p["toy1"]["batch_size"]) == (200, 1 / 200, 60, 64)
    assert p["toy1"]["lr_drop"] == "step" and p["toy1"]["weight_decay"] is None  # lambda = 1/N
    assert p["toy2-L"]["n_train"] == 600 and p["toy2-L"]["lr"] == 1 / 600
    assert p["toy2-N6400"]["lr"] == 1e-3 and p["toy2-N6400"]["n_train"] == 6400
    table1 = {"qsar": (1e-3, 1e-2, 128, 60), "yacht": (1e-3, 1e-3, 8, 100), "blog": (1e-5, 1e-5, 64, 50),
              "msd": (5e-5, 1e-4, 128, 40)}
    for d, row in table1.items():
        assert (p[d]["lr"], p[d]["weight_decay"], p[d]["batch_size"], p[d]["epochs"]) == row
        assert p[d]["lr_drop"] == "halving" and p[d]["n_members"] == 10


# ------------------------------------------------------------------------------ paper numbers


def test_table2_paper_numbers_complete():
    pn = {(p.dataset, p.variant, p.metric): p for p in E.paper_numbers}
    for dataset, metrics in SPEC_TABLE2.items():
        for metric, values in metrics.items():
            for variant, value in zip(T2_VARIANTS, values):
                p = pn.pop((dataset, variant, metric))
                expected = value / 100 if "coverage" in metric else value
                assert p.value == pytest.approx(expected, abs=1e-12)
                assert p.spread is None and p.tolerance is not None and p.tolerance > 0
                assert "Table 2" in p.source
    # spec P10 tolerances
    assert pn_tol("yacht", "rmse") == 0.05 and pn_tol("qsar", "epi_coverage") == 0.08
    assert pn_tol("blog", "rmse") == 0.03 and pn_tol("msd", "total_coverage") == 0.03
    # what remains are the toy claims
    assert {d for d, _, _ in pn} == {"toy1", "toy2-L", *(f"toy2-N{n}" for n in ens.TOY2_NS)}


def pn_tol(dataset, metric):
    return next(p.tolerance for p in E.paper_numbers if p.dataset == dataset and p.metric == metric)


def test_toy_claims_as_ranges():
    pn = {(p.dataset, p.variant, p.metric): p for p in E.paper_numbers}
    de = pn["toy1", "DE", "epi_coverage"]
    assert de.value + de.tolerance == pytest.approx(0.60)  # "< 60 %"
    ext = pn["toy1", "EXT", "epi_coverage"]
    assert ext.value - ext.tolerance == pytest.approx(0.95) and ext.value + ext.tolerance == pytest.approx(1.0)
    assert pn["toy2-L", "EXT L=1", "epi_coverage"].value == pytest.approx(0.70)
    assert pn["toy2-L", "DE L=1", "epi_coverage"].value == 0.0
    for n in ens.TOY2_NS:
        p = pn[f"toy2-N{n}", "EXT", "epi_coverage"]
        assert p.value - p.tolerance == pytest.approx(0.80)
    metric_keys = {m.key for m in E.metrics}
    assert {p.metric for p in E.paper_numbers} <= metric_keys


# ------------------------------------------------------------------------------ availability


def test_unavailable_lists_user_datasets_when_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    missing = E.unavailable(E.preset("paper"))
    assert set(missing) == {"qsar", "blog", "msd"}
    assert all("not found" in reason or "not set" in reason for reason in missing.values())
    assert E.unavailable(E.preset("quick")) == {}
    monkeypatch.delenv("DUBITO_DATA")
    assert set(E.unavailable(E.preset("paper"))) == {"qsar", "blog", "msd"}


def test_unavailable_empty_when_files_exist(monkeypatch, tmp_path, uci_dir):
    _write_user_files(tmp_path)
    (tmp_path / "yacht").symlink_to(uci_dir / "yacht")
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    assert E.unavailable(E.preset("paper")) == {}
    datasets = {c.dataset for c in E.cells("paper")}
    assert {"qsar", "blog", "msd"} <= datasets
    assert sum(c.dataset == "qsar" for c in E.cells("paper")) == 10
    assert sum(c.dataset in ("blog", "msd") for c in E.cells("paper")) == 2


# ------------------------------------------------------------------------------ cells


def _tiny(dataset, split=0, seed=0, **settings):
    s = {"epochs": 3, "n_test": 60, "n_train": 48, "lambda_convention": "per_sample", **settings}
    return Cell("ensembles", "test", dataset, "ensemble", split, seed, s)


def _check_result(res, dataset, keys):
    assert list(res.variants) == ens.variant_names(dataset)
    for name, m in res.variants.items():
        assert set(m) == keys, name
        assert all(np.isfinite(v) for v in m.values()), name
    json.dumps(res.variants), json.dumps(res.artefacts), json.dumps(res.info)
    assert set(res.artefacts["pit"]) == set(res.variants)
    for de, ext in zip([v for v in res.variants if v.startswith("DE")], [v for v in res.variants if v.startswith("EXT")]):
        a, b = res.variants[de], res.variants[ext]
        assert b["epi_coverage"] >= a["epi_coverage"]
        assert b["total_coverage"] >= a["total_coverage"]
        assert b["ratio_epi_ale"] > a["ratio_epi_ale"]
        assert b["rmse"] == a["rmse"]


def test_run_cell_toy2_L_nested_variants():
    res = ens.run_cell(_tiny("toy2-L"))
    _check_result(res, "toy2-L", TOY_KEYS)
    v = res.variants
    assert v["DE L=1"]["epi_coverage"] == 0.0 and v["DE L=1"]["ratio_epi_ale"] == 0.0  # one member: no spread
    assert v["EXT L=1"]["epi_coverage"] > 0.0
    assert res.info["n_train"] == 48 and res.info["n_test"] == 60 and len(res.info["gammas"]) == 10
    assert res.info["lambda_prior"] == pytest.approx(1.0)  # lambda = 1/N, per-sample convention
    assert all(len(p) == 60 for p in res.artefacts["pit"].values())
    assert all(0.0 <= x <= 1.0 for p in res.artefacts["pit"].values() for x in p)
    assert "curve_1d" not in res.artefacts


def test_run_cell_toy1_curve_and_determinism():
    cell = _tiny("toy1")
    res = ens.run_cell(cell)
    _check_result(res, "toy1", TOY_KEYS)
    curve = res.artefacts["curve_1d"]
    assert len(curve["x_train"]) == len(curve["y_train"]) == 48
    assert {"DE", "EXT"} <= set(curve["variants"])
    for name, c in curve["variants"].items():
        assert len(c["mean"]) == len(c["lo"]) == len(c["hi"]) == len(curve["x"])
        assert all(lo <= hi for lo, hi in zip(c["lo"], c["hi"]))
    rp = pytest.importorskip("dubito.experiments.report_plots")
    rp.check_curve_1d(curve)
    again = ens.run_cell(cell)  # fixed seeds: the same numbers
    assert again.variants == res.variants
    assert "curve_1d" not in ens.run_cell(_tiny("toy1", split=1)).artefacts


def test_run_cell_yacht(no_user_files):
    res = ens.run_cell(_tiny("yacht", epochs=2))
    _check_result(res, "yacht", TOY_KEYS - {"rmse_eta"})
    assert (res.info["n_train"], res.info["n_test"]) == (246, 62)  # Table 2 protocol
    assert res.info["lambda_prior"] == pytest.approx(246 * 1e-3)
    assert res.info["settings"]["batch_size"] == 8 and res.info["settings"]["lr_drop"] == "halving"


def test_run_cell_user_file_qsar(monkeypatch, tmp_path):
    _write_user_files(tmp_path)
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    res = ens.run_cell(_tiny("qsar", epochs=2))
    _check_result(res, "qsar", TOY_KEYS - {"rmse_eta"})
    assert (res.info["n_train"], res.info["n_test"]) == (32, 8)


def test_experiment_registry_and_notes():
    assert E.name == "ensembles" and "Hoffmann" in E.paper
    for word in ("seed", "nested", "lambda", "normalised", "P11"):
        assert word.lower() in E.notes.lower()
    assert E.n_splits("toy1") == 5 and E.n_splits("yacht") == 10 and E.n_splits("msd") == 1


def test_quick_preset_end_to_end_through_run_grid_and_report(no_user_files, tmp_path):
    """The quick preset through the engine into a tmp store (well under a minute), then the report."""
    import time

    from dubito.experiments.report import write_report
    from dubito.experiments.runner import run_grid
    from dubito.experiments.store import ResultsStore

    store = tmp_path / "results.sqlite"
    start = time.perf_counter()
    summary = run_grid("ensembles", preset="quick", store=store, executor="local", progress=False)
    assert time.perf_counter() - start < 90
    assert (summary.done, summary.failed, summary.skipped) == (4, 0, 0)
    with ResultsStore(store) as st:
        rows = st.rows("ensembles", "quick")
    assert sorted(r.dataset for r in rows) == sorted(["toy1", "toy2-N200", "toy2-L", "yacht"])
    for r in rows:
        assert list(r.variants) == ens.variant_names(r.dataset)
    again = run_grid("ensembles", preset="quick", store=store, executor="local", progress=False)
    assert (again.done, again.skipped) == (0, 4)  # resumes: nothing re-run

    path = write_report("ensembles", store=store, out_dir=tmp_path / "out", preset="quick")
    text = path.read_text()
    for needle in ("toy1", "toy2-L", "yacht", "EXT L=10", "qsar"):
        assert needle in text
    assert (tmp_path / "out" / "ensembles").is_dir()
