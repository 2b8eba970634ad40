"""The package's layers point one way (docs/design.md): every import between dubito's top-level
modules and packages, including imports inside functions, goes from a higher layer to a strictly
lower one, so no module below the experiments imports them and regression and classification do
not import each other."""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"

#: layer of each top-level module or package of dubito; imports must go to a strictly lower layer
LAYERS = {
    "_validation": 0, "io": 0, "_standardise": 0, "heap": 0, "graphed_steps": 0, "pipeline": 0,
    "_parallel": 1, "early_stopping": 1, "predictive": 1, "nn": 1, "search_space": 1, "training_checkpoint": 1,
    "inference": 1, "data": 1,
    "_estimator": 2, "metrics": 2, "variance_scale": 2,
    "training_loop": 3, "recalibrate": 3, "plots": 3, "plots_classification": 3, "tune": 3,
    "regression": 4, "classification": 4,
    "methods": 5,
    "run": 6, "experiments": 6,
    "cli": 7,
}


def _unit(dotted: str) -> str | None:
    """The top-level unit of a dubito module name (dubito.regression.ensemble -> regression)."""
    parts = dotted.split(".")
    if parts[0] != "dubito" or len(parts) < 2:
        return None
    return parts[1]


def _imports(src: pathlib.Path = SRC):
    """(importing unit, imported unit, file, line) for every import between two dubito units."""
    for path in sorted((src / "dubito").rglob("*.py")):
        rel = path.relative_to(src).with_suffix("").parts
        if len(rel) < 2:  # dubito/__init__.py re-exports the public API
            continue
        here = rel[1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = ([f"dubito.{a.name}" for a in node.names] if node.module == "dubito" else [node.module])
            else:
                continue
            for name in names:
                there = _unit(name)
                if there is not None and there != here and there != "__version__":
                    yield here, there, path.relative_to(src), node.lineno


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in (SRC / "dubito").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert units - set(LAYERS) == set(), "give each new module of dubito a layer in LAYERS"


def test_imports_point_down():
    bad = [f"{path}:{line}: {here} (layer {LAYERS[here]}) imports {there} (layer {LAYERS[there]})"
           for here, there, path, line in _imports() if LAYERS[there] >= LAYERS[here]]
    assert bad == []


@pytest.mark.parametrize("here,there", [("classification", "regression"), ("regression", "experiments"),
                                        ("metrics", "regression")])
def test_the_scan_sees_imports_inside_functions(tmp_path, here, there):
    # a planted function-level import of a higher or sibling layer is caught
    pkg = tmp_path / "dubito" / here
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "planted.py").write_text(f"def f():\n    from dubito.{there} import x\n    return x\n")
    found = list(_imports(tmp_path))
    assert (here, there) in [(a, b) for a, b, *_ in found]
    assert any(LAYERS[b] >= LAYERS[a] for a, b, *_ in found)
