"""DeepEnsembleClassifier (spec §2.6, §6.14): pooled predictive = concatenated draws, identical
members = one member, pooled MI >= the members' mean MI, independent seeding."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dubito.classification import DeepEnsembleClassifier, MCDropoutClassifier
from dubito.predictive.classes import ClassPredictive


@pytest.fixture(scope="module")
def fitted():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    base = MCDropoutClassifier(dropout="concrete", n_samples=8, epochs=15, hidden=(64, 64), features=64)
    ens = DeepEnsembleClassifier(base, n_members=3, random_state=0).fit(Xtr, ytr)
    return ens, Xtr, Xte, ytr, yte


def test_pooling_equals_concatenated_draws(fitted):
    ens, _, Xte, _, _ = fitted
    X = Xte[:60]
    pooled = ens.predict_distribution(X)
    draws = ens.sample_logits(X)
    assert draws.shape == (24, 60, 10)
    concat = ClassPredictive.from_logits(draws)
    assert pooled.n_draws == concat.n_draws == 24
    for name in ("probs", "log_probs", "predictive_entropy", "expected_entropy", "mutual_information",
                 "variation_ratio"):
        assert np.allclose(getattr(pooled, name), getattr(concat, name), rtol=0, atol=1e-12), name


def test_identical_members_equal_one_member(fitted):
    ens, _, Xte, _, _ = fitted
    member = ens.members_[0]
    same = DeepEnsembleClassifier(n_members=3)
    same.members_, same.classes_, same.n_features_in_ = [member] * 3, member.classes_, member.n_features_in_
    one, three = member.predict_distribution(Xte[:40]), same.predict_distribution(Xte[:40])
    assert three.n_draws == 3 * one.n_draws
    for name in ("probs", "predictive_entropy", "mutual_information"):
        assert np.allclose(getattr(three, name), getattr(one, name), rtol=0, atol=1e-12), name


def test_pooled_mi_is_at_least_the_members_mean(fitted):
    # spec §6.14: the gap is H[mean of member means] - mean H[member means] >= 0 (concavity)
    ens, _, Xte, _, _ = fitted
    members = ens.member_distributions(Xte)
    pooled = ens.predict_distribution(Xte)
    mean_mi = np.mean([m.mutual_information for m in members], axis=0)
    assert np.all(pooled.mutual_information >= mean_mi - 1e-12)
    gap = pooled.predictive_entropy - np.mean([m.predictive_entropy for m in members], axis=0)
    assert np.allclose(pooled.mutual_information - mean_mi, gap, atol=1e-10)
    assert gap.mean() > 1e-4  # independently seeded members disagree somewhere


def test_members_are_seeded_independently_and_reproducibly(fitted):
    ens, Xtr, Xte, ytr, yte = fitted
    seeds = [m.random_state for m in ens.members_]
    assert len(set(seeds)) == 3
    w = [next(m.net_.parameters()).detach().numpy() for m in ens.members_]
    assert not np.allclose(w[0], w[1]) and not np.allclose(w[1], w[2])
    assert (ens.predict(Xte) == yte).mean() > 0.9
    again = DeepEnsembleClassifier(ens.members_[0].__class__(**{**ens.members_[0].get_params(), "random_state": None}),
                                   n_members=3, random_state=0).fit(Xtr, ytr)
    assert np.array_equal(again.sample_logits(Xte[:10]), ens.sample_logits(Xte[:10]))


def test_bad_input_raises():
    X, y = load_digits(return_X_y=True)
    with pytest.raises(ValueError, match="n_members"):
        DeepEnsembleClassifier(n_members=0).fit(X[:20], y[:20])
    with pytest.raises(ValueError, match="predict_distribution"):
        DeepEnsembleClassifier(estimator=object()).fit(X[:20], y[:20])
    with pytest.raises(ValueError, match="labels outside"):
        DeepEnsembleClassifier(MCDropoutClassifier(n_classes=3, epochs=1), n_members=2).fit(X[:40], y[:40])
    with pytest.raises(ValueError, match="not fitted"):
        DeepEnsembleClassifier().predict_distribution(X[:3])


def test_fine_tune_fine_tunes_each_member_with_its_own_seed(fitted):
    import copy

    from dubito.regression.deterministic import seeds_from

    ens, Xtr, Xte, ytr, _ = fitted
    tuned = copy.deepcopy(ens)
    assert tuned.fine_tune(Xtr[:300], ytr[:300], epochs=1, random_state=4) is tuned
    for i, (mem, seed) in enumerate(zip(copy.deepcopy(ens.members_), seeds_from(4, 3))):
        mem.fine_tune(Xtr[:300], ytr[:300], epochs=1, random_state=int(seed) % (2**31))
        assert np.array_equal(mem.sample_logits(Xte[:10]), tuned.members_[i].sample_logits(Xte[:10])), i
    assert not np.array_equal(tuned.sample_logits(Xte[:10]), ens.sample_logits(Xte[:10]))
    plain = DeepEnsembleClassifier(n_members=2)
    plain.members_ = [object(), object()]
    with pytest.raises(ValueError, match="members with a fine_tune method"):
        plain.fine_tune(Xtr, ytr, epochs=1)
