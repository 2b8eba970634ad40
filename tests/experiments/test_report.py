"""`dubito report`: Markdown with mean ± s.e. (n), paper numbers side by side with flags, the
header (commands, commits, versions), unavailable datasets, failed cells, and PNG plots
linked relatively. The store is filled by hand through `ResultsStore.write` with the fixture
experiment of `report_fixture_experiment.py` registered as "fixture"."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import dubito
import dubito.experiments as experiments
from dubito.experiments.base import Cell, CellResult, PaperNumber
from dubito.experiments.report import flag_exceeds, fmt, summarize, write_report
from dubito.experiments.report_plots import check_curve_1d, pit_coverage, pit_ecdf
from dubito.experiments.store import ResultsStore, StoredCell
from dubito.experiments.store_transfer import import_cells
from tests.experiments.report_fixture_experiment import UNAVAILABLE_REASON

FIXTURE_MODULE = "tests.experiments.report_fixture_experiment"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SPLITS = (0, 1, 2)

# alpha: known per-split values (paper numbers in the fixture are set against these means)
ALPHA = {
    ("ens", "DE"): {"rmse": [1.1, 1.2, 1.3], "nll": [1.9, 2.0, 2.1]},
    ("ens", "EXT"): {"rmse": [1.4, 1.5, 1.6], "nll": [2.4, 2.5, 2.6]},
    ("single", "mean"): {"rmse": [3.0, 2.9, 3.1], "nll": [4.0, 4.2, 4.4]},
}
COV95 = np.random.default_rng(0).uniform(0.8, 1.0, size=(3, 3))  # (method·variant, split)


def _curve(n_grid=30, n_train=20):
    x = np.linspace(-1, 1, n_grid)
    xt = np.random.default_rng(1).uniform(-1, 1, n_train)
    return {
        "x": x.tolist(),
        "eta": np.sin(3 * x).tolist(),
        "x_train": xt.tolist(),
        "y_train": (np.sin(3 * xt) + 0.1).tolist(),
        "level": 0.9,
        "variants": {
            v: {"mean": np.sin(3 * x).tolist(), "lo": (np.sin(3 * x) - w).tolist(), "hi": (np.sin(3 * x) + w).tolist()}
            for v, w in (("DE", 0.2), ("EXT", 0.4))
        },
    }


def _cell(dataset, method, split, seed=0, preset="paper"):
    settings = {"ens": {"epochs": 3, "members": 5}, "single": {}}[method]
    return Cell("fixture", preset, dataset, method, split, seed, settings)


def fill_store(path: Path) -> ResultsStore:
    store = ResultsStore(path)
    rng = np.random.default_rng(2)
    for split in SPLITS:
        for method in ("ens", "single"):
            variants, pit = {}, {}
            for i, ((m, v), metrics) in enumerate(ALPHA.items()):
                if m != method:
                    continue
                variants[v] = {k: vals[split] for k, vals in metrics.items()}
                variants[v]["cov95"] = float(COV95[i, split])
                pit[v] = rng.uniform(size=40).tolist()
            store.write(_cell("alpha", method, split), CellResult(variants, {"pit": pit}), status="done",
                        seconds=10.0, runner_id="r1")
        # beta: a 1-D toy; curve_1d from split 0 only
        artefacts = {"curve_1d": _curve()} if split == 0 else {}
        store.write(_cell("beta", "ens", split),
                    CellResult({"DE": {"rmse": 0.5 + split, "nll": 1.0}, "EXT": {"rmse": 0.7, "nll": 1.1}}, artefacts),
                    status="done", seconds=1.5, runner_id="r1")
    # beta · single: one cell done (n = 1, no ±), two failed
    store.write(_cell("beta", "single", 0), CellResult({"mean": {"rmse": 0.000123, "nll": 0.5}}),
                status="done", seconds=2.0, runner_id="r2")
    store.write(_cell("beta", "single", 1), None, status="failed", seconds=0.1, runner_id="r2",
                error="ValueError: boom in split 1\nTraceback line 2")
    store.write(_cell("beta", "single", 2), None, status="failed", seconds=0.1, runner_id="r2",
                error="Traceback (most recent call last):\n  File x\nRuntimeError: exploded at split 2")
    return store


@pytest.fixture(scope="module")
def registered():
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(experiments._MODULES, "fixture", FIXTURE_MODULE)
        yield


@pytest.fixture(scope="module")
def report(registered, tmp_path_factory):
    """(markdown text, report path, store path, rows) of the fixture's paper preset."""
    tmp = tmp_path_factory.mktemp("report")
    store_path = tmp / "results.sqlite"
    store = fill_store(store_path)
    rows = store.rows("fixture", "paper", status=None)
    store.close()
    out = tmp / "docs" / "results"
    stale = out / "fixture" / "old-dataset-calibration.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(PNG_MAGIC)
    path = write_report("fixture", store_path, out_dir=out, preset="paper")
    return path.read_text(encoding="utf-8"), path, store_path, rows


def section(text: str, heading: str) -> str:
    """The text of the Markdown section ``## heading`` (up to the next ``## ``)."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"no section {heading!r}"
    return m.group(1)


def table_row(text: str, first: str, second: str | None = None) -> list[str]:
    """Cells of the table row whose first (and second) cell match."""
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == first and (second is None or cells[1] == second):
                return cells
    raise AssertionError(f"no table row {first!r} {second!r} in\n{text}")


def expected(values) -> str:
    v = np.asarray(values, dtype=float)
    if v.size == 1:
        return f"{fmt(v[0])} ({v.size})"
    return f"{fmt(v.mean())} ± {fmt(v.std(ddof=1) / math.sqrt(v.size), 2)} ({v.size})"


# ------------------------------------------------------------------------------ numbers


def test_summarize_matches_numpy():
    v = np.random.default_rng(3).normal(size=7)
    s = summarize(v.tolist() + [float("nan")])
    assert s.n == 7 and s.n_bad == 1
    assert s.mean == pytest.approx(v.mean(), rel=1e-12)
    assert s.se == pytest.approx(v.std(ddof=1) / np.sqrt(7), rel=1e-12)
    assert summarize([2.5]).se is None


def test_fmt_significant_digits_and_tiny_values():
    assert fmt(1.2) == "1.200"
    assert fmt(12.3456) == "12.35"
    assert fmt(0.05774, 2) == "0.058"
    assert fmt(0.000123) == "1.230e-04"
    assert fmt(0) == "0"
    assert fmt(0.2, 3, signed=True) == "+0.200"


@pytest.mark.parametrize(
    "ours, spread, tolerance, flagged",
    [
        (1.5, 0.5, None, False),   # |diff| == spread: not flagged
        (1.5, 0.25, None, True),
        (1.5, None, 0.5, False),   # tolerance when no spread
        (1.5, None, 0.25, True),
        (1.5, 1.0, 0.25, False),   # the paper's spread wins over the tolerance
        (9.0, None, None, False),  # nothing to compare against: never flagged
        (0.5, 0.25, None, True),   # below the paper counts too
    ],
)
def test_flag_exceeds(ours, spread, tolerance, flagged):
    diff, flag = flag_exceeds(ours, PaperNumber("d", "v", "m", 1.0, spread=spread, tolerance=tolerance))
    assert diff == pytest.approx(ours - 1.0)
    assert flag is flagged


def test_pit_coverage_and_ecdf():
    pit = np.array([0.01, 0.2, 0.5, 0.5, 0.8, 0.99, np.nan])
    assert pit_coverage(pit, [0.5, 0.9]).tolist() == pytest.approx([2 / 6, 4 / 6])
    p, obs = pit_ecdf(pit, [0.0, 0.5, 1.0])
    assert obs.tolist() == pytest.approx([0, 4 / 6, 1])


def test_check_curve_1d_names_the_problem():
    check_curve_1d(_curve())
    bad = _curve()
    bad["variants"]["DE"]["hi"] = bad["variants"]["DE"]["hi"][:-1]
    with pytest.raises(ValueError, match="'DE' hi has 29 values, x has 30"):
        check_curve_1d(bad)
    with pytest.raises(ValueError, match="lacks key 'variants'"):
        check_curve_1d({k: v for k, v in _curve().items() if k != "variants"})


# ------------------------------------------------------------------------------ the report


def test_tables_show_mean_se_and_n(report):
    text = report[0]
    alpha = section(text, "alpha")
    header = table_row(alpha, "method · variant")
    assert header[1:] == ["RMSE", "NLL", "coverage 95%"]
    for i, ((m, v), metrics) in enumerate(ALPHA.items()):
        label = v if m == "single" else f"{m} · {v}"  # "single" has one variant: shown bare
        row = table_row(alpha, label)
        assert row[1] == expected(metrics["rmse"])
        assert row[2] == expected(metrics["nll"])
        assert row[3] == expected(COV95[i])
    assert table_row(alpha, "ens · DE")[1] == "1.200 ± 0.058 (3)"
    beta = section(text, "beta")
    assert table_row(beta, "ens · DE")[1] == expected([0.5, 1.5, 2.5])
    # n = 1: no ±; tiny value in scientific notation
    assert table_row(beta, "mean")[1:3] == ["1.230e-04 (1)", "0.5000 (1)"]
    assert table_row(beta, "mean")[3] == "—"  # metric never stored


def test_paper_numbers_flagged_exactly_where_difference_exceeds_spread(report):
    alpha = section(report[0], "alpha")
    rows = {(r[0], r[1]): r for r in (table_row(alpha, m, v) for m, v in [
        ("RMSE", "ens · DE"), ("NLL", "ens · DE"), ("RMSE", "ens · EXT"), ("NLL", "ens · EXT"), ("RMSE", "mean"),
        ("RMSE", "MC dropout")])}
    # columns: metric, variant, ours, paper, source, difference, flag, note
    de_rmse = rows[("RMSE", "ens · DE")]
    assert de_rmse[2:7] == ["1.200 ± 0.058 (3)", "1 ± 0.1", "Table 2", "+0.200", "⚠"]
    assert rows[("NLL", "ens · DE")][5:7] == ["-0.0500", ""]
    assert rows[("RMSE", "ens · EXT")][3] == "1.3 (tolerance ± 0.15)"
    assert rows[("RMSE", "ens · EXT")][6:8] == ["⚠", "single run"]
    assert rows[("NLL", "ens · EXT")][6] == ""
    assert rows[("RMSE", "mean")][5:7] == ["+1.00", ""]  # neither spread nor tolerance: difference, no flag
    assert rows[("RMSE", "MC dropout")][2] == "— (not run)" and rows[("RMSE", "MC dropout")][6] == ""
    assert alpha.count("⚠") == 2
    # "mean" has neither spread nor tolerance: shown, but counted apart as not judged
    assert ("**Against the paper:** 2 of 4 numbers with a spread or tolerance differ by more than it ⚠. "
            "1 more are shown beside the paper's without one: not judged") in report[0]
    assert "Beside the paper" not in section(report[0], "beta")  # no paper numbers for beta


def test_header_commands_commits_versions_and_compute(report, tmp_path):
    text, path, store_path, rows = report
    head = text.split("## Notes")[0]
    assert head.startswith("# Report fixture: a fake experiment\n")
    assert "Nobody et al. (2099), Journal of Tests" in head
    assert f"dubito bench fixture --preset paper --store {store_path}" in head
    assert f"dubito report fixture --preset paper --store {store_path} --out {path.parent}" in head
    for commit in {r.commit for r in rows}:
        assert (commit or "unknown") in head
    assert f"dubito `{dubito.__version__}`" in head
    done = [r for r in rows if r.status == "done"]
    assert f"{len(done)} cells over 2 dataset(s)" in head
    assert f"total compute {sum(r.seconds for r in done):.1f} s" in head
    assert "2 failed cell(s)" in head
    assert "The fixture's notes: splits are **fake**." in section(text, "Notes")
    assert "`epochs=3`, `members=5`" in section(text, "Method settings")


def test_unavailable_and_failed_cells_listed(report):
    text = report[0]
    assert f"- **gone**: unavailable here: {UNAVAILABLE_REASON}" in section(text, "Datasets not reported")
    failed = section(text, "Failed cells")
    assert "beta · single · split 1 · seed 0: `ValueError: boom in split 1`" in failed
    assert "Traceback line 2" not in failed
    assert "beta · single · split 2 · seed 0: `RuntimeError: exploded at split 2`" in failed


def test_plots_are_valid_pngs_linked_relatively(report):
    text, path = report[0], report[1]
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {Path(link).name for link in links} == {
        "alpha-calibration.png", "alpha-pit.png", "alpha-coverage.png", "beta-curve_1d-ens.png"}
    for link in links:
        assert not Path(link).is_absolute() and link.startswith("fixture/")
        data = (path.parent / link).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 2000
    on_disk = {p.name for p in (path.parent / "fixture").iterdir()}
    # the stale PNG was removed, no temp files left; the cells travel beside the plots
    assert on_disk == {Path(link).name for link in links} | {"cells-paper.jsonl"}


def test_a_large_cells_file_is_written_gzipped_in_place_of_the_text(report, tmp_path, monkeypatch):
    import dubito.experiments.report as report_module

    store_path = report[2]
    out = tmp_path / "big"
    monkeypatch.setattr(report_module, "GZIP_OVER_BYTES", 10)
    text = write_report("fixture", store_path, out_dir=out, preset="paper").read_text(encoding="utf-8")
    assert (out / "fixture" / "cells-paper.jsonl.gz").is_file() and not (out / "fixture" / "cells-paper.jsonl").exists()
    assert "cells-paper.jsonl.gz --store" in text
    monkeypatch.setattr(report_module, "GZIP_OVER_BYTES", 1 << 30)  # small again: the text, the .gz gone
    write_report("fixture", store_path, out_dir=out, preset="paper")
    assert {p.name for p in (out / "fixture").glob("cells-*")} == {"cells-paper.jsonl"}


def test_report_rebuilt_from_its_cells_file(report, tmp_path):
    """The cells file beside the page rebuilds the same page in a fresh store (provenance kept)."""
    text, path, store_path = report[0], report[1], report[2]
    cells = path.parent / "fixture" / "cells-paper.jsonl"
    assert f"dubito store import {cells} --store {store_path}" in text
    done = [r for r in report[3] if r.status == "done"]
    fresh = tmp_path / "fresh.sqlite"
    with ResultsStore(fresh) as store:
        assert import_cells(store, cells) == (len(done), 0)  # failed cells stay behind
    again = write_report("fixture", fresh, out_dir=tmp_path / "again", preset="paper").read_text(encoding="utf-8")

    def tables_and_provenance(t):
        keep = ("|", "- Results", "- Code", "- Cells finished")
        return [line.split("; 2 failed")[0].rstrip(".") for line in t.splitlines() if line.startswith(keep)]

    assert tables_and_provenance(again) == tables_and_provenance(text)
    assert len(tables_and_provenance(text)) > 20


def test_dirty_and_several_commits_flagged(registered, tmp_path):
    class FakeStore:
        path = tmp_path / "x.sqlite"

        def rows(self, experiment, preset=None, status="done"):
            if status != "done":
                return []
            return [
                StoredCell("fixture", "paper", "alpha", "ens", split, 0, "done", {"DE": {"rmse": 1.0 + split}}, {}, {},
                           {}, 1.0, version, commit, None, "2024-01-01T00:00:00+00:00")
                for split, (version, commit) in enumerate([("0.1.0", "abc123"), ("0.2.0", "def456-dirty")])
            ] + [  # "gone" is unavailable here but was run elsewhere: reported, not listed as unavailable
                StoredCell("fixture", "paper", "gone", "ens", 0, 0, "done", {"DE": {"rmse": 7.0}}, {}, {}, {}, 1.0,
                           "0.1.0", "abc123", None, "2024-01-01T00:00:00+00:00")
            ]

    text = write_report("fixture", FakeStore(), out_dir=tmp_path / "out").read_text()
    assert "commits `abc123`, `def456-dirty` ⚠ uncommitted changes" in text
    assert "dubito `0.1.0`, `0.2.0`" in text
    assert "more than one commit or version" in text
    assert "- **beta**: no finished cells in the store" in text
    assert "unavailable here" not in text and table_row(section(text, "gone"), "DE")[1] == "7.000 (1)"
    assert not (tmp_path / "out" / "fixture").exists() or not list((tmp_path / "out" / "fixture").glob("*.png"))


def test_malformed_curve_1d_is_reported_not_fatal(registered, tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    bad = _curve()
    del bad["variants"]["EXT"]["lo"]
    store.write(_cell("beta", "ens", 0), CellResult({"DE": {"rmse": 1.0}}, {"curve_1d": bad}),
                status="done", seconds=1.0, runner_id="r")
    text = write_report("fixture", store, out_dir=tmp_path / "out").read_text()
    assert "⚠ 1-D plot of beta · ens, split 0, seed 0 skipped: curve_1d: variant 'EXT' lacks 'lo'" in text


# ------------------------------------------------------------------------------ errors


def test_missing_store_says_to_bench(registered, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no results store at .*run `dubito bench fixture --preset paper"):
        write_report("fixture", tmp_path / "absent.sqlite", out_dir=tmp_path / "out")
    assert not (tmp_path / "absent.sqlite").exists()


def test_no_rows_says_to_bench(report, tmp_path):
    with pytest.raises(ValueError, match=r"no finished cells of 'fixture' preset 'quick'.*dubito bench fixture --preset quick"):
        write_report("fixture", report[2], out_dir=tmp_path / "out", preset="quick")
    assert not (tmp_path / "out").exists()


def test_unknown_experiment_and_preset(registered, tmp_path):
    with pytest.raises(ValueError, match="unknown experiment 'nope'; available: .*fixture"):
        write_report("nope", tmp_path / "absent.sqlite", out_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown preset 'huge'.*paper, quick"):
        write_report("fixture", tmp_path / "absent.sqlite", out_dir=tmp_path, preset="huge")


def test_cli_report(report, tmp_path):
    from dubito.cli import app

    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["report", "fixture", "--store", str(report[2]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "fixture.md").is_file() and (out / "fixture" / "alpha-pit.png").is_file()
    result = CliRunner().invoke(app, ["report", "fixture", "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "no results store" in result.output


def test_group_histograms_pool_cells_as_densities():
    """figure_group_histograms draws each group's counts / (total x bin width): the step heights
    integrate to 1 over the bins, whatever the group's size."""
    from dubito.experiments.report_plots import figure_group_histograms

    edges = [0.0, 1.0, 3.0]
    fig = figure_group_histograms(edges, {"A": {"train": [2, 2], "ood": [0, 10]}, "B": {"train": [1, 0]}})
    heights = {}
    for ax in fig.axes:
        for patch in ax.patches:
            heights[(ax.get_title(), patch.get_label().split(" ")[0])] = patch.get_data()[0]
    np.testing.assert_allclose(heights[("A", "train")], [0.5, 0.25])   # 2/(4*1), 2/(4*2)
    np.testing.assert_allclose(heights[("A", "ood")], [0.0, 0.5])
    np.testing.assert_allclose(heights[("B", "train")], [1.0, 0.0])
    assert all(np.sum(h * np.diff(edges)) == pytest.approx(1.0) for h in heights.values())
