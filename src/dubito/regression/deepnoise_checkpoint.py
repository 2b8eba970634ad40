"""Per-chain checkpoints of the B-DeepNoise Gibbs sampler: written atomically, refused when foreign.

One file per chain (``chain_<c>.safetensors`` in the checkpoint folder), written with
`dubito.io.save_tensors` (a temporary file in the same folder, fsynced, then ``os.replace``:
a reader sees the previous checkpoint or the new one, never half of one). It holds everything
the chain needs to continue to the same numbers as an uninterrupted run (issue 5, "Long runs"):

* the current state (``params.*``: W, γ, τ², σ², ρ², ξ²) and latents (``latents.*``: V, U);
* the priors (``priors.*`` per-unit tensors of the [C] ``sgd_centred`` prior; scalars in JSON),
  since they may depend on the initial state (spec §1.3);
* the kept states so far, stacked (``kept.*``, first axis = kept index), and the traces of
  the train log-likelihood (``loglik``) and of the predictive mean at the monitoring rows
  (``monitor``) at those states;
* the chain's ``torch.Generator`` state (``generator_state``), the number of sweeps done
  (``sweep``) and the seconds spent so far;
* ``settings``: the JSON of everything that fixes the chain (model, priors, sampler settings,
  seed, a SHA-256 digest of the training data), with its SHA-256 ``fingerprint``, and
  ``checkpoint_version``.

`load_checkpoint` refuses, with a ``ValueError`` naming the problem, a file that is not a
dubito file, a file of another class (e.g. a saved model), another checkpoint version, or a
checkpoint whose settings differ from this fit's (listing the settings that differ).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch

from dubito import io
from dubito.regression.deepnoise_model import DeepNoiseLatents, DeepNoiseParams, DeepNoisePriors
from dubito.training_checkpoint import check_settings, data_digest, fingerprint

__all__ = [
    "CHECKPOINT_CLASS",
    "CHECKPOINT_VERSION",
    "ChainState",
    "checkpoint_path",
    "data_digest",
    "fingerprint",
    "load_checkpoint",
    "save_checkpoint",
]

#: Version of the checkpoint layout; bump when the keys or their meaning change.
CHECKPOINT_VERSION = "1"
#: Class name recorded in the file (dubito.io refuses a file of any other class).
CHECKPOINT_CLASS = "DeepNoiseChainCheckpoint"


@dataclass
class ChainState:
    """Everything a chain needs to continue (see the module docstring)."""

    sweep: int
    params: DeepNoiseParams
    latents: DeepNoiseLatents
    priors: DeepNoisePriors
    generator_state: torch.Tensor
    kept: list = field(default_factory=list)  # list of DeepNoiseParams.to_flat() dicts
    loglik: list = field(default_factory=list)  # floats, one per kept state
    monitor: list = field(default_factory=list)  # (n_monitor,) tensors, one per kept state
    seconds: float = 0.0


def checkpoint_path(folder, chain: int) -> Path:
    """The checkpoint file of chain ``chain`` in ``folder``."""
    return Path(folder) / f"chain_{int(chain)}.safetensors"


def _priors_split(priors: DeepNoisePriors):
    """Scalars -> JSON dict; per-unit tensor lists -> flat tensors ``priors.<name>.<i>``."""
    scalars, tensors = {}, {}
    for f in dataclasses.fields(priors):
        value = getattr(priors, f.name)
        if isinstance(value, (list, tuple)):
            scalars[f.name] = {"n_tensors": len(value)}
            for i, t in enumerate(value):
                tensors[f"priors.{f.name}.{i}"] = torch.as_tensor(t)
        else:
            scalars[f.name] = value if isinstance(value, str) else float(value)
    return scalars, tensors


def _priors_join(scalars: dict, tensors: dict) -> DeepNoisePriors:
    kwargs = {}
    for name, value in scalars.items():
        if isinstance(value, dict):
            kwargs[name] = [tensors[f"priors.{name}.{i}"] for i in range(int(value["n_tensors"]))]
        else:
            kwargs[name] = value if isinstance(value, str) else float(value)
    return DeepNoisePriors(**kwargs)


def save_checkpoint(path, state: ChainState, settings: dict) -> None:
    """Write ``state`` atomically to ``path`` with ``settings`` (JSON-able) and their fingerprint."""
    tensors = {f"params.{k}": v for k, v in state.params.to_flat().items()}
    tensors.update({f"latents.{k}": v for k, v in state.latents.to_flat().items()})
    prior_scalars, prior_tensors = _priors_split(state.priors)
    tensors.update(prior_tensors)
    if state.kept:
        for key in state.kept[0]:
            tensors[f"kept.{key}"] = torch.stack([d[key] for d in state.kept])
        tensors["monitor"] = torch.stack([torch.as_tensor(m) for m in state.monitor])
    tensors["loglik"] = torch.as_tensor(list(state.loglik), dtype=torch.float64)
    tensors["generator_state"] = state.generator_state.detach().to("cpu", torch.uint8)
    meta = {
        "checkpoint_version": CHECKPOINT_VERSION,
        "settings": settings,
        "fingerprint": fingerprint(settings),
        "sweep": int(state.sweep),
        "n_kept": len(state.kept),
        "seconds": float(state.seconds),
        "priors": prior_scalars,
    }
    io.save_tensors(path, tensors, CHECKPOINT_CLASS, meta)


def load_checkpoint(path, settings: dict, device="cpu") -> ChainState:
    """Read the checkpoint at ``path`` and check it belongs to a fit with ``settings``.

    Raises ``ValueError`` for a foreign/corrupted file, another checkpoint version or other
    settings (the message lists the settings that differ), ``FileNotFoundError`` if absent.
    """
    tensors, meta = io.load_tensors(path, CHECKPOINT_CLASS, device=device)
    check_settings(path, meta, settings, "DeepNoise", version=CHECKPOINT_VERSION)
    try:
        def group(prefix):
            return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}

        params = DeepNoiseParams.from_flat(group("params."))
        latents = DeepNoiseLatents.from_flat(group("latents."))
        priors = _priors_join(meta["priors"], tensors)
        n_kept = int(meta["n_kept"])
        stacked = group("kept.")
        kept = [{k: v[i].clone() for k, v in stacked.items()} for i in range(n_kept)]
        loglik = [float(v) for v in tensors["loglik"]]
        monitor = [tensors["monitor"][i].clone() for i in range(n_kept)] if n_kept else []
        if len(loglik) != n_kept or any(v.shape[0] != n_kept for v in stacked.values()):
            raise ValueError("kept states and traces have different lengths")
        state = ChainState(
            sweep=int(meta["sweep"]),
            params=params,
            latents=latents,
            priors=priors,
            generator_state=tensors["generator_state"].to("cpu", torch.uint8),
            kept=kept,
            loglik=loglik,
            monitor=monitor,
            seconds=float(meta.get("seconds", 0.0)),
        )
    except (KeyError, TypeError, IndexError, RuntimeError, ValueError) as exc:
        raise ValueError(f"{path} is a DeepNoise checkpoint with inconsistent contents (corrupted?): {exc}") from None
    return state
