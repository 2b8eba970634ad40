import numpy as np
import pytest

from dubito.data import Dataset, n_test_rows, random_splits


def _ds(**over):
    kw = dict(
        name="t",
        X=np.arange(20.0).reshape(10, 2),
        y=np.arange(10.0),
        feature_names=["a", "b"],
        splits=[(np.arange(7), np.arange(7, 10))],
        meta={"source": "s"},
    )
    kw.update(over)
    return Dataset(**kw)


def test_split_returns_rows_and_copies():
    ds = _ds()
    Xtr, ytr, Xte, yte = ds.split(0)
    assert Xtr.shape == (7, 2) and Xte.shape == (3, 2)
    np.testing.assert_array_equal(yte, [7.0, 8.0, 9.0])
    np.testing.assert_array_equal(Xte[:, 1], [15.0, 17.0, 19.0])
    Xtr[0, 0] = -1.0
    assert ds.X[0, 0] == 0.0
    assert ds.n_splits == 1 and ds.X.dtype == np.float64 and ds.y.dtype == np.float64
    with pytest.raises(IndexError, match="1 splits"):
        ds.split(1)
    with pytest.raises(TypeError):
        ds.split(0.0)


def test_coerces_int_data_to_float64():
    ds = _ds(X=np.arange(20).reshape(10, 2), y=list(range(10)))
    assert ds.X.dtype == np.float64 and ds.y.dtype == np.float64


@pytest.mark.parametrize(
    "over, match",
    [
        (dict(y=np.arange(9.0)), "X has 10 rows but y has 9"),
        (dict(X=np.arange(10.0)), "X must be 2-D"),
        (dict(feature_names=["a"]), "1 feature names for 2 columns"),
        (dict(X=np.where(np.eye(10, 2) > 0, np.nan, 1.0)), "non-finite"),
        (dict(y=np.r_[np.arange(9.0), np.inf]), "y has non-finite"),
        (dict(splits=[(np.arange(8), np.arange(7, 10))]), "both train and test"),
        (dict(splits=[(np.arange(7), np.arange(7, 11))]), "outside"),
        (dict(splits=[(np.arange(7), np.array([], dtype=int))]), "empty"),
        (dict(splits=[(np.arange(7.0), np.arange(7, 10))]), "integers"),
        (dict(splits=[(np.array([0, 0, 1]), np.arange(7, 10))]), "repeated"),
        (dict(splits=[]), "no splits"),
        (dict(splits=[np.arange(3)]), "not a \\(train_idx, test_idx\\) pair"),
    ],
)
def test_validation_errors(over, match):
    with pytest.raises(ValueError, match=match):
        _ds(**over)


@pytest.mark.parametrize("n, frac, expected", [(308, 0.2, 62), (546, 0.2, 109), (442, 0.2, 88), (506, 0.1, 51), (10, 0.25, 3), (5, 0.1, 1)])
def test_n_test_rows_rounds_half_up(n, frac, expected):
    assert n_test_rows(n, frac) == expected


@pytest.mark.parametrize("n, frac", [(10, 0.0), (10, 1.0), (10, -0.1), (10, float("nan")), (1, 0.5), (10, 0.01)])
def test_n_test_rows_rejects(n, frac):
    with pytest.raises(ValueError):
        n_test_rows(n, frac)


def test_random_splits_reproducible_distinct_and_partition():
    a = random_splits(308, n_splits=5, test_fraction=0.2, seed=7)
    b = random_splits(308, n_splits=5, test_fraction=0.2, seed=7)
    c = random_splits(308, n_splits=5, test_fraction=0.2, seed=8)
    assert len(a) == 5
    for (tra, tea), (trb, teb), (trc, tec) in zip(a, b, c):
        np.testing.assert_array_equal(tra, trb)
        np.testing.assert_array_equal(tea, teb)
        assert not np.array_equal(tea, tec)
        assert len(tra) == 246 and len(tea) == 62
        np.testing.assert_array_equal(np.sort(np.r_[tra, tea]), np.arange(308))
    # the splits within one call differ from each other
    assert not np.array_equal(a[0][1], a[1][1])


@pytest.mark.parametrize("kw", [dict(n_splits=0), dict(n_splits=1.5), dict(seed=-1), dict(seed=None), dict(seed=1.0)])
def test_random_splits_rejects(kw):
    with pytest.raises(ValueError):
        random_splits(100, **kw)
