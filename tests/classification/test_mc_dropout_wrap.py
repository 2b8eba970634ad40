"""MCDropoutClassifier.wrap: MC dropout around a user's trained classifier, ready to predict without fit
(issue 20, part 2).

Oracle: the T passes written out by hand (the input repeated pass-major at the dropout layer, one
``F.dropout`` over the T*N rows under the predict seed: the documented semantics of `mc_logits`),
averaged in softmax; equal to 1e-6 (float32). Fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dubito.classification import MCDropoutClassifier, wrap
from dubito.nn.concrete_dropout import StochasticDropout

T = 9


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)).eval()


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(25, 4)).astype(np.float32)


def _by_hand(model, X, seed):
    x = torch.as_tensor(X)
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        h = torch.relu(model[0](x)).repeat(T, 1)               # pass-major: row t N + n
        logits = model[3](F.dropout(h, 0.3, training=True)).reshape(T, len(X), 3)
    return torch.softmax(logits.double(), -1).mean(0).numpy()


def test_wrap_predicts_without_fit_as_a_manual_mc_average(X):
    model = _model()
    est = MCDropoutClassifier.wrap(model, n_samples=T, random_state=0)
    assert est.net_ is model and est.n_classes_ == 3 and est.classes_.tolist() == [0, 1, 2]
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba, _by_hand(model, X, est.predict_seed_), rtol=0, atol=1e-6)
    assert not np.allclose(proba, torch.softmax(model(torch.as_tensor(X)), -1).detach().numpy(), atol=1e-3)
    np.testing.assert_array_equal(est.predict_proba(X), proba)  # seeded: repeatable
    np.testing.assert_array_equal(est.predict(X), proba.argmax(1))
    assert not model.training  # the user's model keeps its mode
    # the same numbers from a tensor and from a non-shuffling DataLoader of x or (x, y) batches
    np.testing.assert_array_equal(est.predict_proba(torch.as_tensor(X)), proba)
    for loader in (DataLoader(TensorDataset(torch.as_tensor(X)), batch_size=25),
                   DataLoader(TensorDataset(torch.as_tensor(X), torch.zeros(25)), batch_size=25)):
        np.testing.assert_array_equal(est.predict_proba(loader), proba)
    with pytest.raises(ValueError, match="shuffle=False"):
        est.predict_proba(DataLoader(TensorDataset(torch.as_tensor(X)), batch_size=5, shuffle=True))


def test_classes_and_the_number_of_classes(X):
    model = _model()
    est = MCDropoutClassifier.wrap(model, classes=["cat", "dog", "eel"], n_samples=T, random_state=0)
    assert est.predict(X).dtype.kind == "U" and set(est.predict(X)) <= {"cat", "dog", "eel"}
    wrong = MCDropoutClassifier.wrap(model, n_classes=4, n_samples=T)
    with pytest.raises(ValueError, match=r"logits of shape \(25, 3\), not \(batch, K\) with K = 4"):
        wrong.predict_proba(X)
    no_head = nn.Sequential(nn.Dropout(0.2), nn.Identity())
    with pytest.raises(ValueError, match="pass classes"):
        MCDropoutClassifier.wrap(no_head)
    est = MCDropoutClassifier.wrap(no_head, n_classes=4, n_samples=T, random_state=0)
    assert est.predict_proba(X).shape == (25, 4)
    with pytest.raises(ValueError, match="distinct labels"):
        MCDropoutClassifier.wrap(model, classes=[0, 0, 1])
    with pytest.raises(ValueError, match="3 labels but n_classes = 4"):
        MCDropoutClassifier.wrap(model, classes=[0, 1, 2], n_classes=4)


def test_a_model_without_dropout_is_refused_unless_inserted(X):
    torch.manual_seed(1)
    plain = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    with pytest.raises(ValueError, match="no dropout layers.*insert_dropout=True"):
        MCDropoutClassifier.wrap(plain)
    est = MCDropoutClassifier.wrap(plain, insert_dropout=True, p=0.2, n_samples=T, random_state=0)
    assert isinstance(plain[2], nn.Linear)  # the user's model is not changed
    assert isinstance(est.net_[2], StochasticDropout) and est.dropout_rates_ == pytest.approx([0.2])
    draws = est.sample_logits(X)
    assert draws.shape == (T, 25, 3) and not np.allclose(draws[0], draws[1])
    with pytest.raises(ValueError, match="dropout must be 'bernoulli'"):
        MCDropoutClassifier.wrap(_model(), dropout="none")
    with pytest.raises(ValueError, match="standardize=True"):
        MCDropoutClassifier.wrap(_model(), standardize=True)
    with pytest.raises(ValueError, match="nn.Module"):
        MCDropoutClassifier.wrap("resnet")


def test_images_save_and_fit_after_wrap(X, tmp_path):
    torch.manual_seed(2)
    cnn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8, 3)).eval()
    est = MCDropoutClassifier.wrap(cnn, image_shape=(1, 4, 4), n_samples=T, random_state=0)
    imgs = np.random.default_rng(1).normal(size=(6, 1, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(est.predict_proba(imgs.reshape(6, 16)), est.predict_proba(torch.as_tensor(imgs)))
    with pytest.raises(ValueError, match="made by MCDropoutClassifier.wrap and not fitted"):
        est.save(tmp_path / "w.safetensors")
    # fit still trains a copy from the wrapped weights (epochs=0: none), and the result saves
    model = _model()
    est = MCDropoutClassifier.wrap(model, n_samples=T, epochs=0, random_state=0)
    before = est.predict_proba(X)
    y = np.arange(30) % 3
    est.fit(np.random.default_rng(2).normal(size=(30, 4)), y)
    assert est.net_ is not model and est.wrapped_ is False
    np.testing.assert_allclose(est.predict_proba(X), before, rtol=0, atol=1e-6)
    est.save(tmp_path / "f.safetensors")
    back = MCDropoutClassifier.load(tmp_path / "f.safetensors", network=model)
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def test_the_module_level_wrap_is_deprecated_and_still_works(X):
    with pytest.deprecated_call(match="MCDropoutClassifier.wrap"):
        est = wrap(_model(), n_samples=T, epochs=0, random_state=0)
    assert not hasattr(est, "net_")  # as before: it needs fit
    est.fit(np.random.default_rng(2).normal(size=(30, 4)), np.arange(30) % 3)
    assert est.predict_proba(X).shape == (25, 3)
