"""Checkpoints of a torch training loop that resume to the same numbers as an uninterrupted run.

A checkpoint is one ``.safetensors`` file written with `dubito.io.save_tensors` (a temporary
file in the same folder, fsynced, then ``os.replace``: a reader sees the previous checkpoint or
the new one, never half of one). It holds what the loop needs to continue exactly:

* the modules' state dicts (``module.<name>.<key>``);
* the optimizer's per-parameter state (``optimizer.<i>.<key>``: Adam's step, exp_avg, exp_avg_sq)
  and its param groups (JSON: lr, betas, ...);
* a learning-rate scheduler's state dict (JSON: best, num_bad_epochs, ...);
* the ``torch.Generator`` states (``generator.<name>``) of every random stream the loop draws from;
* the epochs done and the loop's own JSON record (loss curves, flags);
* ``settings``: the JSON of everything that fixes the run (model settings, seed, a SHA-256 digest
  of the training data), its SHA-256 ``fingerprint`` and ``checkpoint_version``.

`load_training` refuses, with one ``ValueError`` naming the problem, a file that is not a dubito
file, one of another kind, another checkpoint version, or one written by a run with other
settings (the message lists the settings that differ). Used by `HyperVIRegressor`; the
B-DeepNoise chains (`dubito.regression.deepnoise_checkpoint`) share `data_digest`,
`fingerprint` and `settings_difference`.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from dubito import io

__all__ = [
    "CHECKPOINT_VERSION",
    "check_resume",
    "check_settings",
    "estimator_settings",
    "data_digest",
    "fingerprint",
    "load_training",
    "save_training",
    "settings_difference",
]

#: Version of the layout; bump when the keys or their meaning change.
CHECKPOINT_VERSION = "1"


def data_digest(*arrays) -> str:
    """SHA-256 of the float64 bytes and shapes of ``arrays`` (identifies the training data)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def fingerprint(settings: dict) -> str:
    """SHA-256 of the canonical JSON of ``settings``."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def settings_difference(saved: dict, current: dict) -> str:
    """The settings that differ, as "key: checkpoint ... vs this fit ..." joined by "; "."""
    keys = sorted(set(saved) | set(current))
    diffs = [
        f"{k}: checkpoint {saved.get(k, '<absent>')!r} vs this fit {current.get(k, '<absent>')!r}"
        for k in keys
        if saved.get(k, "<absent>") != current.get(k, "<absent>")
    ]
    return "; ".join(diffs) if diffs else "(fingerprint mismatch)"


def check_settings(path, meta: dict, settings: dict, what: str, version: str = CHECKPOINT_VERSION) -> None:
    """Refuse (ValueError) a checkpoint of another layout ``version`` or written with other ``settings``."""
    found = meta.get("checkpoint_version")
    if found != version:
        raise ValueError(f"{path} is a {what} checkpoint of version {found!r}; this version reads "
                         f"{version!r}: start afresh (fit with resume=False)")
    current = json.loads(json.dumps(settings))
    saved = meta.get("settings", {})
    if meta.get("fingerprint") != fingerprint(settings) or saved != current:
        raise ValueError(
            f"{path} is a checkpoint of a different model, data or settings and cannot be resumed: "
            f"{settings_difference(saved, current)}. Fit with resume=False (or another checkpoint_dir) "
            "to start afresh")


def check_resume(estimator, resume: bool) -> None:
    """Refuse ``fit(..., resume=True)`` without a ``checkpoint_dir`` or an int ``random_state``
    (the checkpoint holds the random streams of one seed)."""
    if not resume:
        return
    if estimator.checkpoint_dir is None:
        raise ValueError("resume=True needs checkpoint_dir (the folder the interrupted fit wrote)")
    seed = estimator.random_state
    if not (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)):
        raise ValueError("resume=True needs an integer random_state (the checkpoint is tied to the seed)")


def estimator_settings(estimator, X, y) -> dict:
    """What must match to resume a fit of ``estimator`` on (X, y): its constructor settings as
    JSON, without the progress bar and the checkpoint's own, plus ``data`` (`data_digest`)."""
    settings = io.json_params(estimator)
    for key in ("progress", "checkpoint_dir", "checkpoint_every"):
        settings.pop(key, None)
    settings["data"] = data_digest(X, y)
    return settings


def save_training(path, kind: str, settings: dict, *, epoch: int, modules: dict, optimizer, scheduler=None,
                  generators: dict | None = None, record: dict | None = None) -> None:
    """Write the loop's state after ``epoch`` epochs atomically to ``path`` (module docstring);
    ``kind`` is the class name recorded in the file, ``record`` the loop's JSON-able extras."""
    tensors = {f"module.{name}.{k}": v for name, m in modules.items() for k, v in m.state_dict().items()}
    opt = optimizer.state_dict()
    for i, per_param in opt["state"].items():
        for key, value in per_param.items():
            tensors[f"optimizer.{i}.{key}"] = torch.as_tensor(value)
    for name, gen in (generators or {}).items():
        tensors[f"generator.{name}"] = gen.get_state().to("cpu", torch.uint8)
    meta = {
        "checkpoint_version": CHECKPOINT_VERSION,
        "settings": settings,
        "fingerprint": fingerprint(settings),
        "epoch": int(epoch),
        "param_groups": io.json_value(opt["param_groups"]),
        "scheduler": None if scheduler is None else io.json_value(scheduler.state_dict()),
        "record": record or {},
    }
    io.save_tensors(path, tensors, kind, meta)


def load_training(path, kind: str, settings: dict, *, modules: dict, optimizer, scheduler=None,
                  generators: dict | None = None) -> tuple[int, dict]:
    """Restore, in place, the modules, optimizer, scheduler and generators from the checkpoint at
    ``path`` after checking it belongs to a run with ``settings``; returns (epochs done, record)."""
    tensors, meta = io.load_tensors(path, kind, device="cpu")
    check_settings(path, meta, settings, kind)
    with io.rebuilding(path, f"{kind} checkpoint", errors=(KeyError, TypeError, IndexError, RuntimeError, ValueError)):
        for name, m in modules.items():
            prefix = f"module.{name}."
            m.load_state_dict({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}, strict=True)
        state: dict[int, dict] = {}
        for k, v in tensors.items():
            if k.startswith("optimizer."):
                _, i, key = k.split(".", 2)
                state.setdefault(int(i), {})[key] = v
        groups = meta["param_groups"]
        for g in groups:
            if "betas" in g:
                g["betas"] = tuple(g["betas"])
        optimizer.load_state_dict({"state": state, "param_groups": groups})
        if scheduler is not None:
            scheduler.load_state_dict(meta["scheduler"])
        for name, gen in (generators or {}).items():
            gen.set_state(tensors[f"generator.{name}"].to(torch.uint8))
        return int(meta["epoch"]), dict(meta["record"])
