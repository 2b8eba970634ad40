"""store_transfer: a store's finished cells as JSON Lines and back, provenance kept."""
from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from dubito.cli import app
from dubito.experiments.base import Cell, CellResult
from dubito.experiments.store import ResultsStore
from dubito.experiments.store_transfer import FORMAT, export_cells, import_cells

A = Cell("exp", "paper", "yacht", "de", 0, 0, {"epochs": 3, "hidden": [8]})
B = Cell("exp", "paper", "boston", "bp", 1, 0, {"epochs": 5})
QUICK = Cell("exp", "quick", "yacht", "de", 0, 0, {"epochs": 1})
FAILED = Cell("exp", "paper", "wine", "de", 0, 0, {})
RESULT = CellResult(
    variants={"Z-last": {"rmse": 1.5, "nll": float("nan")}, "A-first": {"rmse": float("inf")}},
    artefacts={"pit": {"Z-last": [0.1, 0.9]}},
    info={"diagnostics": {"rhat": 1.2}},
)


def _source(path):
    store = ResultsStore(path)
    for cell in (A, B, QUICK):
        store.write(cell, RESULT, status="done", seconds=2.5, runner_id="r1", device="cpu")
    store.write(FAILED, None, status="failed", seconds=1.0, runner_id="r1", error="boom")
    return store


def _same(a, b):
    """Rows equal field by field (NaN compared as NaN) and in the same variant order."""
    assert json.dumps(asdict(a)) == json.dumps(asdict(b))


def test_round_trip_keeps_every_field_and_provenance(tmp_path):
    src = _source(tmp_path / "a.sqlite")
    n = export_cells(src, tmp_path / "cells.jsonl", "exp", "paper")
    assert n == 2  # the failed cell and the other preset stay behind
    lines = (tmp_path / "cells.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["format"] == FORMAT and len(lines) == 3
    dst = ResultsStore(tmp_path / "b.sqlite")
    assert import_cells(dst, tmp_path / "cells.jsonl") == (2, 0)
    got, want = dst.rows("exp"), src.rows("exp", "paper")
    assert len(got) == 2
    for g, w in zip(got, want):
        _same(g, w)  # commit, version, host, runner, finish time: the original run's, not the importer's
    assert list(got[0].variants) == ["Z-last", "A-first"]
    assert dst.rows("exp", status="failed") == []


def test_import_never_replaces_a_finished_cell_but_replaces_a_failed_one(tmp_path):
    src = _source(tmp_path / "a.sqlite")
    export_cells(src, tmp_path / "cells.jsonl", "exp", "paper")
    dst = ResultsStore(tmp_path / "b.sqlite")
    mine = CellResult(variants={"Z-last": {"rmse": 9.0}})
    dst.write(A, mine, status="done", seconds=1.0, runner_id="me")
    dst.write(B, None, status="failed", seconds=1.0, runner_id="me", error="oom")
    assert import_cells(dst, tmp_path / "cells.jsonl") == (1, 1)
    rows = {r.dataset: r for r in dst.rows("exp")}
    assert rows["yacht"].variants == {"Z-last": {"rmse": 9.0}} and rows["yacht"].runner_id == "me"
    assert rows["boston"].status == "done" and rows["boston"].variants["Z-last"]["rmse"] == 1.5
    assert import_cells(dst, tmp_path / "cells.jsonl") == (0, 2)  # idempotent


def test_export_without_cells_raises_and_leaves_the_file(tmp_path):
    src = _source(tmp_path / "a.sqlite")
    out = tmp_path / "cells.jsonl"
    out.write_text("old")
    with pytest.raises(ValueError, match="no finished cells of 'other'"):
        export_cells(src, out, "other")
    assert out.read_text() == "old"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty"),
        ('{"rows": 1}\n', "line 1: not a dubito-cells-jsonl file"),
        ('{"application": "dubito-results", "format": "dubito-cells-jsonl", "schema_version": 99}\n', "schema version 99"),
        ("HEADER\n{not json\n", "line 2: not JSON"),
        ("HEADER\n[1, 2]\n", "line 2: a cell must be a JSON object"),
        ('HEADER\n{"experiment": "exp"}\n', "line 2: missing fields"),
        ("HEADER\nGOOD\nFAILED\n", "line 3: status 'failed'"),
        ("HEADER\nGOOD\nWRONG\n", r"line 3: wrong value types for split \(str\), variants \(list\), seconds \(bool\)"),
        ("[" * 100_000 + "]" * 100_000 + "\n", "line 1: not a dubito-cells-jsonl file"),  # issue 22: RecursionError
        ("HEADER\nGOOD\n" + "[" * 100_000 + "]" * 100_000 + "\n", "line 3: JSON nested too deeply"),
    ],
)
def test_bad_files_are_refused_whole_with_the_line(tmp_path, text, message):
    src = _source(tmp_path / "a.sqlite")
    export_cells(src, tmp_path / "good.jsonl", "exp", "paper")
    header, good = (tmp_path / "good.jsonl").read_text().splitlines()[:2]
    failed = json.dumps({**json.loads(good), "status": "failed"})
    wrong = json.dumps({**json.loads(good), "split": "0", "seconds": True, "variants": []})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text.replace("HEADER", header).replace("GOOD", good).replace("FAILED", failed).replace("WRONG", wrong))
    dst = ResultsStore(tmp_path / "b.sqlite")
    with pytest.raises(ValueError, match=message):
        import_cells(dst, bad)
    assert dst.rows("exp", status=None) == []  # nothing half-imported


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no cells file"):
        import_cells(ResultsStore(tmp_path / "b.sqlite"), tmp_path / "none.jsonl")


def test_cli_export_import(tmp_path):
    _source(tmp_path / "a.sqlite").close()
    runner = CliRunner()
    out = tmp_path / "cells.jsonl"
    res = runner.invoke(app, ["store", "export", "exp", str(out), "--store", str(tmp_path / "a.sqlite")])
    assert res.exit_code == 0 and "exported 3 cells" in " ".join(res.output.split())  # rich wraps long paths
    res = runner.invoke(app, ["store", "import", str(out), "--store", str(tmp_path / "b.sqlite")])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "imported 3 cells" in text and "0 already there" in text
    res = runner.invoke(app, ["store", "import", str(tmp_path / "a.sqlite"), "--store", str(tmp_path / "c.sqlite")])
    assert res.exit_code == 2 and "not UTF-8 text" in " ".join(res.output.split())  # rich wraps lines
    res = runner.invoke(app, ["store", "export", "exp", str(out), "--store", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2 and "no results store" in " ".join(res.output.split())


@pytest.mark.parametrize(
    "change, message",
    [
        # values of the right JSON type that no finished cell can have (issue 22, part 7): seconds NaN
        # raised IntegrityError, split 1e30 OverflowError; the others were accepted
        ({"seconds": float("nan")}, r"seconds nan \(a duration is finite and >= 0\)"),
        ({"seconds": -1}, r"seconds -1 \(a duration"),
        ({"split": 10**30}, r"split 10{30} \(a split is an index >= 0\)"),
        ({"split": -5}, r"split -5 \(a split is an index >= 0\)"),
        ({"seed": 2**64}, r"seed .* \(outside 64-bit integers\)"),
        ({"experiment": ""}, "experiment is empty"),
        ({"method": "  "}, "method is empty"),
        ({"variants": {}}, "variants is empty"),
        ({"finished_at": "yesterday"}, r"finished_at 'yesterday' \(not an ISO 8601 time\)"),
    ],
)
def test_values_a_finished_cell_cannot_have_are_refused_with_the_line(tmp_path, change, message):
    src = _source(tmp_path / "a.sqlite")
    export_cells(src, tmp_path / "good.jsonl", "exp", "paper")
    header, good, other = (tmp_path / "good.jsonl").read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([header, good, json.dumps({**json.loads(other), **change})]) + "\n")
    dst = ResultsStore(tmp_path / "b.sqlite")
    with pytest.raises(ValueError, match="line 3: " + message):
        import_cells(dst, bad)
    assert dst.rows("exp", status=None) == []


def test_a_cell_repeated_in_one_file_is_refused_naming_both_lines(tmp_path):
    # it used to be dropped and counted as "already there"
    src = _source(tmp_path / "a.sqlite")
    export_cells(src, tmp_path / "good.jsonl", "exp", "paper")
    header, good, other = (tmp_path / "good.jsonl").read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([header, good, other, good]) + "\n")
    with pytest.raises(ValueError, match=r"line 4: the same cell .* as line 2"):
        import_cells(ResultsStore(tmp_path / "b.sqlite"), bad)


def test_rename_method_moves_every_cell_of_the_old_name_and_refuses_clashes(tmp_path):
    store = _source(tmp_path / "a.sqlite")
    before = {c.key: c for c in store.rows("exp", status=None)}
    assert store.rename_method("exp", "de", "ensemble-standard") == 3  # A, QUICK and the failed one
    after = {c.key: c for c in store.rows("exp", status=None)}
    assert {k[3] for k in after} == {"ensemble-standard", "bp"}
    for key, cell in before.items():
        new_key = (*key[:3], "ensemble-standard" if key[3] == "de" else key[3], *key[4:])
        assert asdict(after[new_key]) == {**asdict(cell), "method": new_key[3]}
    assert store.rename_method("exp", "de", "x") == 0  # nothing left under the old name
    store.write(Cell("exp", "paper", "boston", "mean-variance", 1, 0, {}), RESULT, status="done", seconds=1.0,
                runner_id="r1")
    with pytest.raises(ValueError, match=r"both 'bp' and 'mean-variance' \(e.g. preset paper, boston, split 1"):
        store.rename_method("exp", "bp", "mean-variance")
    assert store.claim(Cell("exp", "paper", "wine", "bp", 3, 0, {}), "r2")  # a cell being run
    with pytest.raises(ValueError, match="a runner is working on exp cells of 'bp'"):
        store.rename_method("exp", "bp", "other")
    with pytest.raises(ValueError, match="new method name is empty"):
        store.rename_method("exp", "bp", " ")


def test_a_gzipped_export_holds_the_same_cells_in_the_same_bytes_each_time(tmp_path):
    src = _source(tmp_path / "a.sqlite")
    plain, packed = tmp_path / "c.jsonl", tmp_path / "c.jsonl.gz"
    assert export_cells(src, plain, "exp", "paper") == export_cells(src, packed, "exp", "paper")
    import gzip

    assert packed.read_bytes()[:2] == b"\x1f\x8b" and gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    first = packed.read_bytes()
    export_cells(src, packed, "exp", "paper")
    assert packed.read_bytes() == first  # no time stamp inside
    a, b = ResultsStore(tmp_path / "p.sqlite"), ResultsStore(tmp_path / "g.sqlite")
    assert import_cells(a, plain) == import_cells(b, packed)
    assert [asdict(c) for c in a.rows("exp", status=None)] == [asdict(c) for c in b.rows("exp", status=None)]
    packed.write_bytes(first[: len(first) // 2])  # cut short
    with pytest.raises(ValueError, match="damaged gzip file"):
        import_cells(b, packed)


def test_rename_method_of_some_data_sets_only(tmp_path):
    store = ResultsStore(tmp_path / "s.sqlite")
    for dataset in ("wine", "yacht", "naval"):
        store.write(Cell("lb", "p", dataset, "mc", 0, 0, {}), CellResult(variants={"mc": {"nll": 1.0}}),
                    status="done", seconds=1.0, runner_id="r")
    assert store.rename_method("lb", "mc", "mc-old", datasets=["wine", "naval"]) == 2
    cells = {c.dataset: c for c in store.rows("lb", status=None)}
    assert {d: c.method for d, c in cells.items()} == {"wine": "mc-old", "yacht": "mc", "naval": "mc-old"}
    assert list(cells["naval"].variants) == ["mc-old"] and list(cells["yacht"].variants) == ["mc"]
    assert store.claim(Cell("lb", "p", "yacht", "mc", 1, 0, {}), "r2")  # a claim on another data set
    assert store.rename_method("lb", "mc", "mc-old", datasets=["kin8nm"]) == 0
    with pytest.raises(ValueError, match="datasets is empty"):
        store.rename_method("lb", "mc", "mc-old", datasets=[])


def test_rename_method_renames_a_variant_keyed_by_the_method(tmp_path):
    """The leaderboard keys a cell's variants by its method: renaming the method renames that
    variant too (same numbers, same order); other variants and other methods' cells stay."""
    store = ResultsStore(tmp_path / "s.sqlite")
    keyed = CellResult(variants={"first": {"nll": 1.0}, "ensemble": {"nll": 2.5, "rmse": float("nan")}})
    store.write(Cell("lb", "p", "yacht", "ensemble", 0, 0, {}), keyed, status="done", seconds=1.0, runner_id="r")
    store.write(Cell("lb", "p", "yacht", "mdn", 0, 0, {}), CellResult(variants={"ensemble": {"nll": 9.0}}),
                status="done", seconds=1.0, runner_id="r")
    assert store.rename_method("lb", "ensemble", "ensemble-epochs") == 1
    cells = {c.method: c for c in store.rows("lb", status=None)}
    renamed = cells["ensemble-epochs"].variants
    assert list(renamed) == ["first", "ensemble-epochs"] and renamed["ensemble-epochs"]["nll"] == 2.5
    assert renamed["first"] == {"nll": 1.0} and renamed["ensemble-epochs"]["rmse"] != renamed["ensemble-epochs"]["rmse"]
    assert cells["mdn"].variants == {"ensemble": {"nll": 9.0}}  # another method's cell: untouched


def test_cli_rename_method(tmp_path):
    _source(tmp_path / "a.sqlite").close()
    res = CliRunner().invoke(app, ["store", "rename-method", "exp", "bp", "mean-variance",
                                   "--store", str(tmp_path / "a.sqlite")])
    assert res.exit_code == 0 and "renamed 1 exp cells of bp to mean-variance" in " ".join(res.output.split())
    with ResultsStore(tmp_path / "a.sqlite") as store:
        assert {c.method for c in store.rows("exp", status=None)} == {"de", "mean-variance"}
    res = CliRunner().invoke(app, ["store", "rename-method", "exp", "a", "b", "--store", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2 and "no results store" in " ".join(res.output.split())
