"""MCDropoutRegressor(dropout="auto"): one of two rates kept by the one-standard-error rule on the
held-out rows, and `one_se_choice` itself against a brute-force reading of the rule."""

import numpy as np
import pytest

from dubito import io
from dubito.metrics.scoring import nll
from dubito.regression import MCDropoutRegressor
from dubito.regression.dropout import AUTO_DROPOUT_RATES
from dubito.regression.held_out_choice import one_se_choice
from dubito.regression.input_encoding import choose_encoding

SMALL = dict(n_samples=30, hidden=(32, 16), lr=3e-3, epochs=15, batch_size=16, patience=5, progress=False)


def _smooth(n, seed):
    """A smooth target with little noise, where the masks' spread at 0.05 is wide against the errors."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.02 * rng.normal(size=n)


@pytest.fixture(scope="module")
def auto_fit():
    X, y = _smooth(300, 0)
    return MCDropoutRegressor(random_state=3, **SMALL).fit(X, y), X, y


def test_one_se_choice_matches_the_rule_by_hand():
    rng = np.random.default_rng(0)
    for trial in range(200):
        m = int(rng.integers(2, 30))
        base = rng.normal(size=m)
        other = base + rng.normal(loc=rng.normal(scale=0.5), scale=rng.uniform(0.01, 1), size=m)
        d = other - base
        clearly_better = np.mean(d) + np.std(d, ddof=1) / np.sqrt(m) < 0
        assert one_se_choice({"a": base, "b": other}, "a") == ("b" if clearly_better else "a")
        assert one_se_choice({"b": other, "a": base}, "a") == ("b" if clearly_better else "a")
    assert one_se_choice({"a": None}, "a") == "a"
    # one row: no standard error, the default stays however much better the other is
    assert one_se_choice({"a": np.array([5.0]), "b": np.array([-5.0])}, "a") == "a"


def test_choose_encoding_is_the_same_rule_with_raw_inputs_as_default():
    rng = np.random.default_rng(1)
    for _ in range(50):
        raw, ple = rng.normal(size=20), rng.normal(size=20) - rng.uniform(0, 0.6)
        losses = {"none": raw, "piecewise_linear": ple}
        assert choose_encoding(losses) == one_se_choice(losses, "none")
    assert choose_encoding({"none": None}) == "none"


def test_auto_equals_the_fit_of_the_rate_it_kept(auto_fit):
    """Both candidates share the seed, so "auto" is bit for bit the fit of the rate it kept, and that
    rate is the rule's choice from the two fits' held-out NLL per row."""
    auto, X, y = auto_fit
    assert auto.dropout == "auto" and auto.dropout_ in AUTO_DROPOUT_RATES
    assert set(auto.dropout_scores_) == set(AUTO_DROPOUT_RATES)
    fixed = {p: MCDropoutRegressor(dropout=p, random_state=3, **SMALL).fit(X, y) for p in AUTO_DROPOUT_RATES}
    kept = fixed[auto.dropout_]
    np.testing.assert_array_equal(auto.predict_draws(X[:20]), kept.predict_draws(X[:20]))
    assert auto.noise_var_ == kept.noise_var_ and auto.variance_scale_ == kept.variance_scale_
    # the held-out rows are the ones the fixed-rate fits stop on: their per-row NLL, the rule's input
    losses = {}
    for p in AUTO_DROPOUT_RATES:
        est = MCDropoutRegressor(dropout=p, random_state=3, **SMALL)
        est._score_heldout = True
        est.fit(X, y)
        losses[p] = est._heldout_nll
        assert auto.dropout_scores_[p] == pytest.approx(float(np.mean(losses[p])), rel=1e-12)
    assert auto.dropout_ == one_se_choice(losses, AUTO_DROPOUT_RATES[0])
    # the network's masks are the kept rate's: entries 0 or 1 / (1 - p)
    mask = auto.sample_masks(50)[0]
    assert set(np.unique(mask.numpy()).round(12)) <= {0.0, round(1 / (1 - auto.dropout_), 12)}


def test_auto_keeps_the_lower_rate_on_a_smooth_target(auto_fit):
    """The case the default was changed for: a smooth target, where 0.01 is clearly better held out."""
    auto, _, _ = auto_fit
    assert auto.dropout_ == 0.01
    assert auto.dropout_scores_[0.01] < auto.dropout_scores_[0.05]


def test_auto_without_held_out_rows_trains_the_benchmark_rate_once():
    X, y = _smooth(120, 1)
    auto = MCDropoutRegressor(random_state=0, validation_fraction=0.0, **SMALL).fit(X, y)
    fixed = MCDropoutRegressor(dropout=0.05, random_state=0, validation_fraction=0.0, **SMALL).fit(X, y)
    assert auto.dropout_ == 0.05 and auto.dropout_scores_ is None
    np.testing.assert_array_equal(auto.predict_draws(X[:10]), fixed.predict_draws(X[:10]))


def test_auto_without_a_seed_gives_both_candidates_one_seed():
    """random_state=None: one seed is drawn for both fits, so their held-out rows are the same."""
    X, y = _smooth(200, 2)
    auto = MCDropoutRegressor(**SMALL).fit(X, y)
    assert auto.dropout_ in AUTO_DROPOUT_RATES and len(auto.dropout_scores_) == 2
    assert np.isfinite(nll(auto.predict_distribution(X[:10]), y[:10])).all()


def test_auto_save_load_keeps_the_rate_and_the_predictions(auto_fit, tmp_path):
    auto, X, y = auto_fit
    path = tmp_path / "mcd.safetensors"
    auto.save(path)
    back = MCDropoutRegressor.load(path)
    assert back.dropout == "auto" and back.dropout_ == auto.dropout_ and back.dropout_scores_ == auto.dropout_scores_
    np.testing.assert_array_equal(back.predict_distribution(X[:10]).log_prob(y[:10]),
                                  auto.predict_distribution(X[:10]).log_prob(y[:10]))


def test_a_file_written_before_auto_loads_with_its_rate(tmp_path):
    X, y = _smooth(120, 3)
    fixed = MCDropoutRegressor(dropout=0.1, random_state=0, **SMALL).fit(X, y)
    path = tmp_path / "old.safetensors"
    fixed.save(path)
    tensors, settings = io.load_tensors(path, "MCDropoutRegressor")
    fitted = {k: v for k, v in settings["fitted"].items() if k not in ("dropout", "dropout_scores")}
    io.save_tensors(path, tensors, "MCDropoutRegressor", {**settings, "fitted": fitted})
    old = MCDropoutRegressor.load(path)
    assert old.dropout_ == 0.1 and old.dropout_scores_ is None
    np.testing.assert_array_equal(old.predict_draws(X[:10]), fixed.predict_draws(X[:10]))


@pytest.mark.parametrize("bad", ["none", "Auto", 1.0, -0.1])
def test_a_bad_rate_is_refused_naming_dropout(bad):
    X, y = _smooth(60, 4)
    with pytest.raises(ValueError, match="dropout"):
        MCDropoutRegressor(dropout=bad, **SMALL).fit(X, y)
