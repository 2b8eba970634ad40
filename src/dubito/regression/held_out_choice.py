"""One of two settings, kept by the one-standard-error rule on held-out rows.

Given each setting's held-out negative log-likelihood per row (the same rows for both), the
other setting replaces the default only where

    mean(d) + n_se * sd(d) / sqrt(m) < 0,   d_j = nll_other(y_j) - nll_default(y_j),

over the m rows (the one-standard-error rule of Breiman et al. 1984: the default unless the other
is clearly better). Used by `DeepEnsembleRegressor(input_encoding="auto")` (raw inputs, or their
piecewise-linear encoding) and `MCDropoutRegressor(dropout="auto")` (the benchmark's rate, or a
lower one).
"""

from __future__ import annotations

import numpy as np

__all__ = ["AUTO_CHOICES", "one_se_choice"]

#: The estimators' settings whose "auto" keeps one of two candidates by this rule: (setting, the fitted
#: attribute of the kept candidate, the fitted attribute of each candidate's held-out NLL per row).
AUTO_CHOICES = (("input_encoding", "input_encoding_", "encoding_scores_"), ("dropout", "dropout_", "dropout_scores_"))


def one_se_choice(losses: dict, default, n_se: float = 1.0):
    """The key of ``losses`` ({setting: held-out NLL per row, or None without held-out rows}) that
    the rule keeps: ``default``, or the other key of two where its mean NLL is lower by more than
    ``n_se`` standard errors of the paired per-row difference (module docstring). One key: that key."""
    if len(losses) == 1:
        return next(iter(losses))
    (other,) = set(losses) - {default}
    d = np.asarray(losses[other]) - np.asarray(losses[default])
    se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else np.inf
    return other if d.mean() + float(n_se) * se < 0 else default
