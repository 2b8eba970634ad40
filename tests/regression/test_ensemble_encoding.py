"""DeepEnsembleRegressor's ``input_encoding``: the piecewise-linear inputs, and "auto" keeping whichever
encoding has the lower held-out NLL (dubito.nn.piecewise_linear)."""

import numpy as np
import pytest

from dubito import io
from dubito._estimator import seed_base
from dubito.early_stopping import holdout_split
from dubito.metrics.scoring import nll
from dubito.regression import DeepEnsembleRegressor
from dubito.regression.input_encoding import choose_encoding

FAST = dict(n_members=2, hidden=(16,), lr=1e-2, batch_size=16, epochs=40, patience=5, progress=False, random_state=1)


def _step_data(n=300, seed=0):
    """y a step function of x0 (a tree's target; a ReLU net needs many units for the jumps) plus x1."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.floor(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def fits():
    X, y = _step_data()
    return X, y, {enc: DeepEnsembleRegressor(input_encoding=enc, **FAST).fit(X, y)
                  for enc in ("none", "piecewise_linear", "auto")}


def test_auto_keeps_the_encoding_the_held_out_rows_choose(fits):
    X, y, est = fits
    auto = est["auto"]
    rows = holdout_split(len(y), 0.1, seed_base(1), batch_size=16)[1]
    losses = {}
    for enc in ("none", "piecewise_linear"):  # the same two fits as alone, scored on the held-out rows
        losses[enc] = nll(est[enc].predict_distribution(X[rows]), y[rows])
        assert auto.encoding_scores_[enc] == est[enc].encoding_scores_[enc]
        assert est[enc].encoding_scores_[enc] == pytest.approx(losses[enc].mean(), rel=1e-12)
    assert auto.input_encoding_ == choose_encoding(losses) == "piecewise_linear"  # the ramps bend where the data jump
    np.testing.assert_array_equal(auto.predict(X[:20]), est["piecewise_linear"].predict(X[:20]))
    assert est["none"].encoding_ is None and est["none"].net_.n_features == 2
    assert est["piecewise_linear"].net_.n_features == est["piecewise_linear"].encoding_.n_outputs == 2 + 16 + 16


def test_the_encoding_is_kept_only_when_it_wins_by_more_than_one_standard_error():
    rng = np.random.default_rng(0)
    raw = rng.normal(1.0, 1.0, 400)
    noise = rng.normal(0.0, 1.0, 400)
    d = noise - noise.mean()
    se = d.std(ddof=1) / np.sqrt(d.size)
    assert choose_encoding({"none": raw, "piecewise_linear": raw + d - 1.5 * se}) == "piecewise_linear"
    assert choose_encoding({"none": raw, "piecewise_linear": raw + d - 0.5 * se}) == "none"  # lower, not clearly
    assert choose_encoding({"none": raw, "piecewise_linear": raw + d + 3 * se}) == "none"
    assert choose_encoding({"piecewise_linear": None}) == "piecewise_linear"  # one encoding asked for
    assert choose_encoding({"none": None}) == "none"


def test_without_held_out_rows_auto_is_the_raw_inputs():
    X, y = _step_data(n=80)
    est = DeepEnsembleRegressor(input_encoding="auto", validation_fraction=0.0, **{**FAST, "epochs": 3}).fit(X, y)
    assert est.input_encoding_ == "none" and est.encoding_ is None and est.encoding_scores_ == {"none": None}


def test_an_encoded_model_round_trips_and_older_files_load_as_raw(fits, tmp_path):
    X, y, est = fits
    path = tmp_path / "pl.safetensors"
    est["auto"].save(path)
    back = DeepEnsembleRegressor.load(path)
    assert back.input_encoding_ == "piecewise_linear" and back.encoding_scores_ == est["auto"].encoding_scores_
    np.testing.assert_array_equal(back.predict_distribution(X[:30]).variances,
                                  est["auto"].predict_distribution(X[:30]).variances)
    # a file written before input_encoding: no setting, no record, no encoding tensors
    est["none"].save(tmp_path / "raw.safetensors")
    tensors, settings = io.load_tensors(tmp_path / "raw.safetensors", "DeepEnsembleRegressor")
    settings["params"].pop("input_encoding")
    for key in ("input_encoding", "encoding_scores"):
        settings["fitted"].pop(key)
    io.save_tensors(tmp_path / "old.safetensors", tensors, "DeepEnsembleRegressor", settings)
    old = DeepEnsembleRegressor.load(tmp_path / "old.safetensors")
    assert old.input_encoding == old.input_encoding_ == "none"
    np.testing.assert_array_equal(old.predict(X[:10]), est["none"].predict(X[:10]))
    # an encoded file whose encoding tensors do not match the network is refused, naming the file
    tensors, settings = io.load_tensors(path, "DeepEnsembleRegressor")
    tensors["encoding.edge_counts"] = tensors["encoding.edge_counts"][:1]
    io.save_tensors(tmp_path / "bad.safetensors", tensors, "DeepEnsembleRegressor", settings)
    with pytest.raises(ValueError, match="bad.safetensors"):
        DeepEnsembleRegressor.load(tmp_path / "bad.safetensors")


def test_an_unknown_encoding_is_one_clear_error():
    X, y = _step_data(n=40)
    with pytest.raises(ValueError, match="input_encoding"):
        DeepEnsembleRegressor(input_encoding="fourier", **FAST).fit(X, y)
