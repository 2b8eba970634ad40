"""The report helpers the experiments share (`dubito.experiments.claims`)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from dubito.experiments import claims
from tests.experiments import fake_experiment


def _row(dataset, method="m", split=0, seed=0, variants=None):
    return SimpleNamespace(dataset=dataset, method=method, split=split, seed=seed, variants=variants or {},
                           artefacts={}, info={})


# ------------------------------------------------------------------------------------ formatting


@pytest.mark.parametrize("x", [None, math.nan, math.inf, -math.inf, np.float64("nan"), np.inf])
def test_fmt_not_a_number_is_na(x):
    assert claims.fmt(x) == "n/a"
    assert claims.fmt(x, 2, "f") == "n/a"


def test_fmt_significant_digits_and_decimals():
    assert claims.fmt(0.0123456) == "0.0123"
    assert claims.fmt(123456.0) == "1.23e+05"
    assert claims.fmt(2.0) == "2"
    assert claims.fmt(0.123456, 4) == "0.1235"
    assert claims.fmt(0.123456, kind="f") == "0.123"
    assert claims.fmt(2.0, 2, "f") == "2.00"
    assert claims.fmt(1234.5, 0, "f") == "1234"
    assert claims.fmt(np.float32(0.5)) == "0.5"
    assert claims.fmt(-3) == "-3"


def test_verdict_wording():
    assert claims.verdict([]) == "not checkable here"
    assert claims.verdict([], empty="not checkable") == "not checkable"
    assert claims.verdict([True, True]) == "holds"
    assert claims.verdict([False, False]) == "does not hold"
    assert claims.verdict([True, False]) == "partly"
    assert claims.verdict([np.bool_(True), np.bool_(False)]) == "partly"


def test_claim_block_and_section():
    assert claims.claim_block("C1", ["  - x: ok."]) == ["- **C1**", "  - x: ok."]
    assert claims.claim_block("C1", [], "(how)", empty="none") == ["- **C1** (how)", "  - none."]
    assert claims.section("T", "intro", ["| a |"]) == ["## T", "", "intro", "", "| a |", ""]


# ------------------------------------------------------------------------------------ means


def test_table_mean_over_stored_cells_by_hand():
    rows = [
        _row("a", split=0, variants={"A": {"rmse": 1.0, "nll": math.nan}, "B": {"rmse": 10.0}}),
        _row("a", split=1, variants={"A": {"rmse": 2.0, "nll": 0.5}, "B": {"rmse": None}}),
        _row("a", split=2, variants={"A": {"rmse": 6.0, "nll": math.inf}}),
        _row("b", variants={"A": {"rmse": 100.0}}),
        _row("c", variants=None),
    ]
    t = claims.CellTable(rows)
    assert t.datasets == ["a", "b", "c"]
    assert t.values("a", "A", "rmse") == [1.0, 2.0, 6.0]
    assert t.mean("a", "A", "rmse") == pytest.approx(3.0)
    assert t.mean("a", "A", "nll") == pytest.approx(0.5)  # nan and inf are left out
    assert t.mean("a", "B", "rmse") == 10.0  # None is left out
    assert t.mean("b", "A", "rmse") == 100.0
    assert t.mean("a", "C", "rmse") is None and t.mean("c", "A", "rmse") is None and t.values("z", "A", "x") == []
    assert claims.CellTable(rows, datasets=["b", "a"]).datasets == ["b", "a"]


def test_dataset_means_mean_sd_and_count():
    rows = [_row("a", seed=s, variants={"A": {"acc": x}}) for s, x in enumerate((0.5, 0.7, 0.9))]
    rows += [_row("b", variants={"A": {"acc": 0.0}}), _row("a", seed=9, variants={"B": {"acc": 0.25}})]
    M = claims.DatasetMeans(rows, "a")
    assert M("A", "acc") == pytest.approx(0.7)
    assert M.sd("A", "acc") == pytest.approx(0.2)  # ddof 1: sqrt((0.04 + 0 + 0.04) / 2)
    assert M.n("A", "acc") == 3
    assert M("B", "acc") == 0.25 and M.sd("B", "acc") is None and M.n("B", "acc") == 1
    assert M("A", "nll") is None and M.sd("A", "nll") is None and M.n("A", "nll") == 0
    assert set(M.values) == {("A", "acc"), ("B", "acc")}


# ------------------------------------------------------------------------------------ missing cells


def _stored(preset, drop=()):
    """Rows for every runnable cell of the fake experiment's preset but those in ``drop``."""
    return [_row(c.dataset, c.method, c.split, c.seed) for c in fake_experiment.EXPERIMENT.cells(preset)
            if (c.dataset, c.method, c.split, c.seed) not in drop]


def test_missing_cells_of_a_fake_experiment():
    exp, preset = fake_experiment.EXPERIMENT, fake_experiment.EXPERIMENT.preset("quick")
    assert len(exp.cells("quick")) == 16  # "missing" cannot run, so it is not expected
    assert claims.missing_lines(exp, _stored("quick"), preset, "x") == [claims.ALL_STORED]
    drop = {("alpha", "good", 1, 0), ("alpha", "good", 1, 1), ("beta", "other", 0, 1)}
    miss, expected = claims.missing_cells(exp, _stored("quick", drop), preset)
    assert {(c.dataset, c.method, c.split, c.seed) for c in miss} == drop and len(expected) == 16
    assert claims.missing_lines(exp, _stored("quick", drop), preset, "the claims use the stored ones") == [
        "3 of 16 cells are not in the store (the claims use the stored ones):",
        "- alpha · good · split(s) 1, 1 (`dubito bench fake --preset quick --datasets alpha --methods good --store ...`)",
        "- beta · other · split(s) 0 (`dubito bench fake --preset quick --datasets beta --methods other --store ...`)",
    ]
    lines = claims.missing_lines(exp, _stored("quick", drop), preset, "u", bench_flags=lambda ds: f" --device {ds}")
    assert "--methods other --device beta --store" in lines[2]
    inline = claims.missing_lines(exp, _stored("quick", drop), preset, "u",
                                  listing=lambda cells: ", ".join(f"{c.dataset}/{c.seed}" for c in cells))
    assert inline == ["3 of 16 cells are not in the store (u); missing: alpha/0, alpha/1, beta/1."]


def test_missing_cells_ignore_rows_of_other_cells():
    exp, preset = fake_experiment.EXPERIMENT, fake_experiment.EXPERIMENT.preset("faulty")
    rows = [_row("alpha", "good", 0, 0), _row("alpha", "good", 0, 7), _row("zeta", "good", 0, 0)]
    miss, expected = claims.missing_cells(exp, rows, preset)
    assert len(expected) == 6 and len(miss) == 5
