"""MCDropoutClassifier, mc_logits and wrap (spec §2.3-2.5, §6.1-6.2; issue 7's bad input).

Oracles: the deterministic network (p = 0), a Python loop over the T passes with the recorded
masks (batched = loop to 1e-12 in float64), BatchNorm's buffers before/after, and accuracy on
scikit-learn's 8x8 digits (1,797 images; a 70/30 stratified split, seed 0).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from dubito.classification import MCDropoutClassifier, build_network, mc_logits, wrap
from dubito.nn.concrete_dropout import StochasticDropout, dropout_modules
from dubito.predictive.classes import ClassPredictive


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _record_then_loop(net, x, t, expand):
    """Batched T passes with the masks recorded, then a loop over t with those masks."""
    ours = [m for m in net.modules() if isinstance(m, StochasticDropout)]
    for m in ours:
        m.record_noise = True
    gen = torch.Generator().manual_seed(11)
    batched = mc_logits(net, x, t, expand=expand, generator=gen)
    noise = [m.last_noise for m in ours]
    for m in ours:
        m.record_noise = False
    n = x.shape[0]
    loop = []
    for i in range(t):
        for m, u in zip(ours, noise):
            m.noise = u[i * n : (i + 1) * n] if u.shape[0] == t * n else u
        loop.append(mc_logits(net, x, 1, expand=expand)[0])
    for m in ours:
        m.noise = None
    return batched, torch.stack(loop), noise


@pytest.mark.parametrize("dropout", ["bernoulli", "concrete", "multidrop"])
@pytest.mark.parametrize("network", ["mlp", "cnn"])
def test_batched_passes_equal_a_loop_with_the_same_masks(dropout, network):
    torch.manual_seed(0)
    net = build_network(network, 64, 10, dropout=dropout, p=0.3, features=16, hidden=(12, 12),
                        image_shape=(1, 8, 8)).double()
    if network == "cnn":  # non-trivial BatchNorm statistics
        net.train()
        net(torch.randn(20, 1, 8, 8, dtype=torch.float64))
    x = torch.randn(5, 64, dtype=torch.float64)
    x = x if network == "mlp" else x.view(5, 1, 8, 8)
    t = 7
    batched, loop, noise = _record_then_loop(net, x, t, "dropout")
    assert batched.shape == (t, 5, 10)
    assert all(u.shape[0] == t * 5 for u in noise)  # every site saw the T·N rows
    assert torch.allclose(batched, loop, rtol=0, atol=1e-12)
    assert not torch.allclose(batched[0], batched[1])  # the passes differ
    # expanding at the input instead draws the same noise in the same order: same draws
    again = mc_logits(net, x, t, expand="input", generator=torch.Generator().manual_seed(11))
    assert torch.allclose(batched, again, rtol=0, atol=1e-12)
    # the loop draws each site's T masks once, as the batched form does: the same generator gives the same passes
    slow = mc_logits(net, x, t, batched=False, generator=torch.Generator().manual_seed(11))
    assert torch.allclose(slow, batched, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dropout", ["bernoulli", "concrete", "multidrop"])
@pytest.mark.parametrize("network", ["mlp", "cnn"])
@pytest.mark.parametrize("expand", ["dropout", "input"])
def test_mc_passes_are_shared_by_all_rows(dropout, network, expand):
    """Pass t is one sampled network for every input (MCNoise): a row's T logits are the same alone,
    in a shuffled batch, and in chunks that reuse the call's noise; the loop form agrees. float64,
    tolerance 1e-12 (rounding of batched matmuls; masks drawn per row differ by O(1))."""
    from dubito.nn.concrete_dropout import MCNoise

    torch.manual_seed(0)
    net = build_network(network, 64, 10, dropout=dropout, p=0.3, features=16, hidden=(12, 12),
                        image_shape=(1, 8, 8)).double()
    if network == "cnn":  # non-trivial BatchNorm statistics
        net.train()
        net(torch.randn(20, 1, 8, 8, dtype=torch.float64))
    n, t = 9, 6
    x = torch.randn(n, 64, dtype=torch.float64)
    x = x if network == "mlp" else x.view(n, 1, 8, 8)

    def run(rows, **kw):
        return mc_logits(net, rows, t, expand=expand, generator=torch.Generator().manual_seed(4), **kw)

    full = run(x)
    assert not torch.allclose(full[0], full[1])  # the passes differ
    for i in (0, 4, n - 1):
        assert torch.allclose(run(x[i : i + 1])[:, 0], full[:, i], rtol=0, atol=1e-12)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(run(x[perm]), full[:, perm], rtol=0, atol=1e-12)
    noise, gen = MCNoise(t), torch.Generator().manual_seed(4)  # chunks of 2 rows with the draws of one call
    chunks = torch.cat([mc_logits(net, x[a : a + 2], t, expand=expand, generator=gen, noise=noise)
                        for a in range(0, n, 2)], dim=1)
    assert torch.allclose(chunks, full, rtol=0, atol=1e-12)
    assert torch.allclose(run(x, batched=False), full, rtol=0, atol=1e-12)
    # two rows that are the same input get the same T passes
    twin = run(torch.cat([x[:1], x[:1]]))
    assert torch.equal(twin[:, 0], twin[:, 1])
    with pytest.raises(ValueError, match="n_samples = 6"):
        run(x, noise=MCNoise(5))


@pytest.mark.parametrize("dropout", ["bernoulli", "concrete", "multidrop"])
def test_a_rows_probabilities_do_not_depend_on_the_rest_of_x(digits, dropout):
    """The estimator's p̄(y | x) of a row is the same predicted alone, in a shuffled batch, and in
    chunks of 3 rows (``predict_batch_size``). Tolerance 1e-6: float32 logits of a row computed in
    another batch size differ by BLAS rounding (measured <= 1.2e-8 here), while masks drawn per row
    (the old behaviour) change p̄ by up to 0.02 here, and fresh masks per chunk likewise."""
    Xtr, Xte, ytr, _ = digits
    est = MCDropoutClassifier(dropout=dropout, n_samples=8, hidden=(16,), features=16, epochs=1,
                              random_state=0).fit(Xtr, ytr)
    X = Xte[:40]
    full = est.predict_proba(X)
    alone = np.stack([est.predict_proba(X[i : i + 1])[0] for i in range(len(X))])
    np.testing.assert_allclose(alone, full, rtol=0, atol=1e-6)
    perm = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_allclose(est.predict_proba(X[perm]), full[perm], rtol=0, atol=1e-6)
    chunked = est.set_params(predict_batch_size=3).predict_proba(X)
    np.testing.assert_allclose(chunked, full, rtol=0, atol=1e-6)
    assert np.array_equal(est.predict(X[perm]), est.predict(X)[perm])


def test_p_zero_equals_the_deterministic_network(digits):
    # spec §6.1: all T samples equal the eval-mode output; |MI| < 1e-7; p̄ = softmax
    Xtr, Xte, ytr, yte = digits
    est = MCDropoutClassifier(dropout="bernoulli", p=0.0, n_samples=10, epochs=2, hidden=(32,), features=32,
                              random_state=0).fit(Xtr, ytr)
    draws = est.sample_logits(Xte[:50])
    with torch.no_grad():
        ref = est.net_.eval()(est._tensor(Xte[:50])).numpy()
    assert np.array_equal(draws, np.broadcast_to(ref, draws.shape))
    pred = est.predict_distribution(Xte[:50])
    assert np.abs(pred.mutual_information).max() < 1e-7
    assert np.allclose(pred.probs, softmax(ref.astype(np.float64), axis=1), atol=1e-7)


def test_batchnorm_stays_in_eval_mode_during_mc_prediction(digits):
    # spec §6.2: BatchNorm's buffers are unchanged by MC inference, and it runs in eval mode
    Xtr, Xte, ytr, yte = digits
    est = MCDropoutClassifier(dropout="concrete", network="cnn", image_shape=(8, 8), n_samples=8, epochs=1,
                              hidden=(32,), random_state=0).fit(Xtr, ytr)
    bns = [m for m in est.net_.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and all(int(bn.num_batches_tracked) > 0 for bn in bns)
    before = copy.deepcopy(est.net_.state_dict())
    modes = []
    hooks = [bn.register_forward_pre_hook(lambda m, a: modes.append(m.training)) for bn in bns]
    est.predict_distribution(Xte[:40])
    for h in hooks:
        h.remove()
    after = est.net_.state_dict()
    assert modes and not any(modes)
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("dropout", ["bernoulli", "concrete", "multidrop"])
def test_digits_accuracy(digits, dropout):
    Xtr, Xte, ytr, yte = digits
    est = MCDropoutClassifier(dropout=dropout, n_samples=20, epochs=15, random_state=0).fit(Xtr, ytr)
    pred = est.predict_distribution(Xte)
    assert isinstance(pred, ClassPredictive) and pred.n_draws == 20
    assert (pred.predict() == yte).mean() > 0.9
    assert np.array_equal(est.predict(Xte), pred.predict())
    assert est.predict_proba(Xte).shape == (len(yte), 10)
    assert pred.mutual_information.mean() > 0  # the passes differ
    assert est.rate_history_.shape == (len(est.loss_curve_) + 1, 4)


def test_learned_rates_move_and_fixed_rates_do_not(digits):
    Xtr, _, ytr, _ = digits
    conc = MCDropoutClassifier(dropout="concrete", epochs=3, validation_fraction=0.0, random_state=0).fit(Xtr, ytr)
    bern = MCDropoutClassifier(dropout="bernoulli", p=0.2, epochs=3, validation_fraction=0.0,
                               random_state=0).fit(Xtr, ytr)
    assert np.all(conc.rate_history_[0] == pytest.approx(0.1, rel=1e-6))
    assert np.all(np.abs(conc.rate_history_[-1] - conc.rate_history_[0]) > 1e-4)
    assert np.all(bern.rate_history_ == pytest.approx(0.2))


def test_predictions_are_seeded_and_reproducible(digits):
    Xtr, Xte, ytr, _ = digits
    kw = dict(dropout="concrete", n_samples=5, epochs=2, hidden=(32,), features=32, random_state=3)
    a = MCDropoutClassifier(**kw).fit(Xtr, ytr)
    b = MCDropoutClassifier(**kw).fit(Xtr, ytr)
    assert np.array_equal(a.sample_logits(Xte[:30]), b.sample_logits(Xte[:30]))
    assert np.array_equal(a.sample_logits(Xte[:30]), a.sample_logits(Xte[:30]))
    assert not np.array_equal(a.sample_logits(Xte[:30], random_state=1), a.sample_logits(Xte[:30]))
    # another chunking of X: the same masks (drawn once per call), the same draws up to float32 rounding
    small = MCDropoutClassifier(**kw, predict_batch_size=7).fit(Xtr, ytr)
    np.testing.assert_allclose(small.sample_logits(Xte[:30]), a.sample_logits(Xte[:30]), rtol=0, atol=1e-5)


class _Backbone(nn.Module):
    """A user classifier: a 'pretrained' backbone with BatchNorm and a new head, no dropout."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                                      nn.Linear(256, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.backbone(x))


def test_wrap_refuses_a_model_without_dropout_and_inserts_on_request(digits):
    Xtr, Xte, ytr, yte = digits
    torch.manual_seed(0)
    model = _Backbone()
    with pytest.raises(ValueError, match="no dropout layers"):
        wrap(model, image_shape=(1, 8, 8))
    with pytest.raises(ValueError, match="no dropout layers"):
        MCDropoutClassifier(network=model, image_shape=(1, 8, 8), epochs=1).fit(Xtr, ytr)
    est = wrap(model, dropout="concrete", insert_dropout=True, image_shape=(1, 8, 8), standardize=True,
               n_samples=10, epochs=15, random_state=0).fit(Xtr, ytr)
    assert isinstance(model.head, nn.Linear)  # the user's model is not changed
    assert isinstance(est.net_.head, StochasticDropout) and est.net_.head.layer.out_features == 10
    assert (est.predict(Xte) == yte).mean() > 0.85


def test_user_model_with_torch_dropout_and_pretrained_weights(digits):
    Xtr, Xte, ytr, _ = digits
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10))
    model.train()
    model(torch.randn(50, 64))
    model.eval()
    est = wrap(model, n_samples=6, epochs=0, random_state=0).fit(Xtr, ytr)  # MC-sample as is
    draws = est.sample_logits(Xte[:20])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        ref = mc_logits(copy.deepcopy(model), torch.as_tensor(Xte[:20], dtype=torch.float32), 6).numpy()
    assert draws.shape == ref.shape == (6, 20, 10)
    assert not np.allclose(draws[0], draws[1])
    # same model, same standardisation (none): the eval-mode mean network agrees
    with torch.no_grad():
        mean_net = model(torch.as_tensor(Xte[:20], dtype=torch.float32)).numpy()
        ours = est.net_.eval()(torch.as_tensor(Xte[:20], dtype=torch.float32)).numpy()
    assert np.array_equal(mean_net, ours)
    assert len(dropout_modules(est.net_)) == 1


def test_callable_network_and_wrong_output_width(digits):
    Xtr, _, ytr, _ = digits
    est = MCDropoutClassifier(network=lambda: nn.Sequential(nn.Dropout(0.1), nn.Linear(64, 10)), epochs=1,
                              random_state=0).fit(Xtr, ytr)
    assert est.sample_logits(Xtr[:3]).shape == (50, 3, 10)
    with pytest.raises(ValueError, match=r"logits of shape \(batch, K\)"):
        MCDropoutClassifier(network=nn.Sequential(nn.Dropout(0.1), nn.Linear(64, 7)), epochs=1).fit(Xtr, ytr)


def test_bad_input_raises(digits):
    Xtr, _, ytr, _ = digits
    small = dict(epochs=1, hidden=(8,), features=8)
    with pytest.raises(ValueError, match=r"labels outside 0..2"):
        MCDropoutClassifier(n_classes=3, **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="negative label"):  # labels as indices (n_classes given)
        MCDropoutClassifier(n_classes=3, **small).fit(Xtr[:4], [0, 1, -1, 2])
    with pytest.raises(ValueError, match="integer class labels"):
        MCDropoutClassifier(**small).fit(Xtr[:4], [0, 1, 0.5, 2])
    with pytest.raises(ValueError, match="single class"):
        MCDropoutClassifier(**small).fit(Xtr[:4], [0, 0, 0, 0])
    with pytest.raises(ValueError, match="C\\*H\\*W = 49"):
        MCDropoutClassifier(network="cnn", image_shape=(1, 7, 7), **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="needs image_shape"):
        MCDropoutClassifier(network="cnn", **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="image_shape must be"):
        MCDropoutClassifier(network="cnn", image_shape=(8, 8, 8, 8), **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="dropout must be one of"):
        MCDropoutClassifier(dropout="gaussian", **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="network must be one of"):
        MCDropoutClassifier(network="resnet", **small).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="p must"):
        MCDropoutClassifier(p=1.0, **small).fit(Xtr, ytr)
    est = MCDropoutClassifier(**small, random_state=0).fit(Xtr, ytr)
    with pytest.raises(ValueError, match="features"):
        est.predict(Xtr[:, :10])
    with pytest.raises(ValueError, match="n_samples"):
        est.predict_distribution(Xtr[:3], n_samples=0)
    with pytest.raises(ValueError, match="not fitted"):
        MCDropoutClassifier().predict(Xtr)
    with pytest.raises(ValueError, match="no nn.Linear head"):
        wrap(nn.Sequential(nn.Flatten()), insert_dropout=True)


def test_fine_tune_from_an_untrained_fit_equals_fit(digits):
    """fit(epochs=0) then fine_tune(E epochs, seeded with fit's training seed) is fit(epochs=E), bit for bit:
    the same optimiser, standardisation, regulariser scaling and random stream."""
    from dubito.regression.deterministic import seeds_from

    Xtr, Xte, ytr, _ = digits
    kw = dict(dropout="concrete", n_samples=4, hidden=(32,), features=32, validation_fraction=0.0, random_state=5)
    full = MCDropoutClassifier(epochs=3, **kw).fit(Xtr, ytr)
    tuned = MCDropoutClassifier(epochs=0, **kw).fit(Xtr, ytr)
    train_seed = seeds_from(5, 4)[1]
    assert tuned.fine_tune(Xtr, ytr, epochs=3, random_state=train_seed) is tuned
    assert np.array_equal(tuned.sample_logits(Xte[:20]), full.sample_logits(Xte[:20]))
    assert tuned.dropout_rates_ == pytest.approx(full.dropout_rates_)
    assert len(tuned.loss_curve_) == 3


def test_fine_tune_adapts_to_new_data_and_checks_its_input(digits):
    Xtr, Xte, ytr, yte = digits
    est = MCDropoutClassifier(dropout="bernoulli", n_samples=4, hidden=(32,), features=32, epochs=2, n_classes=10,
                              random_state=0).fit(Xtr[ytr < 5], ytr[ytr < 5])
    before = est.predict_distribution(Xte[yte == 5]).probs[:, 5].mean()
    copy.deepcopy(est)  # a fitted model deep-copies (AutoLabeler fine-tunes copies)
    est.fine_tune(Xtr, ytr, epochs=20, random_state=1, validation_data=(Xte, yte))
    assert est.predict_distribution(Xte[yte == 5]).probs[:, 5].mean() > before + 0.3
    with pytest.raises(ValueError, match="labels the model was not fitted on \\(e.g. 10\\)"):
        est.fine_tune(Xtr, ytr + 1, epochs=1)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        est.fine_tune(Xtr, ytr, epochs=0)
    with pytest.raises(ValueError, match="y must have shape"):
        est.fine_tune(Xtr, ytr[:-1], epochs=1)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        MCDropoutClassifier().fine_tune(Xtr, ytr, epochs=1)


def test_labels_are_mapped_as_scikit_learn_does(digits, tmp_path):
    """issue 22, part 8: labels {0, 5, 10} made 11 classes and a label of 1e9 tried 32 GB; now
    classes_ are the labels seen (sklearn.preprocessing.LabelEncoder's classes_), predict returns
    them, the predictive's column k is classes_[k], and save / load / fine_tune keep them."""
    from sklearn.preprocessing import LabelEncoder

    Xtr, _, ytr, _ = digits
    rows = np.isin(ytr, [0, 1, 2])
    X, y = Xtr[rows], ytr[rows]
    labels = np.array([-7, 5, 10**9])[y]  # any integers, one negative, one huge
    kw = dict(dropout="bernoulli", epochs=3, hidden=(8,), features=8, n_samples=4, random_state=0, progress=False)
    est = MCDropoutClassifier(**kw).fit(X, labels)
    np.testing.assert_array_equal(est.classes_, LabelEncoder().fit(labels).classes_)
    ref = MCDropoutClassifier(**kw).fit(X, y)  # the same fit on the codes 0, 1, 2
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
    np.testing.assert_array_equal(est.predict(X), est.classes_[ref.predict(X)])
    assert est.score(X, labels) == ref.score(X, y)
    est.save(tmp_path / "m.safetensors")
    back = MCDropoutClassifier.load(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(back.classes_, est.classes_)
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    back.fine_tune(X[:20], labels[:20], epochs=1, random_state=0)
    with pytest.raises(ValueError, match=r"labels the model was not fitted on \(e.g. 4\)"):
        back.fine_tune(X[:3], np.array([5, 4, 5]), epochs=1)
