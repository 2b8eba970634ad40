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
