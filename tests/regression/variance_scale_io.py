"""Shared checks of a regressor's held-out variance scale under save and load: the fitted c comes back,
and a file written before the scale (no ``variance_scale``, no ``variance_scaling``) loads unscaled."""

import numpy as np
import pytest

from dubito import io


def check_round_trip_keeps_c(scaled, X, y, path) -> None:
    scaled.save(path)
    back = type(scaled).load(path)
    assert back.variance_scale_ == scaled.variance_scale_ and back.variance_scaling == "heldout"
    np.testing.assert_array_equal(back.predict_distribution(X[:10]).log_prob(y[:10]),
                                  scaled.predict_distribution(X[:10]).log_prob(y[:10]))


def check_an_older_file_loads_unscaled(scaled, plain, X, y, path) -> None:
    """``plain``: the same fit with ``variance_scaling="none"``; a non-positive or non-finite stored c
    is refused naming it."""
    cls = type(scaled)
    scaled.save(path)
    tensors, settings = io.load_tensors(path, cls.__name__)
    fitted = {k: v for k, v in settings["fitted"].items() if k != "variance_scale"}
    params = {k: v for k, v in settings["params"].items() if k != "variance_scaling"}
    io.save_tensors(path, tensors, cls.__name__, {**settings, "params": params, "fitted": fitted})
    old = cls.load(path)
    assert old.variance_scale_ == 1.0 and old.variance_scaling == "none"
    np.testing.assert_array_equal(old.predict_distribution(X[:10]).log_prob(y[:10]),
                                  plain.predict_distribution(X[:10]).log_prob(y[:10]))
    for bad in (0.0, float("nan")):
        io.save_tensors(path, tensors, cls.__name__, {**settings, "fitted": {**fitted, "variance_scale": bad}})
        with pytest.raises(ValueError, match="variance_scale"):
            cls.load(path)
