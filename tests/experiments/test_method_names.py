"""One name per method: every experiment names its methods as `dubito.methods` does and builds its
estimators through that registry (issue 23): the regressors' ``METHODS``, the classifiers'
``CLASSIFIERS`` (the thesis)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dubito.classification
import dubito.regression
from dubito import experiments
from dubito.methods import CLASSIFIERS, METHODS, build, get_classifier, get_method

EXPERIMENTS_DIR = Path(experiments.__file__).parent
#: the registry each experiment's methods come from
REGISTRY = {"thesis": CLASSIFIERS}


@pytest.mark.parametrize("name", experiments.available())
def test_every_method_is_a_registry_entry_or_says_which_it_builds_on(name):
    exp = experiments.get(name)
    registry = REGISTRY.get(name, METHODS)
    for target in exp.builds_on.values():
        assert target is None or target in registry, f"{name}: builds on unknown {target!r}"
    for preset in exp.presets.values():
        for method in preset.methods:
            if method in exp.builds_on:
                continue
            assert method in registry, f"{name}/{preset.name}: {method!r} is neither a dubito.methods entry nor in builds_on"


def _constructed_names(path: Path) -> set[str]:
    """Names called directly (``Name(...)``) or as ``module.Name(...)`` in a source file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def test_experiments_build_estimators_only_through_the_registry():
    estimators = {n for n in dubito.regression.__all__ if n.endswith("Regressor")}
    estimators |= {n for n in dubito.classification.__all__ if n.endswith("Classifier") or n == "KFACLaplace"}
    assert {"MCDropoutClassifier", "KFACLaplace", "DeepEnsembleRegressor"} <= estimators
    offenders = {str(p.relative_to(EXPERIMENTS_DIR)): sorted(_constructed_names(p) & estimators)
                 for p in EXPERIMENTS_DIR.rglob("*.py")}
    assert {p: names for p, names in offenders.items() if names} == {}


def test_the_classifier_entries_fix_what_defines_them():
    assert {n: CLASSIFIERS[n].build().dropout for n in ("softmax", "mc-dropout", "concrete-dropout", "multidrop")} == {
        "softmax": "none", "mc-dropout": "bernoulli", "concrete-dropout": "concrete", "multidrop": "multidrop"}
    with pytest.raises(ValueError, match=r"method 'multidrop' fixes dropout='multidrop'; another value"):
        get_classifier("multidrop").build(dropout="concrete")
    with pytest.raises(ValueError, match="unknown classification method 'ori'; available: concrete-dropout, "):
        get_classifier("ori")


def test_build_keeps_what_defines_the_method():
    assert build("mean-variance", hidden=(4,)).get_params()["n_members"] == 1
    assert build("ensemble-standard").correction == "none"
    with pytest.raises(ValueError, match=r"method 'ensemble-standard' fixes correction='none'; another value"):
        build("ensemble-standard", correction="bayes")
    with pytest.raises(ValueError, match="unknown method 'bnn'; available: "):
        get_method("bnn")


def test_make_adds_the_cli_budget_and_the_run_settings_the_estimator_takes():
    dn = get_method("deepnoise").make(random_state=3, progress=False)
    assert (dn.hidden, dn.n_burnin, dn.random_state, dn.progress) == ((20, 20), 2000, 3, False)
    assert get_method("deepnoise").build().hidden != (20, 20)  # the experiments' build: no CLI budget
    naive = get_method("naive").make(random_state=3, epochs=5)  # no seed, device or epochs to take
    assert naive.get_params() == build("naive").get_params()


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_entry_makes_its_estimator_with_its_fixed_settings_and_cli_budget(name):
    method = METHODS[name]
    est = method.make(random_state=5, progress=False)
    assert type(est) is method.estimator
    params = est.get_params()
    for key, value in {**method.fixed, **method.cli}.items():
        assert params[key] == value, (name, key)
    if "random_state" in params:
        assert params["random_state"] == 5 and params["progress"] is False
