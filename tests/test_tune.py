"""dubito.tune: held-out NLL selection with Optuna, resumable from SQLite, one error per bad input."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from dubito.predictive.normal import Normal
from dubito.regression import (
    DeepEnsembleRegressor,
    DeterministicRegressor,
    MCDropoutRegressor,
    MixtureDensityRegressor,
)
from dubito.search_space import Choice, Float, Int, check_space
from dubito.tune import tune


class ScaleRegressor(RegressorMixin, BaseEstimator):
    """Predicts N(mean(y_train) + shift, scale^2) everywhere: its held-out NLL is a known
    function of (shift, scale), minimised near shift = 0, scale = sd(y)."""

    search_space = {"scale": Float(0.25, 16.0, log=True), "shift": Float(-3.0, 3.0)}
    fits = []  # (n rows, params) of every fit, to check what tune fitted
    fail_above = None  # scale above which fit raises (a diverging trial)
    interrupt_at = None  # fit number that raises KeyboardInterrupt (a killed process)

    def __init__(self, scale=1.0, shift=0.0, random_state=None):
        self.scale = scale
        self.shift = shift
        self.random_state = random_state

    def fit(self, X, y):
        type(self).fits.append((len(y), self.scale, self.shift))
        if type(self).interrupt_at is not None and len(type(self).fits) == type(self).interrupt_at:
            raise KeyboardInterrupt
        if type(self).fail_above is not None and self.scale > type(self).fail_above:
            raise ValueError("diverged")
        self.center_ = float(np.mean(y))
        return self

    def predict_distribution(self, X):
        n = len(X)
        return Normal(np.full(n, self.center_ + self.shift), np.full(n, self.scale**2))


@pytest.fixture(autouse=True)
def _reset():
    ScaleRegressor.fits, ScaleRegressor.fail_above, ScaleRegressor.interrupt_at = [], None, None
    yield


@pytest.fixture(scope="module")
def Xy():
    rng = np.random.default_rng(0)
    return rng.normal(size=(500, 2)), 2.0 * rng.normal(size=500) + 5.0


def test_tune_finds_the_nll_minimiser_and_refits_on_every_row(Xy):
    """The Gaussian NLL of the 100 tuning rows is minimised at shift = mean(y_tune) -
    mean(y_fit), scale = the rms deviation from that (the closed-form MLE); 30 TPE trials over
    a 64-fold scale range get within 15 % of the MLE scale and 0.4 of its shift (measured:
    3 % and 0.1), and the chosen model is refitted on all 500 rows."""
    from dubito.early_stopping import holdout_split

    X, y = Xy
    result = tune(ScaleRegressor(), X, y, n_trials=30, progress=False)
    fit_rows, tune_rows = holdout_split(500, 0.2, 0)
    shift = y[tune_rows].mean() - y[fit_rows].mean()
    scale = np.sqrt(np.mean((y[tune_rows] - y[tune_rows].mean()) ** 2))
    assert result.best_params["scale"] == pytest.approx(scale, rel=0.15)
    assert result.best_params["shift"] == pytest.approx(shift, abs=0.4)
    assert result.best_score == min(t["nll"] for t in result.trials)
    assert len(result.trials) == 30 and ScaleRegressor.fits[:30] == [(400, t["params"]["scale"], t["params"]["shift"])
                                                                     for t in result.trials]
    assert ScaleRegressor.fits[-1] == (500, result.best_params["scale"], result.best_params["shift"])
    assert result.estimator.center_ == pytest.approx(y.mean())


def test_same_seed_same_study_other_seed_other_study(Xy):
    a = tune(ScaleRegressor(), *Xy, n_trials=12, progress=False)
    b = tune(ScaleRegressor(), *Xy, n_trials=12, progress=False)
    c = tune(ScaleRegressor(), *Xy, n_trials=12, progress=False, random_state=1)
    assert [t["params"] for t in a.trials] == [t["params"] for t in b.trials]
    assert [t["params"] for t in a.trials] != [t["params"] for t in c.trials]


def test_an_interrupted_tune_resumes_from_its_storage_to_the_same_choice(Xy, tmp_path):
    """Killed during trial 7 of 14 (left RUNNING in SQLite), a second call with the same storage
    marks it failed, runs the 7 trials still missing and ends with the uninterrupted study's
    trials and choice."""
    full = tune(ScaleRegressor(), *Xy, n_trials=14, progress=False, storage=tmp_path / "a.db")
    ScaleRegressor.fits, ScaleRegressor.interrupt_at = [], 8
    with pytest.raises(KeyboardInterrupt):
        tune(ScaleRegressor(), *Xy, n_trials=14, progress=False, storage=tmp_path / "b.db")
    ScaleRegressor.interrupt_at = None
    resumed = tune(ScaleRegressor(), *Xy, n_trials=14, progress=False, storage=tmp_path / "b.db")
    complete = [t for t in resumed.trials if t["state"] == "COMPLETE"]
    assert [t["state"] for t in resumed.trials].count("FAIL") == 1  # the interrupted trial
    assert [t["params"] for t in complete] == [t["params"] for t in full.trials]
    assert resumed.best_params == full.best_params and resumed.best_score == full.best_score
    again = tune(ScaleRegressor(), *Xy, n_trials=14, progress=False, storage=tmp_path / "b.db")
    assert again.best_params == full.best_params and len(again.trials) == 15  # nothing re-run


def test_a_stored_study_of_other_settings_is_refused(Xy, tmp_path):
    tune(ScaleRegressor(), *Xy, n_trials=2, progress=False, storage=tmp_path / "s.db")
    with pytest.raises(ValueError, match="other settings and cannot be resumed.*space"):
        tune(ScaleRegressor(), *Xy, n_trials=2, progress=False, storage=tmp_path / "s.db",
             space={"scale": Float(0.5, 4.0)})
    X, y = Xy
    with pytest.raises(ValueError, match="other settings and cannot be resumed.*data"):
        tune(ScaleRegressor(), X, y + 1, n_trials=2, progress=False, storage=tmp_path / "s.db")


def test_failed_trials_are_recorded_not_raised(Xy):
    ScaleRegressor.fail_above = 2.0
    result = tune(ScaleRegressor(), *Xy, n_trials=10, progress=False)
    failed = [t for t in result.trials if t["state"] == "FAIL"]
    assert failed and all(t["error"] == "ValueError: diverged" and t["params"]["scale"] > 2.0 for t in failed)
    assert result.best_params["scale"] <= 2.0
    ScaleRegressor.fail_above = 0.0
    with pytest.raises(ValueError, match="every trial of .* failed: \\['ValueError: diverged'\\]"):
        tune(ScaleRegressor(), *Xy, n_trials=3, progress=False)


@pytest.mark.parametrize("kw, match", [
    (dict(space={"width": Float(1, 2)}), r"unknown parameter\(s\) \['width'\] of ScaleRegressor"),
    (dict(space={"scale": (1, 2)}), r"\['scale'\] must be Float, Int or Choice"),
    (dict(space={}), "non-empty dict"),
    (dict(tuning_fraction=0.5), r"tuning_fraction must lie in \(0, 0.5\)"),
    (dict(n_trials=0), "n_trials"),
])
def test_bad_tune_arguments(Xy, kw, match):
    with pytest.raises(ValueError, match=match):
        tune(ScaleRegressor(), *Xy, progress=False, **kw)


def test_an_estimator_without_a_space_is_refused(Xy):
    class Plain(ScaleRegressor):
        search_space = None

    with pytest.raises(ValueError, match="Plain declares no search_space"):
        tune(Plain(), *Xy, progress=False)


def test_space_kinds_check_their_ranges():
    with pytest.raises(ValueError, match="low < high"):
        Float(1.0, 1.0)
    with pytest.raises(ValueError, match="low > 0"):
        Float(0.0, 1.0, log=True)
    with pytest.raises(ValueError, match="integers low < high"):
        Int(3, 2)
    with pytest.raises(ValueError, match="at least 2 options"):
        Choice([(50,)])
    c = Choice([(50,), (100, 50)])
    assert c.value(Choice.label((100, 50))) == (100, 50)


@pytest.mark.parametrize("cls, names", [
    (DeepEnsembleRegressor, {"lr", "prior_precision", "input_encoding"}),  # about its defaults (session 27)
    (DeterministicRegressor, {"lr", "weight_decay", "hidden"}),
    (MCDropoutRegressor, {"lr", "weight_decay", "hidden"}),
    (MixtureDensityRegressor, {"lr", "weight_decay", "hidden"}),
])
def test_declared_spaces_name_real_parameters(cls, names):
    space = check_space(cls(), None)
    assert names <= set(space)


def test_tune_a_real_estimator_end_to_end(Xy):
    X, y = Xy
    y = np.sin(X[:, 0]) + 0.1 * np.random.default_rng(1).normal(size=len(y))
    est = DeterministicRegressor(epochs=5, batch_size=64, progress=False)
    result = tune(est, X, y, n_trials=3, progress=False, space={"lr": Float(1e-3, 3e-2, log=True),
                                                                 "hidden": Choice([(8,), (16,)])})
    assert result.estimator.n_train_ == 450  # refitted on all 500 rows, 10 % held out to stop early
    assert result.best_params["hidden"] in ((8,), (16,))
    assert result.estimator.random_state == 0  # a None seed is fixed by tune's random_state
