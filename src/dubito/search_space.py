"""Hyper-parameter ranges an estimator declares beside its defaults, for `dubito.tune`.

An estimator class lists what is worth tuning as ``search_space = {"lr": Float(1e-4, 1e-2,
log=True), "hidden": Choice([(50,), (100,)]), ...}``: each key a constructor parameter, each
value one of the three kinds below. `dubito.tune` turns them into Optuna suggestions. The
module has no dependency, so estimators can import it without importing Optuna.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Choice", "Float", "Int", "check_space"]


@dataclass(frozen=True)
class Float:
    """A real parameter in [low, high]; ``log=True`` draws it uniformly on the log scale."""

    low: float
    high: float
    log: bool = False

    def __post_init__(self):
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"Float needs finite low < high, got [{self.low}, {self.high}]")
        if self.log and self.low <= 0:
            raise ValueError(f"Float(log=True) needs low > 0, got {self.low}")


@dataclass(frozen=True)
class Int:
    """An integer parameter in [low, high] (both included); ``log=True`` on the log scale."""

    low: int
    high: int
    log: bool = False

    def __post_init__(self):
        if not (isinstance(self.low, int) and isinstance(self.high, int) and self.low < self.high):
            raise ValueError(f"Int needs integers low < high, got [{self.low}, {self.high}]")
        if self.log and self.low <= 0:
            raise ValueError(f"Int(log=True) needs low > 0, got {self.low}")


@dataclass(frozen=True)
class Choice:
    """One of ``options`` (any JSON-able values: numbers, strings, tuples of widths)."""

    options: tuple

    def __init__(self, options):
        options = tuple(options)
        if len(options) < 2:
            raise ValueError(f"Choice needs at least 2 options, got {list(options)}")
        labels = [self.label(o) for o in options]
        if len(set(labels)) != len(labels):
            raise ValueError(f"Choice options must differ, got {list(options)}")
        object.__setattr__(self, "options", options)

    @staticmethod
    def label(option: Any) -> str:
        """The option as Optuna stores it: its JSON text (tuples become lists)."""
        return json.dumps(option)

    def value(self, label: str) -> Any:
        """The option whose `label` is ``label``."""
        for option in self.options:
            if self.label(option) == label:
                return option
        raise ValueError(f"{label!r} is not one of {[self.label(o) for o in self.options]}")


def check_space(estimator, space) -> dict:
    """``space`` (or, when None, the estimator's declared ``search_space``) checked against the
    estimator's constructor parameters: one ValueError naming what is wrong."""
    name = type(estimator).__name__
    if space is None:
        space = getattr(type(estimator), "search_space", None)
        if not space:
            raise ValueError(f"{name} declares no search_space: pass space={{parameter: Float/Int/Choice}} to tune it")
    if not isinstance(space, dict) or not space:
        raise ValueError(f"space must be a non-empty dict of parameter -> Float/Int/Choice, got {space!r}")
    params = estimator.get_params(deep=False)
    unknown = sorted(k for k in space if k not in params)
    if unknown:
        raise ValueError(f"search space names unknown parameter(s) {unknown} of {name}; "
                         f"its parameters are {sorted(params)}")
    bad = sorted(k for k, v in space.items() if not isinstance(v, (Float, Int, Choice)))
    if bad:
        raise ValueError(f"search space entries {bad} must be Float, Int or Choice")
    return dict(space)
