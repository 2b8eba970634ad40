"""dubito.metrics.classification against oracles.

* accuracy, NLL, Brier: brute-force loops; the spec's closed cases (§6.11).
* ECE/MCE: torchmetrics' MulticlassCalibrationError (norm "l1" / "max", 20 bins; float32,
  so 1e-6) on confidences away from the bin edges; per-bin accuracy and confidence equal
  sklearn's calibration_curve(strategy="uniform") exactly, edges included (the same
  (lo, hi] rule). torchmetrics bins [lo, hi) and gives conf = 1.0 a bin of its own: a
  confidence on an interior edge or at 1.0 is binned differently there (tested below).
* ECE of a perfectly calibrated predictor (spec §6.12: conf ~ U(1/K, 1), correct ~
  Bernoulli(conf), n = 1e6, M = 20) < 0.005.
* AUROC/AUPR: sklearn's roc_auc_score / average_precision_score.
"""

import math
import re

import numpy as np
import pytest
import torch
from sklearn.calibration import calibration_curve
from sklearn.metrics import average_precision_score, roc_auc_score

from dubito import metrics
from dubito.metrics import classification as cm
from dubito.plots import save_figure
from dubito.plots_classification import plot_reliability_diagram
from dubito.predictive import ClassPredictive


def _random_pred(rng, n, k, t=4, conc=0.5):
    return ClassPredictive(rng.dirichlet(np.full(k, conc), size=(t, n)))


def _labels_from(rng, probs):
    """y_i ~ Categorical(probs_i) by inverse CDF."""
    u = rng.random(len(probs))[:, None]
    return np.minimum((np.cumsum(probs, axis=1) < u).sum(axis=1), probs.shape[1] - 1)


def _torchmetrics_ce(probs, y, norm):
    tm = pytest.importorskip("torchmetrics.functional.classification")  # the `test` extra has it
    return float(
        tm.multiclass_calibration_error(
            torch.tensor(probs, dtype=torch.float32), torch.tensor(y), num_classes=probs.shape[1], n_bins=20, norm=norm
        )
    )


def _calibrated(rng, n, k):
    """Spec §6.12: conf ~ U(1/K, 1) on a random class, the rest spread evenly; y ~ p̄, so P(correct | conf) = conf."""
    conf = rng.uniform(1 / k, 1, size=n)
    top = rng.integers(k, size=n)
    p = np.repeat(((1 - conf) / (k - 1))[:, None], k, axis=1)
    p[np.arange(n), top] = conf
    return p, _labels_from(rng, p)


def _assert_value_error(call, match):
    """``call()`` raises ValueError whose message matches the regex ``match``."""
    with pytest.raises(ValueError) as err:
        call()
    assert re.search(match, str(err.value)), str(err.value)


# ---------------------------------------------------------------------------- scores
def test_accuracy_nll_brier_equal_brute_force():
    rng = np.random.default_rng(0)
    pred = _random_pred(rng, 200, 6)
    y = _labels_from(rng, pred.probs)
    p = pred.probs
    acc = sum(int(np.argmax(p[i]) == y[i]) for i in range(200)) / 200
    nll = -sum(math.log(max(p[i, y[i]], 1e-7)) for i in range(200)) / 200
    brier = sum(sum(((c == y[i]) - p[i, c]) ** 2 for c in range(6)) for i in range(200)) / 200
    assert cm.accuracy(pred, y) == pytest.approx(acc, abs=1e-15)
    assert cm.nll(pred, y) == pytest.approx(nll, abs=1e-12)
    assert metrics.brier(pred, y) == pytest.approx(brier, abs=1e-12)
    assert cm.nll(pred.probs, y) == pytest.approx(nll, abs=1e-12)  # plain arrays are wrapped
    np.testing.assert_allclose(cm.nll(pred, y, reduction="none"), -np.log(p[np.arange(200), y]), atol=1e-12)
    assert np.all(cm.brier(pred, y, reduction="none") <= 2)


def test_closed_cases_of_the_spec():
    # spec §6.11: correct one-hot -> 0 / 0; uniform -> log K / 1 - 1/K; Brier in [0, 2]
    k = 7
    y = np.array([0, 3, 6])
    onehot = ClassPredictive(np.eye(k)[y])
    assert cm.nll(onehot, y) == 0 and cm.brier(onehot, y) == 0
    uniform = ClassPredictive(np.full((3, k), 1 / k))
    assert cm.nll(uniform, y) == pytest.approx(math.log(k), abs=1e-12)
    assert cm.brier(uniform, y) == pytest.approx(1 - 1 / k, abs=1e-12)
    wrong = ClassPredictive(np.eye(k)[(y + 1) % k])
    assert cm.brier(wrong, y) == 2.0
    # probability 0 on the label: the floor (1e-7) keeps NLL finite; floor 0 gives inf
    assert cm.nll(wrong, y) == pytest.approx(-math.log(1e-7), abs=1e-12)
    assert cm.nll(wrong, y, floor=0.0) == np.inf
    for measure in ClassPredictive.MEASURES:
        assert np.all(np.isfinite(wrong.measure(measure)))


def test_log_space_nll_agrees_with_naive_and_goes_below_float_underflow():
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=4, size=(5, 100, 4))
    pred = ClassPredictive.from_logits(logits)
    y = rng.integers(4, size=100)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    naive = -np.log(np.maximum(p.mean(0)[np.arange(100), y], 1e-7)).mean()
    assert cm.nll(pred, y) == pytest.approx(naive, abs=1e-12)
    deep = ClassPredictive.from_logits(np.array([[[0.0, -800.0]]]))  # p̄(1) = e^-800 underflows
    assert cm.nll(deep, [1], floor=0.0) == pytest.approx(800.0, abs=1e-9)
    assert cm.nll(deep, [1]) == pytest.approx(-math.log(1e-7), abs=1e-12)


# ---------------------------------------------------------------------------- calibration
def _assert_no_confidence_near_edges(conf, m=20, gap=1e-5):
    """torchmetrics bins in float32: keep confidences clear of the edges so both bin alike."""
    assert np.all(np.abs(conf * m - np.round(conf * m)) > gap * m)


def test_ece_and_mce_equal_torchmetrics():
    rng = np.random.default_rng(2)
    for k, conc in [(5, 0.5), (10, 0.2), (3, 3.0)]:
        probs = rng.dirichlet(np.full(k, conc), size=3000)
        conf = probs.max(1)
        keep = np.abs(conf * 20 - np.round(conf * 20)) > 2e-4
        probs = probs[keep]
        _assert_no_confidence_near_edges(probs.max(1))
        y = _labels_from(rng, probs ** 1.5 / (probs ** 1.5).sum(1, keepdims=True))  # miscalibrated
        pred = ClassPredictive(probs)
        assert cm.ece(pred, y) == pytest.approx(_torchmetrics_ce(probs, y, "l1"), abs=1e-6)
        assert cm.mce(pred, y) == pytest.approx(_torchmetrics_ce(probs, y, "max"), abs=1e-6)
        assert cm.ece(pred, y) <= cm.mce(pred, y)


def test_bin_edges_differ_from_torchmetrics_only_on_edges_and_at_one():
    # conf exactly 0.75 and 1.0: ours (lo, hi] puts 0.75 in (0.70, 0.75] and 1.0 in (0.95, 1.0];
    # torchmetrics puts 0.75 in [0.75, 0.80) and 1.0 in a 21st bin of its own.
    probs = np.array([[0.75, 0.25], [0.75, 0.25], [1.0, 0.0], [0.96, 0.04]])
    y = np.array([0, 1, 1, 0])
    d = cm.reliability_diagram(probs, y)
    assert d.count[14] == 2 and d.count[15] == 0 and d.count[19] == 2
    np.testing.assert_allclose(d.accuracy[[14, 19]], [0.5, 0.5])
    np.testing.assert_allclose(d.confidence[[14, 19]], [0.75, 0.98])
    ours = 0.5 * 0.25 + 0.5 * 0.48
    theirs = 0.5 * 0.25 + 0.25 * 1.0 + 0.25 * 0.04  # 1.0 (wrong) and 0.96 (right) binned apart
    assert d.ece == pytest.approx(ours, abs=1e-12)
    assert _torchmetrics_ce(probs, y, "l1") == pytest.approx(theirs, abs=1e-6)


def test_per_bin_accuracy_equals_sklearn_calibration_curve():
    # binary case: correctness is the outcome and the confidence its predicted probability;
    # sklearn's uniform strategy bins with the same (lo, hi] rule, so edges agree exactly.
    rng = np.random.default_rng(3)
    p1 = np.r_[rng.random(2000), np.arange(21) / 20]  # includes every edge, 0 and 1
    probs = np.c_[1 - p1, p1]
    y = (rng.random(p1.size) < p1 ** 0.7).astype(int)
    d = cm.reliability_diagram(probs, y)
    pred = ClassPredictive(probs)
    correct = (pred.predict() == y).astype(float)
    prob_true, prob_pred = calibration_curve(correct, pred.confidence, n_bins=20, strategy="uniform")
    full = d.count > 0
    np.testing.assert_allclose(d.accuracy[full], prob_true, atol=1e-12)
    np.testing.assert_allclose(d.confidence[full], prob_pred, atol=1e-12)
    assert np.all(np.isnan(d.accuracy[~full])) and np.all(d.count[:9] == 0)  # conf >= 0.5: bins 0-8 empty
    assert d.n == p1.size


def test_ece_near_zero_for_a_calibrated_predictor():
    # spec §6.12: n = 1e6, M = 20 -> ECE < 0.005 (sampling noise alone is ~0.002)
    rng = np.random.default_rng(4)
    p, y = _calibrated(rng, 1_000_000, 4)
    pred = ClassPredictive(p)
    assert cm.ece(pred, y) < 0.005
    assert cm.mce(pred, y) < 0.02
    sharp = p ** 3 / (p ** 3).sum(1, keepdims=True)  # the same labels, overconfident probabilities
    assert cm.ece(sharp[:100_000], y[:100_000]) > 0.05


def test_ece_properties():
    rng = np.random.default_rng(5)
    pred = _random_pred(rng, 500, 4)
    y = _labels_from(rng, pred.probs)
    # ECE <= MCE; permutation invariant
    perm = rng.permutation(500)
    assert cm.ece(pred, y) <= cm.mce(pred, y)
    assert cm.ece(pred[perm], y[perm]) == pytest.approx(cm.ece(pred, y), abs=1e-14)
    # always wrong: ECE = mean confidence, MCE = the largest per-bin mean confidence
    wrong = (pred.predict() + 1) % 4
    d = cm.reliability_diagram(pred, wrong)
    assert d.ece == pytest.approx(pred.confidence.mean(), abs=1e-12)
    assert d.mce == pytest.approx(np.nanmax(d.confidence), abs=1e-12)
    # empty bins are skipped: one point gives one bin
    one = cm.reliability_diagram(pred[:1], y[:1])
    assert one.count.sum() == 1 and np.isnan(one.accuracy).sum() == 19
    assert one.ece == one.mce == pytest.approx(abs(float(pred.predict()[0] == y[0]) - pred.confidence[0]))
    # other bin counts
    assert len(cm.reliability_diagram(pred, y, n_bins=7).count) == 7


def test_ece_with_ood_counts_every_ood_prediction_wrong():
    # thesis "w. OOD": test ∪ OOD with every OOD prediction incorrect (spec §3.3, §6.12)
    rng = np.random.default_rng(6)
    pred, ood = _random_pred(rng, 300, 5), _random_pred(rng, 120, 5)
    y = _labels_from(rng, pred.probs)
    wrong_ood = (ood.predict() + 1) % 5
    both = ClassPredictive(np.r_[pred.probs, ood.probs])
    expected = cm.ece(both, np.r_[y, wrong_ood])
    assert cm.ece(pred, y, ood=ood) == pytest.approx(expected, abs=1e-12)
    assert cm.mce(pred, y, ood=ood) == pytest.approx(cm.mce(both, np.r_[y, wrong_ood]), abs=1e-12)
    assert cm.ece(pred, y, ood=ood[:0]) == cm.ece(pred, y)  # zero OOD samples change nothing
    _assert_value_error(lambda: cm.ece(pred, y, ood=_random_pred(rng, 10, 3)), "K = 3 classes")


# ---------------------------------------------------------------------------- detection
def test_misclassification_auroc_aupr_equal_sklearn():
    rng = np.random.default_rng(7)
    pred = _random_pred(rng, 400, 5, t=6)
    y = _labels_from(rng, pred.probs)
    correct = pred.predict() == y
    signs = {"confidence": 1, "predictive_entropy": -1, "expected_entropy": -1, "mutual_information": -1, "variation_ratio": -1}
    for measure, sign in signs.items():
        score = sign * pred.measure(measure)
        np.testing.assert_array_equal(cm.certainty(pred, measure), score)
        assert cm.misclassification_auroc(pred, y, measure) == pytest.approx(roc_auc_score(correct, score), abs=1e-12)
        assert cm.misclassification_aupr(pred, y, measure) == pytest.approx(
            average_precision_score(correct, score), abs=1e-12
        )
    assert metrics.misclassification_auroc(pred, y) == cm.misclassification_auroc(pred, y, "confidence")
    # confidence that always ranks correct above wrong -> 1
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.55, 0.45]])
    assert cm.misclassification_auroc(probs, [0, 0, 1, 1]) == 1.0


def test_ood_auroc_aupr_use_the_core_convention():
    rng = np.random.default_rng(8)
    pred_in = _random_pred(rng, 300, 6, t=5, conc=0.3)
    pred_out = _random_pred(rng, 150, 6, t=5, conc=1.0)
    y_in = _labels_from(rng, pred_in.probs)
    for measure in ClassPredictive.MEASURES:
        s_in, s_out = cm.ood_score(pred_in, measure), cm.ood_score(pred_out, measure)
        labels = np.r_[np.zeros(300), np.ones(150)]
        assert cm.ood_auroc(pred_in, pred_out, measure) == pytest.approx(roc_auc_score(labels, np.r_[s_in, s_out]), abs=1e-12)
        assert cm.ood_aupr(pred_in, pred_out, measure) == pytest.approx(
            average_precision_score(labels, np.r_[s_in, s_out]), abs=1e-12
        )
        # the thesis's curves: correct in-distribution predictions (positive) vs OOD, AUPR-In
        ok = pred_in.predict() == y_in
        cert = np.r_[-s_in[ok], -s_out]
        is_in = np.r_[np.ones(ok.sum()), np.zeros(150)]
        assert cm.ood_auroc(pred_in, pred_out, measure, y_in=y_in) == pytest.approx(roc_auc_score(is_in, cert), abs=1e-12)
        assert cm.ood_aupr(pred_in, pred_out, measure, y_in=y_in, positive="in") == pytest.approx(
            average_precision_score(is_in, cert), abs=1e-12
        )
    assert cm.ood_score(pred_in, "confidence") == pytest.approx(-pred_in.confidence)
    # T = 1: MI = 0 everywhere, so MI cannot separate (1/2)
    assert cm.ood_auroc(ClassPredictive(pred_in.probs), ClassPredictive(pred_out.probs)) == 0.5


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "y, match",
    [
        ([0, 1, 3], "outside 0..2"),
        ([0, -1, 2], "outside 0..2"),
        ([0, 1.5, 2], "integer"),
        ([0, np.nan, 2], "NaN"),
        ([0, 1], "shape \\(3,\\)"),
        ([[0, 1, 2]], "shape \\(3,\\)"),
    ],
)
def test_bad_labels_raise(y, match):
    pred = ClassPredictive(np.full((3, 3), 1 / 3))
    for fn in (cm.accuracy, cm.nll, cm.brier, cm.ece, cm.mce, cm.reliability_diagram, cm.misclassification_auroc):
        _assert_value_error(lambda: fn(pred, y), match)
    _assert_value_error(lambda: cm.ood_auroc(pred, pred, y_in=y), match)


def test_other_bad_inputs_raise():
    pred = ClassPredictive(np.array([[0.9, 0.1], [0.2, 0.8]]))
    _assert_value_error(lambda: cm.misclassification_auroc(pred, [0, 1]), "both correct and misclassified")
    _assert_value_error(lambda: cm.misclassification_auroc(pred, [0, 0], "entropy"), "unknown measure")
    _assert_value_error(lambda: cm.ece(pred, [0, 1], n_bins=0), "n_bins")
    _assert_value_error(lambda: cm.ece(np.array([[0.9, 0.3]]), [0]), "pred: expected a ClassPredictive")
    _assert_value_error(lambda: cm.nll(pred, [0, 1], reduction="sum"), "reduction")
    _assert_value_error(lambda: cm.nll(pred, [0, 1], floor=1.0), "floor")
    _assert_value_error(lambda: cm.ood_aupr(pred, pred, positive="out"), "positive")
    _assert_value_error(lambda: cm.accuracy(pred[:0], []), "at least one input")
    _assert_value_error(lambda: cm.ood_auroc(pred, pred[:0]), "OOD detection needs")


# ---------------------------------------------------------------------------- plot
def test_reliability_plot_returns_a_figure(tmp_path):
    import matplotlib.figure

    rng = np.random.default_rng(9)
    pred, other = _random_pred(rng, 300, 4), _random_pred(rng, 300, 4, conc=2.0)
    y = _labels_from(rng, pred.probs)
    fig = plot_reliability_diagram(pred, y, ood=other[:50])
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "ECE" in fig.axes[0].get_legend().get_texts()[1].get_text()
    fig2 = plot_reliability_diagram({"a": pred, "b": other}, y, n_bins=10)
    assert len(fig2.axes[0].lines) == 3  # ideal + one line per predictive
    path = save_figure(fig2, tmp_path / "rel.png")
    assert path.stat().st_size > 1000
