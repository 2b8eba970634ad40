"""Validated fitting of the network regressors: held-out rows, early stopping on their NLL, the
best epoch's weights kept (dubito.early_stopping)."""

import copy

import numpy as np
import pytest
import torch

from dubito import data, metrics
from dubito._estimator import seed_base, seeds_from
from dubito.early_stopping import holdout_split
from dubito.nn.batched import gaussian_nll
from dubito.nn.mdn import mixture_nll
from dubito.regression import (
    DeepEnsembleRegressor,
    DeepNoiseSGDRegressor,
    DeterministicRegressor,
    MCDropoutRegressor,
    MixtureDensityRegressor,
)

# lr 0.03 on 300 rows overfits within a few dozen epochs, so the rule (patience 5) stops well before the cap
COMMON = dict(hidden=(32,), lr=3e-2, batch_size=16, epochs=200, patience=5, progress=False, random_state=3)
ESTIMATORS = {
    "ensemble": lambda **kw: DeepEnsembleRegressor(n_members=3, **{**COMMON, **kw}),
    "deterministic": lambda **kw: DeterministicRegressor(**{**COMMON, **kw}),
    "mc-dropout": lambda **kw: MCDropoutRegressor(dropout=0.1, n_samples=20, **{**COMMON, **kw}),
    "mdn": lambda **kw: MixtureDensityRegressor(n_components=3, **{**COMMON, **kw}),
    "deepnoise-sgd": lambda **kw: DeepNoiseSGDRegressor(n_noise_samples=8, **{**COMMON, **kw}),
}


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(300, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + (0.2 + 0.2 * np.abs(X[:, 0])) * rng.normal(size=300)
    return X, y


def _held_out_rows(est, n):
    """The rows the estimator held out, drawn again from its seed (the documented streams)."""
    if isinstance(est, DeepEnsembleRegressor):
        seed = seed_base(est.random_state)
    elif isinstance(est, DeepNoiseSGDRegressor):
        seed = seeds_from(est.random_state, 4)[3]
    else:
        seed = seeds_from(est.random_state, 5)[4]
    return holdout_split(n, est.validation_fraction, seed)[1]


@torch.no_grad()
def _held_out_loss(est, X, y):
    """The criterion recomputed on the fitted (float64) network: per member for the ensemble."""
    ensemble = isinstance(est, DeepEnsembleRegressor)
    Xs = torch.as_tensor(est._standardise(X) if ensemble else (X - est.x_mean_) / est.x_scale_)  # encoded inputs
    ys = torch.as_tensor((y - est.y_mean_) / est.y_scale_)
    if ensemble:
        mean, var, _ = est.net_(Xs)
        return gaussian_nll(mean, var, ys).numpy()
    if isinstance(est, MixtureDensityRegressor):
        return np.array([float(mixture_nll(*est.net_(Xs), ys))])
    if isinstance(est, DeepNoiseSGDRegressor):  # the MC loss: float32 and the epoch's fixed noise, as in training
        g = torch.Generator().manual_seed(seeds_from(est.random_state, 4)[3])
        net = copy.deepcopy(est.net_).float()
        return np.array([float(net.mixture_nll(Xs.float(), ys.float(), est.n_noise_samples, g))])
    return np.array([float(((est.net_(Xs)[:, 0] - ys) ** 2).mean())])


@pytest.mark.parametrize("name", ESTIMATORS)
def test_the_best_epoch_is_kept_and_training_stops_by_the_rule(Xy, name):
    """The fitted network scores its held-out rows at the minimum of validation_curve_ (float32
    training vs float64 recomputation: 1e-4 relative), best_epoch_ is that argmin + 1, and the
    rule stopped training exactly ``patience`` epochs after the last member's best epoch."""
    X, y = Xy
    # the ensemble's plateau drop restarts the rule at the drop (tests/regression/test_ensemble_plateau.py):
    # this is the rule alone
    est = ESTIMATORS[name](**({"lr_drop": "none"} if name == "ensemble" else {})).fit(X, y)
    curve = est.validation_curve_.reshape(len(est.validation_curve_), -1)  # (epochs run, units)
    best = np.atleast_1d(est.best_epoch_)
    assert est.stopped_by_ == "patience"
    assert curve.shape[0] == best.max() + est.patience < est.epochs
    assert est.loss_curve_.shape[0] == curve.shape[0]
    np.testing.assert_array_equal(best, curve.argmin(axis=0) + 1)
    rows = _held_out_rows(est, len(y))
    assert rows.size == 30 and est.n_train_ == 270
    np.testing.assert_allclose(_held_out_loss(est, X[rows], y[rows]), curve.min(axis=0), rtol=1e-4)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_the_cap_is_reported_and_no_held_out_share_trains_on_every_row(Xy, name):
    X, y = Xy
    capped = ESTIMATORS[name](epochs=3, patience=50).fit(X, y)
    assert capped.stopped_by_ == "cap" and capped.validation_curve_.shape[0] == 3
    full = ESTIMATORS[name](epochs=3, validation_fraction=0.0).fit(X, y)
    assert full.stopped_by_ == "cap" and full.n_train_ == 300 and full.validation_curve_.shape[0] == 0
    assert np.all(np.atleast_1d(full.best_epoch_) == 3)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_validated_fit_survives_save_and_load(Xy, name, tmp_path):
    X, y = Xy
    est = ESTIMATORS[name](epochs=12).fit(X, y)
    est.save(tmp_path / "m.safetensors")
    back = type(est).load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.validation_curve_, est.validation_curve_)
    np.testing.assert_array_equal(back.best_epoch_, est.best_epoch_)
    assert back.stopped_by_ == est.stopped_by_
    np.testing.assert_array_equal(back.predict(X[:5]), est.predict(X[:5]))


@pytest.mark.parametrize("name", ["ensemble", "deterministic", "mc-dropout", "mdn"])
def test_auto_budget_counts_steps_and_survives_save_and_load(Xy, name, tmp_path):
    """patience / epochs "auto": 270 of 300 rows at batch 16 make 17 steps an epoch, so patience
    max(20, ceil(1000 / 17)) = 59 and cap max(500, ceil(20000 / 17)) = 1177 epochs; the file keeps
    what the fit used. Integers pass through (the other estimators' defaults)."""
    X, y = Xy
    est = ESTIMATORS[name](patience="auto", epochs="auto").fit(X, y)
    assert (est.n_train_, est.patience_, est.epochs_) == (270, 59, 1177)
    assert est.stopped_by_ == "patience" and len(est.loss_curve_) <= 1177
    est.save(tmp_path / "m.safetensors")
    back = type(est).load(tmp_path / "m.safetensors")
    assert (back.patience_, back.epochs_) == (59, 1177)
    fixed = ESTIMATORS[name](epochs=7).fit(X, y)
    assert (fixed.patience_, fixed.epochs_) == (5, 7)


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("kw, match", [
    (dict(validation_fraction=0.5), r"validation_fraction must lie in \[0, 0.5\)"),
    (dict(validation_fraction=-0.1), "validation_fraction"),
    (dict(batch_size=280), r"leaves 270 to train on, fewer than batch_size=280"),
    (dict(patience=0), "patience"),
])
def test_bad_validation_settings_are_refused(Xy, name, kw, match):
    if name == "deepnoise-sgd" and "batch_size" in kw:
        pytest.skip("DeepNoise-SGD caps its batch at the rows trained on (its default batch, [C]'s 1000, "
                    "exceeds most data sets), so no batch is too large")
    with pytest.raises(ValueError, match=match):
        ESTIMATORS[name](**kw).fit(*Xy)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_constant_y_on_the_training_rows_is_refused(name):
    """y with two distinct values whose rarer one is held out: the training rows' y is constant."""
    from dubito.early_stopping import holdout_split

    est = ESTIMATORS[name](batch_size=4)
    seed = seed_base(est.random_state) if name == "ensemble" else seeds_from(est.random_state, 5)[4]
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.zeros(20)
    if name == "deepnoise-sgd":
        seed = seeds_from(est.random_state, 4)[3]
    y[holdout_split(20, est.validation_fraction, seed)[1]] = 1.0
    with pytest.raises(ValueError, match="1 distinct y value.*non-constant y"):
        est.fit(X, y)


def test_ensemble_members_stop_on_their_own_and_nested_members_agree(Xy):
    """Member l's held-out rows, order and stopping depend only on (seed, l): the first 2 members
    of a 3-member validated ensemble are a 2-member one: the same best epochs, and the same
    predictions up to float32 training arithmetic (batched matrix products over 2 or 3 members
    round differently: measured 2.5e-6 relative; tolerance 1e-4). At a constant rate: the default
    plateau drop waits for every member, so it ties them together; at a fixed input encoding: "auto"
    may choose another for 2 members than for 3."""
    X, y = Xy
    three = ESTIMATORS["ensemble"](lr_drop="none", input_encoding="none").fit(X, y)
    two = DeepEnsembleRegressor(n_members=2, lr_drop="none", input_encoding="none", **COMMON).fit(X, y)
    np.testing.assert_array_equal(three.best_epoch_[:2], two.best_epoch_)
    np.testing.assert_allclose(three.predict_components(X[:4], n_members=2).means,
                               two.predict_components(X[:4]).means, rtol=1e-4)
    assert len(set(three.best_epoch_.tolist())) > 1  # the members stopped at different epochs


def test_ensemble_resume_with_early_stopping_gives_the_uninterrupted_fit(Xy, tmp_path, monkeypatch):
    """An interrupted validated fit resumes to the same weights, curves and best epochs."""
    from dubito.regression import ensemble_training as ensemble

    X, y = Xy
    kw = dict(checkpoint_dir=tmp_path, checkpoint_every=2)
    full = ESTIMATORS["ensemble"]().fit(X, y)
    real, calls = ensemble.member_permutations, {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 7:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(ensemble, "member_permutations", flaky)
        with pytest.raises(KeyboardInterrupt):
            ESTIMATORS["ensemble"](**kw).fit(X, y)
    resumed = ESTIMATORS["ensemble"](**kw).fit(X, y, resume=True)
    np.testing.assert_array_equal(resumed.validation_curve_, full.validation_curve_)
    np.testing.assert_array_equal(resumed.best_epoch_, full.best_epoch_)
    for p, q in zip(resumed.net_.state_dict().values(), full.net_.state_dict().values()):
        assert torch.equal(p, q)


def test_readme_example_is_calibrated_on_diabetes():
    """The README's example, DeepEnsembleRegressor(random_state=0) with its defaults, covers
    0.90-0.98 at 95 % on average over diabetes splits 0-9 and at least 0.85 on each (issue 19's
    target). Measured with today's defaults: 0.92-1.00, mean 0.978 ("auto" kept the raw inputs on
    all ten; benchmarks/ensemble_encoding.py --diabetes, docs/results/ensemble-encoding.md); the
    paper's protocol (60 epochs on every row) gave 0.64-0.84, mean 0.756."""
    ds = data.load("diabetes")
    cover = []
    for split in range(10):
        X, y, X_test, y_test = ds.split(split)
        pred = DeepEnsembleRegressor(random_state=0, progress=False).fit(X, y).predict_distribution(X_test)
        cover.append(metrics.coverage(pred, y_test, 0.95))
    assert 0.90 <= np.mean(cover) <= 0.98, cover
    assert min(cover) >= 0.85, cover
