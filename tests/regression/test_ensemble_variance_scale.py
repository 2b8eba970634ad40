"""DeepEnsembleRegressor's held-out variance scale (`dubito.variance_scale`)."""

import numpy as np
import pytest

import dubito.variance_scale as variance_scale_module
from dubito import io
from dubito.early_stopping import holdout_split
from dubito.predictive import GaussianMixture, StudentTMixture
from dubito.regression import DeepEnsembleRegressor
from dubito.regression.ensemble import DEFAULT_TAIL_DF
from dubito.variance_scale import fit_variance_scale

FAST = dict(n_members=2, hidden=(16,), epochs=40, batch_size=32, random_state=3, progress=False)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    return (DeepEnsembleRegressor(**FAST).fit(X, y),
            DeepEnsembleRegressor(**FAST, variance_scaling="none").fit(X, y))


def test_the_scale_multiplies_every_component_variance(data, fitted):
    """Same seed, same training: the scaled predictive is the unscaled one with every variance
    (noise and Bayes term) times c, and c is the MAP scale of the unscaled predictive on the
    held-out rows (recomputed here from the same rows)."""
    X, y = data
    scaled, plain = fitted
    assert plain.variance_scale_ == 1.0 and scaled.variance_scale_ != 1.0
    p, q = scaled.predict_distribution(X[:50]), plain.predict_distribution(X[:50])
    np.testing.assert_array_equal(p.means, q.means)
    np.testing.assert_allclose(p.variances, scaled.variance_scale_ * q.variances, rtol=1e-12)
    np.testing.assert_allclose(p.noise_variances, scaled.variance_scale_ * q.noise_variances, rtol=1e-12)
    _, val = holdout_split(len(y), 0.1, 3)
    assert scaled.variance_scale_ == pytest.approx(fit_variance_scale(plain.predict_distribution(X[val]), y[val]),
                                                   rel=1e-9)
    draws = scaled.sample_posterior(X[:3], 20000, random_state=0)
    np.testing.assert_allclose(draws.var(0), p.var[:3], rtol=0.05)  # Monte Carlo, 20,000 draws


def test_no_heldout_rows_no_scale_and_bad_setting(data):
    X, y = data
    assert DeepEnsembleRegressor(**FAST, validation_fraction=0.0).fit(X, y).variance_scale_ == 1.0
    with pytest.raises(ValueError, match="variance_scaling must be one of"):
        DeepEnsembleRegressor(**FAST, variance_scaling="yes").fit(X, y)


def test_saved_and_loaded_and_old_files_load_unscaled(data, fitted, tmp_path):
    X, _ = data
    scaled, _ = fitted
    scaled.save(tmp_path / "m.safetensors")
    back = DeepEnsembleRegressor.load(tmp_path / "m.safetensors")
    assert back.variance_scale_ == scaled.variance_scale_
    np.testing.assert_array_equal(back.predict_distribution(X[:20]).variances,
                                  scaled.predict_distribution(X[:20]).variances)
    tensors, settings = io.load_tensors(tmp_path / "m.safetensors", "DeepEnsembleRegressor")
    settings["fitted"].pop("variance_scale")
    settings["params"].pop("variance_scaling")
    io.save_tensors(tmp_path / "old.safetensors", tensors, "DeepEnsembleRegressor", settings)
    old = DeepEnsembleRegressor.load(tmp_path / "old.safetensors")
    assert old.variance_scale_ == 1.0 and old.variance_scaling == "none"


def test_tail_df_is_saved_and_files_without_it_load_gaussian(data, fitted, tmp_path):
    """The Student-t components survive save / load (the same log densities); a file written before
    ``tail_df`` existed held a Gaussian mixture and loads as one."""
    X, y = data
    scaled, _ = fitted
    assert scaled.tail_df == DEFAULT_TAIL_DF
    scaled.save(tmp_path / "m.safetensors")
    back = DeepEnsembleRegressor.load(tmp_path / "m.safetensors")
    assert back.tail_df == DEFAULT_TAIL_DF and isinstance(back.predict_distribution(X[:20]), StudentTMixture)
    np.testing.assert_array_equal(back.predict_distribution(X[:20]).log_prob(y[:20]),
                                  scaled.predict_distribution(X[:20]).log_prob(y[:20]))
    tensors, settings = io.load_tensors(tmp_path / "m.safetensors", "DeepEnsembleRegressor")
    settings["params"].pop("tail_df")
    io.save_tensors(tmp_path / "old.safetensors", tensors, "DeepEnsembleRegressor", settings)
    old = DeepEnsembleRegressor.load(tmp_path / "old.safetensors")
    assert old.tail_df is None and type(old.predict_distribution(X[:20])) is GaussianMixture


def test_auto_scales_from_enough_heldout_rows_only(data, fitted, tmp_path, monkeypatch):
    """``variance_scaling="auto"`` is "heldout" from `AUTO_MIN_HELDOUT_ROWS` held-out rows up (here the
    30 of 300) and "none" below, the same fit bit for bit either way (the encoding chosen alike)."""
    X, y = data
    scaled, plain = fitted
    for threshold, reference in ((30, scaled), (31, plain)):
        monkeypatch.setattr(variance_scale_module, "AUTO_MIN_HELDOUT_ROWS", threshold)
        auto = DeepEnsembleRegressor(**FAST, variance_scaling="auto").fit(X, y)
        assert auto.variance_scale_ == reference.variance_scale_
        assert auto.input_encoding_ == reference.input_encoding_
        p, q = auto.predict_distribution(X[:20]), reference.predict_distribution(X[:20])
        np.testing.assert_array_equal(p.means, q.means)
        np.testing.assert_array_equal(p.variances, q.variances)
    auto.save(tmp_path / "a.safetensors")
    back = DeepEnsembleRegressor.load(tmp_path / "a.safetensors")
    assert back.variance_scaling == "auto" and back.variance_scale_ == 1.0
