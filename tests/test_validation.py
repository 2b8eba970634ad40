"""Hyper-parameter checks shared by every estimator: one clear ValueError per problem."""
import numpy as np
import pytest

from dubito._validation import check_bool, check_widths


@pytest.mark.parametrize("value, expected", [(50, (50,)), (np.int64(8), (8,)), ((100, 50), (100, 50)),
                                             ([3, np.int32(2)], (3, 2)), ((), ())])
def test_check_widths_accepts_an_int_or_a_sequence(value, expected):
    got = check_widths(value)
    assert got == expected and all(type(w) is int for w in got)


@pytest.mark.parametrize("value, match", [((8, 0), "hidden widths must be >= 1"),
                                          ("abc", "hidden widths must be an integer"),
                                          (True, "hidden must be a tuple of positive ints"),
                                          (None, "hidden must be a tuple of positive ints"),
                                          ((4, 2.5), "hidden widths must be an integer")])
def test_check_widths_names_the_problem(value, match):
    with pytest.raises(ValueError, match=match):
        check_widths(value)


def test_check_widths_uses_the_given_name():
    with pytest.raises(ValueError, match="generator_hidden widths must be >= 1"):
        check_widths((20, -1), "generator_hidden")


def test_check_bool():
    assert check_bool(np.bool_(True), "progress") is True and check_bool(False, "progress") is False
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="progress must be True or False"):
            check_bool(bad, "progress")


def test_a_negative_random_state_is_refused_by_name():
    # issue 22, part 8: numpy's "expected non-negative integer" named no parameter; MFVI accepted it
    from dubito.regression import DeterministicRegressor, MeanFieldVIRegressor

    X, y = np.random.default_rng(0).normal(size=(30, 2)), np.arange(30.0)
    for est in (DeterministicRegressor(random_state=-1, epochs=1, progress=False),
                MeanFieldVIRegressor(random_state=-1, epochs=1, progress=False)):
        with pytest.raises(ValueError, match="random_state must be None, a non-negative int or a numpy RandomState, got -1"):
            est.fit(X, y)


@pytest.mark.parametrize("dropout", ["concrete", "multidrop"])
def test_a_learned_dropout_rate_cannot_start_at_zero(dropout):
    # issue 22, part 8: p=0 trained a NaN network and failed at predict without naming p
    from dubito.classification import MCDropoutClassifier

    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match=f"p=0 with dropout='{dropout}'.*needs 0 < p < 1"):
        MCDropoutClassifier(dropout=dropout, p=0.0, epochs=1, progress=False).fit(X, (X[:, 0] > 0).astype(int))
