"""The models: the dropout variants' networks and their training settings."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

import dubito
from dubito.classification import MCDropoutClassifier
from dubito.experiments.provenance import git_commit
from dubito.experiments.thesis.data import _Data
from dubito.experiments.thesis.vocab import CLASSIFIER, _cache_dir
from dubito.io import atomic_write_text
from dubito.methods import get_classifier

# ---------------------------------------------------------------------------------- models


def _model_seed(seed: int) -> int:
    return int(np.random.SeedSequence([int(seed), 41]).generate_state(1, np.uint32)[0] >> 1)


MODEL_KEYS = ("network", "features", "hidden", "p", "epochs", "batch_size", "lr", "patience", "n_samples",
              "optimizer", "weight_regularizer", "beta_factor")


def _model(dataset: str, method: str, seed: int, s: dict, data: _Data, device: str, progress: bool):
    """The trained MCDropoutClassifier of (dataset, method, seed), from the disk cache or trained now;
    returns (estimator, fit seconds, cache hit)."""

    ms = {k: s[k] for k in MODEL_KEYS if k in s}
    key = json.dumps(dict(dataset=dataset, method=method, seed=int(seed), model=ms, data=s.get("data", {}),
                          version=dubito.__version__, commit=git_commit(Path(dubito.__file__).parent) or ""),
                     sort_keys=True, default=list)
    stem = hashlib.sha256(key.encode()).hexdigest()[:24]
    path = _cache_dir() / (stem + ".safetensors")
    sidecar = _cache_dir() / (stem + ".json")  # the fit seconds (written after the model)
    if path.is_file() and sidecar.is_file():
        try:
            secs = float(json.loads(sidecar.read_text())["fit_seconds"])
            return MCDropoutClassifier.load(path, device=device), secs, True
        except Exception:  # noqa: BLE001 - a broken cache file is retrained
            pass
    est = get_classifier(CLASSIFIER[method]).build(
        p=float(s.get("p", 0.1)), n_samples=int(s["n_samples"]),
        network=s.get("network", "mlp"), image_shape=(1, data.side, data.side), features=int(s.get("features", 256)),
        hidden=tuple(s.get("hidden", (256, 256, 256))), epochs=int(s["epochs"]), batch_size=int(s.get("batch_size", 128)),
        lr=float(s.get("lr", 1e-3)), patience=int(s.get("patience", 5)), optimizer=s.get("optimizer", "adam"),
        weight_regularizer=float(s.get("weight_regularizer", 3.5e-6)),
        # β = factor / N_train (spec §2.4 sensitivity); absent: the classifier's KL-consistent 1/N_train
        dropout_regularizer=(float(s["beta_factor"]) / len(data.y_tr)) if "beta_factor" in s else None,
        n_classes=data.K, device=device,
        # the thesis's fixed validation split (validation_data below) replaces the held-out draw; 0: none drawn
        validation_fraction=0.0,
        random_state=_model_seed(seed), progress=progress)
    t0 = time.perf_counter()
    est.fit(data.X_tr, data.y_tr, validation_data=(data.X_val, data.y_val))
    secs = time.perf_counter() - t0
    try:
        est.save(path)
        atomic_write_text(sidecar, json.dumps({"fit_seconds": secs}))
    except OSError:
        pass
    return est, secs, False
