"""dubito.metrics.ood against scikit-learn (OOD = positive class, higher score = more OOD).

sklearn oracles: roc_auc_score, average_precision_score, and roc_curve(drop_intermediate=False)
read at the first point with TPR >= target. Agreement to 1e-12 (exact up to rounding).
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from dubito.metrics import aupr, auroc, fpr_at_tpr, ood


def _labels(s_in, s_out):
    y = np.r_[np.zeros(len(s_in)), np.ones(len(s_out))]
    return y, np.r_[s_in, s_out]


def _sk_fpr_at_tpr(s_in, s_out, tpr):
    y, s = _labels(s_in, s_out)
    fpr, tprs, _ = roc_curve(y, s, drop_intermediate=False)
    return fpr[np.searchsorted(tprs, tpr, side="left")]


def _check_all(s_in, s_out, tprs=(0.95, 0.5, 0.8, 1.0, 0.01)):
    y, s = _labels(s_in, s_out)
    assert auroc(s_in, s_out) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert aupr(s_in, s_out) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    for t in tprs:
        assert fpr_at_tpr(s_in, s_out, t) == pytest.approx(_sk_fpr_at_tpr(s_in, s_out, t), abs=1e-12), t


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_continuous_scores_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    _check_all(rng.normal(0, 1, 300), rng.normal(1, 1.5, 120))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heavily_tied_scores_match_sklearn(seed):
    rng = np.random.default_rng(10 + seed)
    s_in = rng.integers(0, 4, 200).astype(float)
    s_out = rng.integers(1, 5, 60).astype(float)
    _check_all(s_in, s_out, tprs=(0.95, 0.5, 0.8, 0.9, 1.0, 0.01, 60 / 60, 57 / 60))


def test_ties_count_one_half():
    # every pair tied -> AUROC 1/2 exactly; AP = prevalence; everything flagged -> FPR 1
    assert auroc(np.ones(5), np.ones(3)) == 0.5
    assert aupr(np.ones(5), np.ones(3)) == pytest.approx(3 / 8)
    assert fpr_at_tpr(np.ones(5), np.ones(3)) == 1.0
    # hand case: in = [0, 1], out = [1, 2]: pairs (out > in) = 3, tied = 1 -> (3 + 0.5) / 4
    assert auroc([0.0, 1.0], [1.0, 2.0]) == 0.875
    # 95% TPR with 20 OOD points needs 19 flagged: threshold = 2nd smallest OOD score
    s_out = np.arange(20.0)
    assert fpr_at_tpr([0.5, 1.0, 1.5, 3.0], s_out, 0.95) == 0.75  # scores >= 1.0 flagged
    _check_all(np.array([0.5, 1.0, 1.5, 3.0]), s_out)


def test_perfect_and_reversed_separation():
    s_in, s_out = np.arange(10.0), np.arange(10.0, 15.0)
    assert auroc(s_in, s_out) == 1.0 and aupr(s_in, s_out) == 1.0 and fpr_at_tpr(s_in, s_out) == 0.0
    assert auroc(s_out, s_in) == 0.0 and fpr_at_tpr(s_out, s_in) == 1.0
    _check_all(s_in, s_out)
    _check_all(s_out, s_in)
    # symmetry of the Mann-Whitney statistic
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 5, 50).astype(float), rng.integers(0, 5, 30).astype(float)
    assert auroc(a, b) == pytest.approx(1 - auroc(b, a), abs=1e-15)


def test_single_points_and_infinite_scores():
    _check_all(np.array([0.0]), np.array([1.0]))
    _check_all(np.array([1.0]), np.array([1.0]))
    assert auroc([-np.inf, 0.0], [np.inf, 0.0]) == 0.875
    assert fpr_at_tpr([0.0, np.inf], [np.inf, 1.0], 0.5) == 0.5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=25),
    st.lists(st.integers(0, 6), min_size=1, max_size=25),
    st.sampled_from([0.95, 0.5, 0.9, 1.0, 0.3]),
)
def test_property_matches_sklearn_on_tied_integers(a, b, tpr):
    _check_all(np.array(a, float), np.array(b, float), tprs=(tpr,))


@pytest.mark.parametrize("fn", [auroc, aupr, fpr_at_tpr])
def test_degenerate_inputs_raise_one_clear_error(fn):
    with pytest.raises(ValueError, match="score_in is empty"):
        fn([], [1.0, 2.0])
    with pytest.raises(ValueError, match="score_out is empty"):
        fn([1.0], np.array([]))
    with pytest.raises(ValueError, match="score_out holds 1 NaN"):
        fn([1.0, 2.0], [np.nan, 3.0])
    with pytest.raises(ValueError, match="score_in holds 2 NaN"):
        fn([np.nan, np.nan], [3.0])


def test_tpr_validated_and_torch_and_shapes_accepted():
    with pytest.raises(ValueError, match="tpr"):
        fpr_at_tpr([0.0], [1.0], 0.0)
    with pytest.raises(ValueError, match="tpr"):
        fpr_at_tpr([0.0], [1.0], 1.5)
    rng = np.random.default_rng(4)
    s_in, s_out = rng.normal(size=(6, 5)), rng.normal(1, 1, 17)
    assert auroc(torch.tensor(s_in), torch.tensor(s_out)) == auroc(s_in.ravel(), s_out)
    assert aupr(s_in, s_out) == aupr(s_in.ravel(), s_out)
    # the module stays importable by name
    assert ood.auroc is auroc
