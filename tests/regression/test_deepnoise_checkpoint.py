"""Per-chain DeepNoise checkpoints: exact round trip, refusal of foreign files, atomic writes."""
import os

import numpy as np
import pytest
import torch

import dubito.io
from dubito import io
from dubito.regression import deepnoise_checkpoint as ck
from dubito.regression.deepnoise_gibbs import init_latents, random_init
from dubito.regression.deepnoise_model import DeepNoisePriors

SETTINGS = {"hidden": [4, 3], "activation": "hardtanh", "seed": 11, "data": "abc", "n_burnin": 5}


def _state(n_kept=3, centred=True):
    gen = torch.Generator().manual_seed(0)
    params = random_init((2, 4, 3, 1), gen)
    X = torch.randn(10, 2, generator=gen, dtype=torch.float64)
    y = torch.randn(10, generator=gen, dtype=torch.float64)
    latents = init_latents(params, X, y, "hardtanh", gen)
    priors = DeepNoisePriors.sgd_centred(params, 10, a_w=0.5) if centred else DeepNoisePriors(a_w=0.25)
    kept = [{k: v + i for k, v in params.to_flat().items()} for i in range(n_kept)]
    return ck.ChainState(
        sweep=7, params=params, latents=latents, priors=priors, generator_state=gen.get_state(),
        kept=kept, loglik=[-1.5 - i for i in range(n_kept)],
        monitor=[torch.arange(4, dtype=torch.float64) * i for i in range(n_kept)], seconds=2.5,
    )


def _assert_same(a: ck.ChainState, b: ck.ChainState):
    assert a.sweep == b.sweep and a.seconds == b.seconds and a.loglik == b.loglik
    for x, y in ((a.params.to_flat(), b.params.to_flat()), (a.latents.to_flat(), b.latents.to_flat())):
        assert x.keys() == y.keys()
        for k in x:
            assert torch.equal(x[k], y[k]), k
    assert len(a.kept) == len(b.kept)
    for x, y in zip(a.kept, b.kept):
        for k in x:
            assert torch.equal(x[k], y[k])
    for x, y in zip(a.monitor, b.monitor):
        assert torch.equal(x, y)
    assert torch.equal(a.generator_state, b.generator_state)


@pytest.mark.parametrize("n_kept, centred", [(3, True), (0, False)])
def test_round_trip_is_exact(tmp_path, n_kept, centred):
    """Every tensor comes back bit-identical (float64), the priors (per-unit lists or scalars)
    too, and the restored generator continues the same random stream."""
    st = _state(n_kept, centred)
    path = ck.checkpoint_path(tmp_path, 2)
    assert path.name == "chain_2.safetensors"
    ck.save_checkpoint(path, st, SETTINGS)
    back = ck.load_checkpoint(path, SETTINGS)
    _assert_same(st, back)
    if centred:
        for name in ("a_pre", "b_pre", "a_post", "b_post"):
            for x, y in zip(getattr(st.priors, name), getattr(back.priors, name)):
                assert torch.equal(x, y)
        assert back.priors.a_w == 0.5
    else:
        assert back.priors == st.priors
    g1, g2 = torch.Generator(), torch.Generator()
    g1.set_state(st.generator_state)
    g2.set_state(back.generator_state)
    assert torch.equal(torch.randn(5, generator=g1), torch.randn(5, generator=g2))


def test_other_settings_are_refused_naming_the_difference(tmp_path):
    path = tmp_path / "c.safetensors"
    ck.save_checkpoint(path, _state(), SETTINGS)
    other = dict(SETTINGS, hidden=[5, 3])
    with pytest.raises(ValueError, match=r"different model.*hidden: checkpoint \[4, 3\] vs this fit \[5, 3\]"):
        ck.load_checkpoint(path, other)
    with pytest.raises(ValueError, match="data"):
        ck.load_checkpoint(path, dict(SETTINGS, data="xyz"))


def test_other_version_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    ck.save_checkpoint(path, _state(), SETTINGS)
    monkeypatch.setattr(ck, "CHECKPOINT_VERSION", "999")
    with pytest.raises(ValueError, match="version '1'.*reads '999'"):
        ck.load_checkpoint(path, SETTINGS)


def test_other_files_are_refused(tmp_path):
    """A saved model (another dubito class), a non-dubito safetensors file, a truncated
    checkpoint: each a ValueError that says what it is."""
    model = tmp_path / "model.safetensors"
    io.save_tensors(model, {"a": torch.zeros(2)}, "DeepEnsembleRegressor", {})
    with pytest.raises(ValueError, match="holds a DeepEnsembleRegressor, not a DeepNoiseChainCheckpoint"):
        ck.load_checkpoint(model, SETTINGS)
    path = tmp_path / "c.safetensors"
    ck.save_checkpoint(path, _state(), SETTINGS)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="corrupted or truncated"):
        ck.load_checkpoint(path, SETTINGS)


def test_failure_while_writing_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    """Simulated crash half-way through writing (safetensors writes half a file, then raises):
    the previous checkpoint is intact and loads to the old state; no temporary file is left."""
    path = tmp_path / "chain_0.safetensors"
    old = _state(2)
    ck.save_checkpoint(path, old, SETTINGS)
    before = path.read_bytes()

    def crash(tensors, filename, metadata=None):
        with open(filename, "wb") as fh:
            fh.write(b"\x00" * 100)  # half-written
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(dubito.io, "save_file", crash)
    new = _state(3)
    new.sweep = 9
    with pytest.raises(OSError, match="simulated"):
        ck.save_checkpoint(path, new, SETTINGS)
    assert path.read_bytes() == before
    _assert_same(old, ck.load_checkpoint(path, SETTINGS))
    assert os.listdir(tmp_path) == ["chain_0.safetensors"]


def test_data_digest_and_fingerprint():
    X = np.arange(6.0).reshape(3, 2)
    y = np.array([1.0, 2.0, 3.0])
    assert ck.data_digest(X, y) == ck.data_digest(X.copy(), y.astype(np.float32))
    assert ck.data_digest(X, y) != ck.data_digest(X, y + 1e-12)
    assert ck.data_digest(X, y) != ck.data_digest(X.reshape(2, 3), y)
    assert ck.fingerprint({"a": 1, "b": [1, 2]}) == ck.fingerprint({"b": (1, 2), "a": 1})
    assert ck.fingerprint({"a": 1}) != ck.fingerprint({"a": 2})
