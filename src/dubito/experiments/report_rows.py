"""The stored rows of a report grouped by data set, method and variant, and matched to the paper's numbers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dubito.experiments.base import Experiment, PaperNumber

__all__ = ["DOT", "FLAG"]

#: the separator of "method · variant" labels, and the mark of a value to read with care
DOT = " · "
FLAG = "⚠"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "x"


# ---------------------------------------------------------------------------------- store


def _ordered(first: Iterable[str], seen: Iterable[str]) -> list[str]:
    seen = list(dict.fromkeys(seen))
    out = [x for x in first if x in seen]
    return out + [x for x in seen if x not in out]


@dataclass
class _Dataset:
    name: str
    rows: list
    methods: list[str]
    variants: dict[str, list[str]]  # method -> variants in first-seen order

    def label(self, method: str, variant: str) -> str:
        """Just the variant when the method has one and the name is unambiguous."""
        if len(self.variants[method]) == 1:
            clashes = [m for m, vs in self.variants.items() if m != method and variant in vs]
            if not clashes:
                return variant
        return f"{method}{DOT}{variant}"

    def pairs(self) -> list[tuple[str, str]]:
        return [(m, v) for m in self.methods for v in self.variants[m]]

    def values(self, method: str, variant: str, metric: str) -> list[float]:
        out = []
        for r in self.rows:
            if r.method == method and variant in (r.variants or {}):
                metrics = r.variants[variant] or {}
                if metric in metrics:
                    out.append(metrics[metric])
        return out


def _group(rows, exp: Experiment, preset) -> list[_Dataset]:
    rows = sorted(rows, key=lambda r: (r.split, r.seed))
    datasets = _ordered(preset.datasets, (r.dataset for r in rows))
    out = []
    for ds in datasets:
        ds_rows = [r for r in rows if r.dataset == ds]
        methods = _ordered(tuple(preset.methods), (r.method for r in ds_rows))
        variants = {m: list(dict.fromkeys(v for r in ds_rows if r.method == m for v in (r.variants or {}))) for m in methods}
        out.append(_Dataset(ds, ds_rows, methods, variants))
    return out


def _match_paper(d: _Dataset, pn: PaperNumber) -> list[tuple[str, str]]:
    """Our (method, variant) pairs a paper number refers to: by variant name, by the display
    label, by "method · variant", or by the method name when the method has one variant."""
    pairs = d.pairs()
    for test in (
        lambda m, v: v == pn.variant,
        lambda m, v: d.label(m, v) == pn.variant or f"{m}{DOT}{v}" == pn.variant,
        lambda m, v: m == pn.variant and len(d.variants[m]) == 1,
    ):
        hits = [(m, v) for m, v in pairs if test(m, v)]
        if hits:
            return hits
    return []
