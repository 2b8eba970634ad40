"""calibration_split: a seeded partition of the training rows, with clear errors."""

import numpy as np
import pytest

from dubito.recalibrate import calibration_split


def test_a_seeded_partition():
    fit, cal = calibration_split(101, 0.2, seed=3)
    assert cal.size == 20 and np.array_equal(np.union1d(fit, cal), np.arange(101))
    assert np.intersect1d(fit, cal).size == 0
    assert np.array_equal(calibration_split(101, 0.2, seed=3)[1], cal)
    assert not np.array_equal(calibration_split(101, 0.2, seed=4)[1], cal)
    assert calibration_split(2, 0.01)[1].size == 1 and calibration_split(2, 0.99)[0].size == 1


@pytest.mark.parametrize("n, fraction, match", [(10, 0.0, "strictly between 0 and 1"), (10, 1.0, "strictly between"),
                                                (1, 0.5, "at least 2 rows")])
def test_bad_input(n, fraction, match):
    with pytest.raises(ValueError, match=match):
        calibration_split(n, fraction)
