"""Persistence without pickle: safetensors for tensors, JSON for settings, written atomically.

One model = one ``.safetensors`` file. Its string metadata holds ``dubito_format`` (the file
format version), ``dubito_class`` (the estimator class name), ``settings`` (a JSON document of
constructor settings and fitted scalars) and ``sha256`` (`content_digest` of the other three and
every tensor). Loading checks all four and reports a corrupted, truncated, edited or foreign file
with one clear ``ValueError`` (files written before the digest existed load, with a UserWarning
that they cannot be verified).

The estimators' ``save``/``load`` share the JSON side here: `json_params` (constructor settings
as JSON), `params_from_json` (their inverse), `feature_names_json` / `set_feature_names` and
`rebuilding` (one ``ValueError`` for a file whose contents do not fit together).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

FORMAT_VERSION = "1"

__all__ = [
    "FORMAT_VERSION",
    "atomic_write_bytes",
    "atomic_write_text",
    "feature_names_json",
    "json_params",
    "json_seed",
    "json_value",
    "load_tensors",
    "params_from_json",
    "rebuilding",
    "save_tensors",
    "set_feature_names",
]


def _umask_mode() -> int:
    """0o666 minus the process umask: the mode ``open(path, "w")`` would give a new file
    (``tempfile.mkstemp`` creates 0o600, which would make every saved file private). Read once,
    at import: reading the umask means setting it, which is not thread-safe."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_FILE_MODE = _umask_mode()


def _atomic_replace(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def check_output_folder(path, option: str = "--out") -> Path:
    """Create the folder ``path`` (with its parents) and check that a file can be written in it,
    before any long work: one ValueError naming ``option`` when ``path`` is an existing file, or
    cannot be created or written (read-only, no permission). Returns ``Path(path)``."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is an existing file; give a folder (it is created if absent)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".dubito-write-check-"):
            pass
    except OSError as exc:
        raise ValueError(f"cannot write to the {option} folder {path}: {exc.strerror or exc}") from None
    return path


def check_store_path(path, option: str = "--store") -> Path:
    """Check, before any work, that the SQLite store ``path`` can be created or opened for writing:
    one ValueError naming ``option`` for a folder, a missing parent folder or one that cannot be
    written."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give the store's file name (e.g. results.sqlite)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: its folder {parent} does not exist")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise ValueError(f"{option} {path} is read-only")
    else:
        check_output_folder(parent, f"{option}'s")
    return path


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    _atomic_replace(Path(path), lambda fh: fh.write(data))


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def content_digest(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> str:
    """SHA-256 (hex) of a model file's content: its metadata (all but the digest itself, as sorted
    JSON), then every tensor by sorted name with its dtype, shape and raw bytes (CPU tensors)."""
    h = hashlib.sha256(json.dumps({k: v for k, v in metadata.items() if k != "sha256"}, sort_keys=True).encode())
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu")
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        if t.numel():  # a fresh 1-D buffer has stride 1 (a size-1 view may not), as a byte view needs
            flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))
            h.update(flat.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_tensors(path, tensors: dict[str, torch.Tensor], cls_name: str, settings: dict) -> None:
    """Atomically write tensors (safetensors) with the class name, JSON settings and the SHA-256 of
    all of it (`content_digest`) as metadata."""
    path = Path(path)
    metadata = {
        "dubito_format": FORMAT_VERSION,
        "dubito_class": cls_name,
        "settings": json.dumps(settings, sort_keys=True),
    }
    cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    metadata["sha256"] = content_digest(cpu, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(cpu, tmp, metadata=metadata)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_tensors(path, cls_name: str, device="cpu") -> tuple[dict[str, torch.Tensor], dict]:
    """Read a file written by `save_tensors`; check it is a dubito file of class ``cls_name``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    try:
        with safe_open(str(path), framework="pt") as fh:
            metadata = fh.metadata() or {}
        tensors = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{path} is not a readable safetensors model file (corrupted or truncated?): {exc}") from None
    if metadata.get("dubito_format") is None or "dubito_class" not in metadata:
        raise ValueError(f"{path} is a safetensors file but not a dubito model (no dubito metadata)")
    if metadata["dubito_format"] != FORMAT_VERSION:
        raise ValueError(
            f"{path} has dubito file format {metadata['dubito_format']!r}; this version reads {FORMAT_VERSION!r}"
        )
    if metadata["dubito_class"] != cls_name:
        raise ValueError(f"{path} holds a {metadata['dubito_class']}, not a {cls_name}")
    if "sha256" not in metadata:  # written before the digest existed: loads, unverified, and says so
        warnings.warn(f"{path} carries no SHA-256 (written by an earlier dubito): it loads, but nothing can check "
                      "that it is what was saved; save it again to add one", UserWarning, stacklevel=3)
    elif content_digest(tensors, metadata) != metadata["sha256"]:
        raise ValueError(
            f"{path} is not what was saved: the SHA-256 of its settings and tensors differs from the one "
            "written with them (a changed byte, an edited value, a truncated copy); load the original file")
    try:
        settings = json.loads(metadata.get("settings", "{}"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path} has corrupted settings metadata: {type(exc).__name__}: {exc}") from None
    if str(device) != "cpu":
        tensors = {k: v.to(device) for k, v in tensors.items()}
    return tensors, settings


# ------------------------------------------------------------------ estimator settings as JSON
def json_seed(random_state) -> int | None:
    """``random_state`` as JSON: an int seed as itself, anything else (None, a Generator or
    RandomState) as None; the fitted seeds are saved, so predictions do not depend on it."""
    rs = random_state
    return int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else None


def json_value(v):
    """``v`` with numpy scalars and 0-d tensors as Python ones, tuples and arrays as lists, dicts
    value by value (recursively), paths and devices as strings; other values unchanged."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, (tuple, list, np.ndarray)):
        return [json_value(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    if isinstance(v, (os.PathLike, torch.device)):
        return str(v)
    if torch.is_tensor(v) and v.ndim == 0:  # e.g. a learning rate held as a device tensor
        return v.item()
    return v


def json_params(est, **overrides) -> dict:
    """``est.get_params(deep=False)`` as JSON values: numpy scalars as Python ones, tuples and
    arrays as lists, paths and devices as strings, ``random_state`` by `json_seed`, ``device`` as
    its string; ``overrides`` replace entries (e.g. a user network the file cannot hold)."""
    out = {k: json_value(v) for k, v in est.get_params(deep=False).items()}
    if "random_state" in out:
        out["random_state"] = json_seed(est.get_params(deep=False)["random_state"])
    if "device" in out:
        out["device"] = str(out["device"])
    out.update(overrides)
    return out


def params_from_json(params: dict, *, tuples=("hidden", "image_shape"), device=None) -> dict:
    """Constructor keyword arguments from `json_params`' output: the entries named in ``tuples``
    back to tuples where JSON made them lists (an int ``hidden`` stays an int), ``device``
    replacing the saved one when given."""
    out = dict(params)
    for key in tuples:
        if isinstance(out.get(key), list):
            out[key] = tuple(out[key])
    if device is not None:
        out["device"] = str(device)
    return out


def feature_names_json(est) -> list[str] | None:
    """``est.feature_names_in_`` as a JSON list (None when the model was fitted without names)."""
    return [str(c) for c in getattr(est, "feature_names_in_", [])] or None


def set_feature_names(est, names) -> None:
    """Inverse of `feature_names_json`: set ``feature_names_in_`` when the file has names."""
    if names:
        est.feature_names_in_ = np.asarray(names, dtype=object)


@contextmanager
def rebuilding(path, cls_name: str, errors=(KeyError, TypeError, RuntimeError, AttributeError, IndexError)):
    """Rebuild an estimator from a file's tensors and settings inside this block: a missing key,
    a wrong type or a tensor that does not fit (``errors``), or settings whose sizes exhaust memory
    (MemoryError, OverflowError), becomes ONE ``ValueError`` that names the file and the class."""
    try:
        yield
    except errors as exc:
        raise ValueError(f"{path} is a {cls_name} file with inconsistent contents (corrupted?): {exc}") from None
    except (MemoryError, OverflowError, RecursionError) as exc:  # settings asking for absurd sizes
        raise ValueError(
            f"{path}: rebuilding the {cls_name} it describes needs more than this machine has "
            f"({type(exc).__name__}); its settings ask for an absurd size (a crafted or corrupted file?)") from None
