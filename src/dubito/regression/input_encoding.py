"""Which inputs a network sees: the standardised columns, or those plus their piecewise-linear
encoding (`dubito.nn.piecewise_linear`), chosen on held-out rows (`choose_encoding`).

Used by `DeepEnsembleRegressor(input_encoding=...)`; the choice and its validation-row evidence are in
its docstring and docs/results/ensemble-encoding.md.
"""

from __future__ import annotations

from dubito.regression.held_out_choice import one_se_choice

__all__ = ["DEFAULT_INPUT_ENCODING", "ENCODING_SE", "INPUT_ENCODINGS", "choose_encoding"]

#: ``input_encoding`` settings: the raw standardised inputs, those plus their piecewise-linear
#: encoding (`dubito.nn.piecewise_linear`), or whichever of the two the held-out rows choose
#: (`choose_encoding`).
INPUT_ENCODINGS = ("none", "piecewise_linear", "auto")
DEFAULT_INPUT_ENCODING = "auto"
#: Standard errors by which the encoded inputs must beat the raw ones on the held-out rows to be kept
#: (`choose_encoding`; `DeepEnsembleRegressor`'s docstring says how it was chosen).
ENCODING_SE = 1.0


def choose_encoding(losses: dict, n_se: float = None) -> str:
    """The input encoding "auto" keeps, from each encoding's held-out NLL per row (None: no held-out
    rows): "piecewise_linear" only where its mean is lower than the raw inputs' by more than ``n_se``
    (default ``ENCODING_SE``) standard errors of the paired per-row difference
    (`dubito.regression.held_out_choice.one_se_choice`: the simpler model unless the other is clearly
    better); else "none"."""
    if set(losses) != {"none", "piecewise_linear"}:
        return next(iter(losses))
    return one_se_choice(losses, "none", ENCODING_SE if n_se is None else float(n_se))
