"""qsar / blog / msd loaders on tiny files written in the exact raw formats."""
import warnings

import numpy as np
import pytest

from dubito.data import external, load, load_blog, load_msd, load_qsar

QSAR_ROWS = """0;0;0;2.419;1.225;0.667;0;0;3.74
0;0;0;2.638;1.401;0.632;0;0;4.33
9.23;11;0;5.799;2.93;0.486;0;0;7.019
9.23;11;0;5.453;2.887;0.495;0;0;6.723
9.23;11;0;4.068;2.758;0.695;0;0;5.979
215.34;327.629;3;0.189;4.677;1.333;0;0;6.064
"""


def test_qsar_parses_raw_format(tmp_path):
    f = tmp_path / "qsar_aquatic_toxicity.csv"
    f.write_text(QSAR_ROWS)
    ds = load_qsar(f)
    assert ds.X.shape == (6, 8) and ds.feature_names == ["TPSA", "SAacc", "H050", "MLOGP", "RDCHI", "GATS1p", "nN", "C040"]
    np.testing.assert_array_equal(ds.y, [3.74, 4.33, 7.019, 6.723, 5.979, 6.064])
    np.testing.assert_array_equal(ds.X[5], [215.34, 327.629, 3, 0.189, 4.677, 1.333, 0, 0])
    assert "CC BY 4.0" in ds.meta["licence"] and "Cassotti" in ds.meta["citation"]
    assert ds.n_splits == 20


def test_qsar_full_size_gives_the_papers_437_109(tmp_path):
    rng = np.random.default_rng(0)
    f = tmp_path / "q.csv"
    np.savetxt(f, rng.normal(size=(546, 9)), delimiter=";", fmt="%.4f")
    ds = load_qsar(f)
    assert all((len(tr), len(te)) == (437, 109) for tr, te in ds.splits)


@pytest.mark.parametrize(
    "text, match",
    [
        ("TPSA;SAacc;H050;MLOGP;RDCHI;GATS1p;nN;C040;LC50\n" + QSAR_ROWS, "cannot parse"),  # a header
        ("1,2,3,4,5,6,7,8,9\n", "cannot parse"),  # wrong separator
        ("1;2;3;4;5;6;7;8\n", "8 columns, expected 9"),
        ("1;2;3;4;5;6;7;8;nan\n1;2;3;4;5;6;7;8;9\n", "non-finite"),
    ],
)
def test_qsar_rejects_malformed(tmp_path, text, match):
    f = tmp_path / "q.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_qsar(f)


def test_qsar_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file at"):
        load_qsar(tmp_path / "nope.csv")


def _blog_dir(tmp_path):
    rng = np.random.default_rng(1)
    d = tmp_path / "blog"
    d.mkdir()
    train = rng.integers(0, 50, size=(10, 281)).astype(float)
    train[:, 3] = 0.0  # constant on train ...
    train[:, 277] = 2.5
    t1 = rng.integers(0, 50, size=(3, 281)).astype(float)
    t1[:, 3] = [1.0, 2.0, 3.0]  # ... though not on test: still dropped (train decides)
    t2 = rng.integers(0, 50, size=(2, 281)).astype(float)
    fmt = "%.6f"
    np.savetxt(d / "blogData_train.csv", train, delimiter=",", fmt=fmt)
    # written out of order on purpose: files are read in name (date) order
    np.savetxt(d / "blogData_test-2012.03.31.01_00.csv", t2, delimiter=",", fmt=fmt)
    np.savetxt(d / "blogData_test-2012.02.01.00_00.csv", t1, delimiter=",", fmt=fmt)
    (d / "README.txt").write_text("not data\n")
    return d, train, t1, t2


def test_blog_parses_raw_format(tmp_path):
    d, train, t1, t2 = _blog_dir(tmp_path)
    ds = load_blog(d)
    assert ds.meta["dropped_columns"] == [3, 277]
    keep = [i for i in range(280) if i not in (3, 277)]
    assert ds.X.shape == (15, 278) and ds.feature_names == [f"x{i}" for i in keep]
    np.testing.assert_array_equal(ds.X, np.concatenate([train, t1, t2])[:, keep])
    np.testing.assert_array_equal(ds.y, np.concatenate([train[:, 280], t1[:, 280], t2[:, 280]]))
    (tr, te), = ds.splits
    np.testing.assert_array_equal(tr, np.arange(10))
    np.testing.assert_array_equal(te, np.arange(10, 15))
    assert ds.meta["test_files"] == ["blogData_test-2012.02.01.00_00.csv", "blogData_test-2012.03.31.01_00.csv"]
    assert "Buza" in ds.meta["citation"]
    full = load_blog(d, drop_constant=False)
    assert full.X.shape == (15, 280) and full.meta["dropped_columns"] == []


def test_blog_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_blog(tmp_path / "nope")
    d, *_ = _blog_dir(tmp_path)
    for f in d.glob("blogData_test-*.csv"):
        f.unlink()
    with pytest.raises(FileNotFoundError, match="blogData_test"):
        load_blog(d)
    np.savetxt(d / "blogData_test-x.csv", np.zeros((2, 280)), delimiter=",")
    with pytest.raises(ValueError, match="280 columns, expected 281"):
        load_blog(d)
    (d / "blogData_train.csv").unlink()
    with pytest.raises(FileNotFoundError, match="blogData_train.csv"):
        load_blog(d)


def _msd_file(tmp_path, n=50):
    rng = np.random.default_rng(2)
    arr = np.column_stack([rng.integers(1922, 2012, size=n), rng.normal(size=(n, 90)) * 30])
    f = tmp_path / "YearPredictionMSD.txt"
    with open(f, "w") as fh:  # year as an integer, then 90 floats, as in the UCI file
        for row in arr:
            fh.write(",".join([str(int(row[0]))] + [f"{v:.5f}" for v in row[1:]]) + "\n")
    return f, np.round(arr, 5)


def test_msd_parses_raw_format_with_explicit_test_size(tmp_path):
    f, arr = _msd_file(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_msd(f, n_test=10)
    assert ds.X.shape == (50, 90) and len(ds.feature_names) == 90
    np.testing.assert_array_equal(ds.y, arr[:, 0])
    np.testing.assert_allclose(ds.X, arr[:, 1:], rtol=0, atol=1e-9)
    (tr, te), = ds.splits
    np.testing.assert_array_equal(tr, np.arange(40))
    np.testing.assert_array_equal(te, np.arange(40, 50))
    with pytest.raises(ValueError, match="n_test"):
        load_msd(f, n_test=50)


def test_msd_partial_file_warns_and_uses_the_official_fraction(tmp_path):
    f, _ = _msd_file(tmp_path)
    with pytest.warns(UserWarning, match="not 515345"):
        ds = load_msd(f)
    assert [len(i) for i in ds.splits[0]] == [45, 5]  # round(50 * 51630/515345) = 5
    assert "not the official split" in ds.meta["splits"]


def test_msd_full_file_gets_the_official_split(tmp_path, monkeypatch):
    # a 515,345-row file is too big for a unit test; shrink the "full" size instead
    f, _ = _msd_file(tmp_path, n=50)
    monkeypatch.setattr(external, "MSD_N_ROWS", 50)
    monkeypatch.setattr(external, "MSD_N_TEST", 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load_msd(f)
    assert [len(i) for i in ds.splits[0]] == [43, 7]
    assert ds.meta["splits"].startswith("official")
    assert (external.MSD_N_ROWS, external.MSD_N_TRAIN + external.MSD_N_TEST) == (50, 463_715 + 7)


def test_msd_official_constants():
    assert external.MSD_N_TRAIN + external.MSD_N_TEST == external.MSD_N_ROWS == 515_345


def test_load_finds_files_under_dubito_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    (tmp_path / "qsar").mkdir()
    (tmp_path / "qsar" / "qsar_aquatic_toxicity.csv").write_text(QSAR_ROWS)
    assert load("qsar").X.shape == (6, 8)
    _blog_dir(tmp_path)
    assert load("blog").X.shape == (15, 278)
    (tmp_path / "msd").mkdir()
    _msd_file(tmp_path / "msd")
    assert load("msd", n_test=5).n_samples == 50
    ds = load("qsar", splits="random", n_splits=3, test_fraction=0.5, seed=1)
    assert ds.n_splits == 3 and all(len(te) == 3 for _, te in ds.splits)


@pytest.mark.parametrize("name, where", [("qsar", "qsar/qsar_aquatic_toxicity.csv"), ("blog", "blog/blogData_train.csv"), ("msd", "msd/YearPredictionMSD.txt")])
def test_load_missing_files_say_where_to_put_them(tmp_path, monkeypatch, name, where):
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        load(name)
    msg = str(info.value)
    assert str(tmp_path / where) in msg and "DUBITO_DATA" in msg and "archive.ics.uci.edu" in msg
    assert f"load_{name}(path)" in msg
    monkeypatch.delenv("DUBITO_DATA")
    with pytest.raises(FileNotFoundError, match="DUBITO_DATA is not set"):
        load(name)


def test_load_explicit_path_option(tmp_path, monkeypatch):
    monkeypatch.delenv("DUBITO_DATA", raising=False)
    f = tmp_path / "q.csv"
    f.write_text(QSAR_ROWS)
    assert load("qsar", path=f).n_samples == 6
