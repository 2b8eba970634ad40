"""Out-of-distribution detection metrics.

**Convention: OOD is the positive class, and a higher score means "more OOD".** Pass the
scores of the in-distribution points as ``score_in`` and of the OOD points as ``score_out``;
a score where *lower* means more OOD (e.g. a max class probability) must be negated first.

* :func:`auroc` - P(S_out > S_in) + 1/2 P(S_out = S_in): the Mann-Whitney U statistic
  normalised, ties counted one half (equals sklearn's ``roc_auc_score``).
* :func:`aupr` - average precision with OOD positive (equals sklearn's
  ``average_precision_score``; no interpolation).
* :func:`fpr_at_tpr` - the fraction of in-distribution points flagged by the strictest
  threshold that flags at least ``tpr`` of the OOD points ("FPR at 95% TPR").

Scores are compared exactly (ties are ties). Any shape is accepted and flattened; torch
tensors too. An empty side or a NaN score raises ``ValueError``; +-inf are ordinary values.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from dubito.predictive.base import as_numpy

__all__ = ["auroc", "aupr", "fpr_at_tpr"]


def _scores(score_in, score_out) -> tuple[np.ndarray, np.ndarray]:
    s_in = as_numpy(score_in, "score_in").ravel()
    s_out = as_numpy(score_out, "score_out").ravel()
    problems = []
    for name, s in (("score_in", s_in), ("score_out", s_out)):
        if s.size == 0:
            problems.append(f"{name} is empty")
        elif np.isnan(s).any():
            problems.append(f"{name} holds {int(np.isnan(s).sum())} NaN value(s)")
    if problems:
        raise ValueError(
            "OOD metrics need a non-empty, NaN-free array of scores on each side: " + "; ".join(problems)
        )
    return s_in, s_out


def auroc(score_in, score_out) -> float:
    """Area under the ROC curve with OOD positive (higher score = more OOD).

    AUROC = (1/(n_in n_out)) sum_{i,j} [ 1{s_out_j > s_in_i} + 1/2 1{s_out_j = s_in_i} ]
          = U_out / (n_in n_out),   U_out = R_out - n_out (n_out + 1) / 2,

    with R_out the sum of the mid-ranks of the OOD scores in the pooled sample
    (Mann & Whitney 1947; Hanley & McNeil 1982). Exact with ties; 1 = perfect separation,
    1/2 = chance, 0 = perfectly reversed.
    """
    s_in, s_out = _scores(score_in, score_out)
    n_in, n_out = s_in.size, s_out.size
    ranks = stats.rankdata(np.concatenate([s_in, s_out]), method="average")
    u_out = ranks[n_in:].sum() - n_out * (n_out + 1) / 2.0
    return float(u_out / (n_in * n_out))


def _desc_counts(s_in: np.ndarray, s_out: np.ndarray):
    """Distinct thresholds (descending) with cumulative OOD (tp) and in-dist (fp) counts at >= each."""
    scores = np.concatenate([s_out, s_in])
    is_out = np.concatenate([np.ones(s_out.size), np.zeros(s_in.size)])
    order = np.argsort(-scores, kind="mergesort")
    scores, is_out = scores[order], is_out[order]
    # last index of each run of equal scores
    last = np.r_[np.nonzero(np.diff(scores))[0], scores.size - 1]
    tp = np.cumsum(is_out)[last]
    fp = (last + 1) - tp
    return scores[last], tp, fp


def aupr(score_in, score_out) -> float:
    """Area under the precision-recall curve with OOD positive: average precision.

    AP = sum_k (R_k - R_{k-1}) P_k over the distinct thresholds t_k in decreasing order,
    P_k = TP_k / (TP_k + FP_k), R_k = TP_k / n_out, counts of scores >= t_k, R_0 = 0
    (step-wise, no interpolation; the definition of sklearn's ``average_precision_score``).
    Tied scores enter together at one threshold. Chance level is n_out / (n_in + n_out).
    """
    s_in, s_out = _scores(score_in, score_out)
    _, tp, fp = _desc_counts(s_in, s_out)
    precision = tp / (tp + fp)
    recall = tp / s_out.size
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fpr_at_tpr(score_in, score_out, tpr: float = 0.95) -> float:
    """False-positive rate at the strictest threshold that detects at least ``tpr`` of the OOD points.

    A point is flagged OOD when its score is >= the threshold t (ties with t are flagged).
    t* = the largest t with TPR(t) = #{s_out >= t} / n_out >= ``tpr`` (the k-th largest OOD
    score, k the smallest integer with k / n_out >= tpr); the result is
    FPR(t*) = #{s_in >= t*} / n_in. Because ties with t* are flagged on both sides, the
    achieved TPR can exceed ``tpr`` and in-distribution scores tied with t* count as false
    positives. This equals sklearn's ``roc_curve(..., drop_intermediate=False)`` read at
    the first point with tpr >= ``tpr``. Lower is better; ``tpr`` in (0, 1].
    """
    tpr = float(tpr)
    if not 0 < tpr <= 1:
        raise ValueError(f"tpr must lie in (0, 1], got {tpr}")
    s_in, s_out = _scores(score_in, score_out)
    n_out = s_out.size
    k = int(np.ceil(tpr * n_out))
    # smallest k with k / n_out >= tpr, in the same floating-point arithmetic as the ROC curve
    while k > 1 and (k - 1) / n_out >= tpr:
        k -= 1
    while k < n_out and k / n_out < tpr:
        k += 1
    k = min(max(k, 1), n_out)
    threshold = np.sort(s_out)[::-1][k - 1]
    return float(np.mean(s_in >= threshold))
