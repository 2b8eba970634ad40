"""Persistence: safetensors + JSON, atomic, and clear errors on bad files."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from dubito.io import (
    atomic_write_text,
    feature_names_json,
    json_params,
    json_seed,
    load_tensors,
    params_from_json,
    rebuilding,
    save_tensors,
    set_feature_names,
)


def test_round_trip(tmp_path):
    tensors = {"w": torch.randn(3, 4, dtype=torch.float64), "b": torch.arange(5)}
    settings = {"n_members": 5, "hidden": [128, 64], "lam": 1e-3}
    path = tmp_path / "m.safetensors"
    save_tensors(path, tensors, "Thing", settings)
    got, got_settings = load_tensors(path, "Thing")
    assert got_settings == settings
    assert set(got) == {"w", "b"}
    assert torch.equal(got["w"], tensors["w"]) and torch.equal(got["b"], tensors["b"])
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temp files left


def test_truncated_file(tmp_path):
    path = tmp_path / "m.safetensors"
    save_tensors(path, {"w": torch.randn(100)}, "Thing", {})
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable safetensors"):
        load_tensors(path, "Thing")


def test_garbage_file(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"\x80\x04not a model at all" * 10)
    with pytest.raises(ValueError, match="not a readable safetensors"):
        load_tensors(path, "Thing")


def test_foreign_safetensors(tmp_path):
    path = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(2)}, str(path))
    with pytest.raises(ValueError, match="not a dubito model"):
        load_tensors(path, "Thing")


def test_wrong_class_and_version(tmp_path):
    path = tmp_path / "m.safetensors"
    save_tensors(path, {"x": torch.zeros(2)}, "Other", {})
    with pytest.raises(ValueError, match="holds a Other, not a Thing"):
        load_tensors(path, "Thing")
    save_file({"x": torch.zeros(2)}, str(path), metadata={"dubito_format": "99", "dubito_class": "Thing"})
    with pytest.raises(ValueError, match="file format '99'"):
        load_tensors(path, "Thing")
    save_file({"x": torch.zeros(2)}, str(path), metadata={"dubito_format": "1", "dubito_class": "Thing", "settings": "{oops"})
    with pytest.raises(ValueError, match="corrupted settings"):
        load_tensors(path, "Thing")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model file"):
        load_tensors(tmp_path / "nope.safetensors", "Thing")


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "report.md"
    atomic_write_text(path, "old")
    import dubito.io as dio

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(dio.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_saved_files_get_the_umask_mode_not_mkstemps_0600(tmp_path):
    """Atomic writes go through mkstemp (mode 0600); the result must have the mode a plain
    open() would give, 0o666 minus the umask, like any other file the user writes."""
    import os

    from dubito.io import atomic_write_bytes, save_tensors

    mask = os.umask(0o022)
    os.umask(mask)
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    atomic_write_bytes(tmp_path / "a.bin", b"x")
    save_tensors(tmp_path / "m.safetensors", {"w": torch.zeros(2)}, "Thing", {"params": {}})
    for name in ("a.bin", "m.safetensors"):
        assert (tmp_path / name).stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o666 & ~mask


# ------------------------------------------------------------------ estimator settings as JSON
class _Est:
    """A stand-in with sklearn's get_params."""

    def __init__(self, **params):
        self.params = params

    def get_params(self, deep=False):
        return dict(self.params)


def test_json_params_makes_every_value_json_and_round_trips(tmp_path):
    est = _Est(hidden=(np.int64(50), 20), lr=np.float32(0.5), flag=np.bool_(True), random_state=np.int64(7),
               device=torch.device("cpu"), checkpoint_dir=Path(tmp_path), image_shape=None, box=np.array([[0, 1]]))
    out = json_params(est)
    assert json.loads(json.dumps(out)) == out  # all JSON values
    assert out == {"hidden": [50, 20], "lr": 0.5, "flag": True, "random_state": 7, "device": "cpu",
                   "checkpoint_dir": str(tmp_path), "image_shape": None, "box": [[0, 1]]}
    assert type(out["hidden"][0]) is int and type(out["flag"]) is bool
    back = params_from_json(out, device="cuda")
    assert back["hidden"] == (50, 20) and back["image_shape"] is None and back["device"] == "cuda"
    assert params_from_json({"hidden": 50})["hidden"] == 50  # an int width stays an int


def test_json_params_drops_a_generator_seed_and_takes_overrides():
    assert json_params(_Est(random_state=np.random.RandomState(0)))["random_state"] is None
    assert json_seed(True) is None and json_seed(3) == 3
    assert json_params(_Est(network=object(), a=1), network=None) == {"network": None, "a": 1}


def test_feature_names_round_trip():
    est, bare = _Est(), _Est()
    est.feature_names_in_ = np.asarray(["a", "b"], dtype=object)
    names = feature_names_json(est)
    assert names == ["a", "b"] and feature_names_json(bare) is None
    set_feature_names(bare, names)
    assert list(bare.feature_names_in_) == ["a", "b"]
    set_feature_names(est, None)  # leaves what is there
    assert list(est.feature_names_in_) == ["a", "b"]


def test_rebuilding_turns_a_missing_key_into_one_clear_error():
    with pytest.raises(ValueError, match=r"m\.safetensors is a Thing file with inconsistent contents.*'fitted'"):
        with rebuilding("m.safetensors", "Thing"):
            {}["fitted"]
    with pytest.raises(ValueError, match="bad on purpose"):  # not in errors: passes through unchanged
        with rebuilding("m.safetensors", "Thing"):
            raise ValueError("bad on purpose")


def _rewrite(path, metadata_change=None, tensors=None):
    """Rewrite a saved file with edited metadata or tensors, keeping its recorded SHA-256."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        metadata = dict(fh.metadata())
        stored = {k: fh.get_tensor(k) for k in fh.keys()}
    if metadata_change:
        metadata.update(metadata_change(metadata))
    save_file(tensors if tensors is not None else stored, str(path), metadata=metadata)


def test_a_changed_value_or_byte_is_refused_by_the_files_sha256(tmp_path):
    # issue 22: edited fitted values (y_scale = -1, a string y_mean) and flipped bytes loaded silently
    path = tmp_path / "m.safetensors"
    settings = {"fitted": {"y_scale": 2.0, "y_mean": 0.5}}
    tensors = {"w": torch.randn(4, 3, dtype=torch.float64)}
    for change in (
        lambda m: {"settings": m["settings"].replace("2.0", "-1.0")},
        lambda m: {"settings": m["settings"].replace("0.5", '"1e3"')},
        lambda m: {"dubito_class": "Thing", "settings": m["settings"] + " "},
    ):
        save_tensors(path, tensors, "Thing", settings)
        _rewrite(path, metadata_change=change)
        with pytest.raises(ValueError, match="is not what was saved"):
            load_tensors(path, "Thing")
    save_tensors(path, tensors, "Thing", settings)
    edited = {"w": tensors["w"].clone()}
    edited["w"][1, 2] = float("nan")
    _rewrite(path, tensors=edited)
    with pytest.raises(ValueError, match="is not what was saved"):
        load_tensors(path, "Thing")
    save_tensors(path, tensors, "Thing", settings)  # untouched: loads
    assert load_tensors(path, "Thing")[1] == settings


def test_a_file_without_a_digest_still_loads_and_nested_json_is_one_clear_error(tmp_path):
    from dubito.io import FORMAT_VERSION, content_digest

    path = tmp_path / "old.safetensors"
    meta = {"dubito_format": FORMAT_VERSION, "dubito_class": "Thing", "settings": json.dumps({"a": 1})}
    save_file({"w": torch.zeros(2)}, str(path), metadata=meta)  # as dubito wrote files before the digest
    with pytest.warns(UserWarning, match="carries no SHA-256 .* it loads, but nothing can check"):
        assert load_tensors(path, "Thing")[1] == {"a": 1}
    deep = dict(meta, settings="[" * 100_000 + "]" * 100_000)
    deep["sha256"] = content_digest({"w": torch.zeros(2)}, deep)
    save_file({"w": torch.zeros(2)}, str(path), metadata=deep)
    with pytest.raises(ValueError, match="corrupted settings metadata: RecursionError"):
        load_tensors(path, "Thing")


def test_rebuilding_turns_an_exhausted_memory_into_one_clear_error(tmp_path):
    # issue 22, part 3: n_classes = 10**9 in a file ended in a bare MemoryError
    from dubito.io import rebuilding

    with pytest.raises(ValueError, match="needs more than this machine has \\(MemoryError\\)"):
        with rebuilding(tmp_path / "m.safetensors", "Thing"):
            raise MemoryError()
