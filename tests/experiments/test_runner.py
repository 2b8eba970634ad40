"""run_grid with the in-process executor: expansion, unknown names, resume, failures, two runners."""
from __future__ import annotations

import json
import threading
from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from dubito.experiments.base import Cell
from dubito.experiments.runner import _jsonable, execute_cell, run_grid
from dubito.experiments.store import ResultsStore
from tests.experiments import fake_experiment
from tests.experiments.conftest import FAKE_MODULE, runs


def _snapshot(path, preset="quick", status="done"):
    with ResultsStore(path, create=False) as store:
        return {r.key: r for r in store.rows("fake", preset, status=status)}


def test_grid_expansion_numbers_and_summary(fake, tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    summary = run_grid("fake", store=store, progress=False)
    out = capsys.readouterr().out
    assert (summary.done, summary.skipped, summary.failed) == (16, 0, 0)
    assert summary.unavailable == {"missing": "no data file (fake)"}
    assert "unavailable: missing: no data file (fake)" in out
    assert "done 16, skipped 0, failed 0 in" in out
    rows = _snapshot(store)
    expected = {(d, m, sp, se) for d in ("alpha", "beta") for m in ("good", "other") for sp in (0, 1) for se in (0, 1)}
    assert {k[2:] for k in rows} == expected
    for key, row in rows.items():
        assert row.variants == fake_experiment.numbers(*key[2:])
        assert row.settings == {"width": 8 if row.method == "good" else 16}
        assert row.info["device"] == "cpu" and row.info["settings_seen"] == row.settings
        assert row.status == "done" and row.seconds >= 0 and row.device == "cpu"
    assert len(runs(fake)) == 16


def test_subsets_and_progress_bar(fake, tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    first = run_grid("fake", store=store, datasets=["alpha"], methods=["good"], progress=True)
    out = capsys.readouterr().out
    assert first.done == 4 and "4/4" in out and "ETA" in out
    second = run_grid("fake", store=store, progress=False)
    assert (second.done, second.skipped) == (12, 4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"experiment": "nosuch"}, "unknown experiment 'nosuch'; available: deepnoise, ensembles, fake, icnlm, leaderboard, ood, recalibrate, thesis, uci"),
        ({"preset": "nosuch"}, "unknown preset 'nosuch' for experiment 'fake'; available: quick, faulty, slow"),
        ({"datasets": ["gamma"]}, "unknown dataset 'gamma' for fake/quick; available: alpha, beta, missing"),
        ({"methods": ["bad"]}, "unknown method 'bad' for fake/quick; available: good, other"),
        ({"executor": "ray"}, "unknown executor 'ray'; available: local, process, dask"),
    ],
)
def test_unknown_names_list_valid_ones(fake, tmp_path, kwargs, message):
    kwargs = {"experiment": "fake", **kwargs}
    with pytest.raises(ValueError) as info:
        run_grid(store=tmp_path / "r.sqlite", progress=False, **kwargs)
    assert message in str(info.value)
    assert runs(fake) == []
    assert not (tmp_path / "r.sqlite").exists()  # bad names are refused before the store is made


def test_resume_skips_done_cells_and_recomputes_nothing(fake, tmp_path):
    store = tmp_path / "r.sqlite"
    run_grid("fake", store=store, methods=["good"], progress=False)
    before = _snapshot(store)
    summary = run_grid("fake", store=store, progress=False)
    assert (summary.done, summary.skipped, summary.failed) == (8, 8, 0)
    again = run_grid("fake", store=store, progress=False)
    assert (again.done, again.skipped, again.failed) == (0, 16, 0)
    after = _snapshot(store)
    assert all(after[k] == row for k, row in before.items())  # incl. finished_at: not rewritten
    assert sorted(Counter(runs(fake)).values()) == [1] * 16  # each cell ran exactly once


def test_failed_cell_recorded_and_grid_continues(fake, tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    summary = run_grid("fake", preset="faulty", store=store, progress=False)
    out = capsys.readouterr().out
    assert (summary.done, summary.skipped, summary.failed) == (4, 0, 2)
    assert "done 4, skipped 0, failed 2 in" in out and "RuntimeError: boom in alpha split 1" in out
    failed = _snapshot(store, "faulty", "failed")
    assert {k[3] for k in failed} == {"explode"}
    for row in failed.values():
        assert row.error.startswith("Traceback") and f"RuntimeError: boom in alpha split {row.split}" in row.error
        assert row.variants == {}
    with ResultsStore(store) as st:
        assert st.claims() == []


def test_failed_cell_retried_on_rerun(fake, tmp_path, monkeypatch):
    store = tmp_path / "r.sqlite"
    monkeypatch.setenv("DUBITO_FAKE_FAIL", "1")
    first = run_grid("fake", preset="faulty", store=store, progress=False)
    assert (first.done, first.failed) == (2, 4)
    assert "ValueError: flaky failure" in _snapshot(store, "faulty", "failed")[("fake", "faulty", "alpha", "flaky", 0, 0)].error
    monkeypatch.delenv("DUBITO_FAKE_FAIL")
    second = run_grid("fake", preset="faulty", store=store, progress=False)
    assert (second.done, second.skipped, second.failed) == (2, 2, 2)  # flaky now done, explode fails again
    done = _snapshot(store, "faulty")
    assert {k[3] for k in done} == {"good", "flaky"}
    assert done[("fake", "faulty", "alpha", "flaky", 1, 0)].variants == fake_experiment.numbers("alpha", "flaky", 1, 0)
    assert {k[3] for k in _snapshot(store, "faulty", "failed")} == {"explode"}


def test_two_runners_on_one_store_run_each_cell_once(fake, tmp_path, monkeypatch):
    store = tmp_path / "r.sqlite"
    monkeypatch.setenv("DUBITO_FAKE_SLEEP", "0.02")
    ResultsStore(store).close()
    summaries, errors = [], []
    barrier = threading.Barrier(2)

    def runner():
        try:
            barrier.wait()
            summaries.append(run_grid("fake", store=store, progress=False))
        except BaseException as exc:  # pragma: no cover - the failure we look for
            errors.append(exc)

    threads = [threading.Thread(target=runner) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(s.done for s in summaries) == 16 and all(s.failed == 0 for s in summaries)
    assert all(s.done > 0 for s in summaries)  # both did work
    assert sorted(Counter(runs(fake)).values()) == [1] * 16  # nothing ran twice
    assert len(_snapshot(store, status=None)) == 16


def test_execute_cell_is_json_and_catches_errors(fake):
    good = Cell("fake", "quick", "alpha", "good", 1, 0, {"width": 8})
    out = execute_cell(good, "cpu")
    assert out["status"] == "done" and out["error"] is None and out["seconds"] >= 0
    assert out["variants"] == fake_experiment.numbers("alpha", "good", 1, 0)
    json.dumps(out)
    assert execute_cell(good, "cpu", FAKE_MODULE)["variants"] == out["variants"]
    bad = execute_cell(Cell("fake", "faulty", "alpha", "explode", 0, 0), "cpu")
    assert bad["status"] == "failed" and "RuntimeError: boom" in bad["error"] and bad["variants"] == {}
    json.dumps(bad)
    unknown = execute_cell(Cell("nosuch", "quick", "a", "b", 0, 0), "cpu")
    assert unknown["status"] == "failed" and "unknown experiment 'nosuch'" in unknown["error"]


def test_jsonable_converts_numpy():
    value = {"a": np.float64(1.5), "b": np.arange(3), "c": (np.int64(2), None, "x"), 4: [np.float32(0.5)]}
    assert _jsonable(value) == {"a": 1.5, "b": [0, 1, 2], "c": [2, None, "x"], "4": [0.5]}
    json.dumps(_jsonable(value))
    with pytest.raises(TypeError):
        _jsonable({"a": object()})


def test_cli_bench_exit_codes(fake, tmp_path):
    from dubito.cli import app

    cli = CliRunner()
    store = str(tmp_path / "r.sqlite")
    ok = cli.invoke(app, ["bench", "fake", "--store", store, "--quiet"])
    assert ok.exit_code == 0 and "done 16, skipped 0, failed 0" in ok.output
    failing = cli.invoke(app, ["bench", "fake", "--preset", "faulty", "--store", store, "--quiet"])
    assert failing.exit_code == 1 and "failed 2" in failing.output
    bad = cli.invoke(app, ["bench", "fake", "--store", store, "--datasets", "gamma"])
    assert bad.exit_code == 2 and "available: alpha, beta, missing" in bad.output
