"""Issue 23's size rule, kept: no source file of the package over 600 lines, no experiment file over
450, so that one file holds one idea a reader can take in."""

from __future__ import annotations

import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "dubito"
MAX_LINES, MAX_EXPERIMENT_LINES = 600, 450


def _too_long(files, limit: int, root: pathlib.Path = SRC) -> dict:
    lengths = {str(f.relative_to(root)): len(f.read_text(encoding="utf-8").splitlines()) for f in files}
    return {name: n for name, n in lengths.items() if n > limit}


def test_no_source_file_is_over_600_lines():
    files = list(SRC.rglob("*.py"))
    assert len(files) > 100  # the scan sees the package
    assert _too_long(files, MAX_LINES) == {}


def test_no_experiment_file_is_over_450_lines():
    files = list((SRC / "experiments").rglob("*.py"))
    assert len(files) > 20
    assert _too_long(files, MAX_EXPERIMENT_LINES) == {}


def test_the_rule_sees_a_long_file(tmp_path):
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    short.write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert _too_long([long, short], MAX_LINES, root=tmp_path) == {"long.py": MAX_LINES + 1}
