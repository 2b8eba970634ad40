import numpy as np
import pytest

from dubito.data import Dataset, available, load
from dubito.data.synthetic import toy1, toy1_function, toy2, toy2_function

EXPECTED = {"diabetes", "toy1", "toy2", "qsar", "blog", "msd",
            "boston", "concrete", "energy", "kin8nm", "naval", "power", "protein", "wine", "yacht", "driving",
            "ood-wave", "fashion-mnist", "mnist-digits", "letters"}


def test_available():
    names = available()
    assert set(names) == EXPECTED and names == sorted(names)


def test_unknown_name_lists_available():
    with pytest.raises(ValueError, match="unknown dataset 'mnist'; available: blog, boston") as info:
        load("mnist")
    for n in EXPECTED:
        assert n in str(info.value)
    with pytest.raises(TypeError):
        load(3)


def test_unknown_option_and_bad_splits():
    with pytest.raises(TypeError, match="n_train, n_test, noise_sd"):
        load("toy1", n=5)
    with pytest.raises(ValueError, match="'standard', 'random'"):
        load("toy1", splits="kfold")
    with pytest.raises(ValueError, match="test_fraction"):
        load("toy1", splits="random", test_fraction=1.5)


def test_diabetes_standard_splits_fixed_and_documented():
    ds = load("diabetes")
    assert isinstance(ds, Dataset) and ds.X.shape == (442, 10) and ds.n_splits == 20
    assert ds.feature_names[:3] == ["age", "sex", "bmi"]
    assert all((len(tr), len(te)) == (354, 88) for tr, te in ds.splits)
    again = load("diabetes", seed=99)  # "standard" splits do not depend on seed
    for (a, b), (c, d) in zip(ds.splits, again.splits):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    assert "20 seeded" in ds.meta["splits"] and ds.meta["licence"] and ds.meta["citation"]
    raw = load("diabetes", scaled=False)
    assert raw.X[:, 0].max() > 50  # age in years
    r1 = load("diabetes", splits="random", n_splits=3, test_fraction=0.2, seed=1)
    r2 = load("diabetes", splits="random", n_splits=3, test_fraction=0.2, seed=2)
    assert r1.n_splits == 3 and not np.array_equal(r1.splits[0][1], r2.splits[0][1])


@pytest.mark.parametrize("name, gen, fn, sd, n_train, p", [("toy1", toy1, toy1_function, 10.0, 200, 1), ("toy2", toy2, toy2_function, 0.2, 600, 2)])
def test_toy_load_train_then_test(name, gen, fn, sd, n_train, p):
    ds = load(name, seed=3)
    assert ds.n_splits == 1 and ds.X.shape == (n_train + 1000, p)
    (tr, te), = ds.splits
    np.testing.assert_array_equal(tr, np.arange(n_train))
    np.testing.assert_array_equal(te, np.arange(n_train, n_train + 1000))
    X, y, eta = gen(n_train, 3)  # the train part is exactly the generator's draw
    np.testing.assert_array_equal(ds.X[tr], X)
    np.testing.assert_array_equal(ds.y[tr], y)
    np.testing.assert_array_equal(ds.meta["eta"], fn(ds.X))
    assert ds.meta["noise_sd"] == sd and ds.meta["true_function"] == f"dubito.data.synthetic.{name}_function"
    r = ds.y[te] - ds.meta["eta"][te]
    assert abs(r.std() / sd - 1) < 4 / np.sqrt(2 * 1000)  # 1000 test draws, 4 se
    assert ds.X[te].min() >= -1 and ds.X[te].max() <= 1
    # test points are a fresh draw, not a copy of the train points
    assert np.intersect1d(ds.X[te][:, 0], ds.X[tr][:, 0]).size == 0
    other = load(name, seed=4)
    assert not np.array_equal(other.X, ds.X)
    np.testing.assert_array_equal(load(name, seed=3).X, ds.X)


def test_toy_options():
    ds = load("toy1", n_train=50, n_test=20, noise_sd=0.0, seed=0)
    assert ds.X.shape == (70, 1)
    np.testing.assert_array_equal(ds.y, ds.meta["eta"])
    with pytest.raises(ValueError, match="n_test"):
        load("toy1", n_test=0)


def test_explicit_splits():
    ds = load("toy1", n_train=8, n_test=2, splits=[(np.arange(5), np.arange(5, 10)), ([0, 1], [2])])
    assert ds.n_splits == 2 and ds.meta["splits"].startswith("user-supplied")
    with pytest.raises(ValueError, match="both train and test"):
        load("toy1", n_train=8, n_test=2, splits=[(np.arange(6), np.arange(5, 10))])
