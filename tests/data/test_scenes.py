"""Synthetic scenes: the construction of spec §5.1 and the co-occurrence statistics it generates."""

import itertools

import numpy as np
import pytest

from dubito.data.scenes import (
    FASHION_CONFUSED_PAIRS,
    Scenes,
    SceneTypes,
    make_scene_benchmark,
    make_scene_types,
    most_confused_pairs,
    sample_scenes,
)


def _brute_pair_counts(scenes: Scenes) -> np.ndarray:
    """Count ordered pairs (i, j), i != j, of objects of each scene one by one."""
    C = np.zeros((scenes.n_classes, scenes.n_classes))
    for lab in scenes.labels_per_scene():
        for i, j in itertools.permutations(range(lab.size), 2):
            C[lab[i], lab[j]] += 1
    return C


def _assert_pairs_apart(types: SceneTypes, pairs) -> None:
    for typ in types.typical:
        for a, b in pairs:
            assert not (a in typ and b in typ), (a, b, typ)


def test_most_confused_pairs():
    C = np.diag([50.0] * 4)
    C[0, 3], C[3, 0] = 4, 5  # 9
    C[1, 2] = 7  # 7
    C[2, 3] = 7  # 7 (tie: smaller first class first)
    C[0, 1] = 1
    assert most_confused_pairs(C, 3) == [(0, 3), (1, 2), (2, 3)]
    assert most_confused_pairs(C, 10) == [(0, 3), (1, 2), (2, 3), (0, 1)]  # never-confused pairs left out
    with pytest.raises(ValueError, match="square"):
        most_confused_pairs(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="non-negative"):
        most_confused_pairs(-np.eye(3))


@pytest.mark.parametrize("context", ["strong", "weak"])
@pytest.mark.parametrize("seed", range(5))
def test_scene_types_follow_the_spec(context, seed):
    types = make_scene_types(10, FASHION_CONFUSED_PAIRS, n_types=4, context=context, seed=seed)
    m, mass = (3, 0.9) if context == "strong" else (6, 0.6)
    assert types.probs.shape == (4, 10) and np.allclose(types.probs.sum(axis=1), 1)
    _assert_pairs_apart(types, FASHION_CONFUSED_PAIRS)
    assert sorted(set().union(*map(set, types.typical))) == list(range(10))  # every class typical somewhere
    for t, typ in enumerate(types.typical):
        assert len(typ) <= m and np.isclose(types.probs[t, list(typ)].sum(), mass)
        assert np.allclose(types.probs[t, list(typ)], mass / len(typ))
    if context == "strong":
        assert all(len(typ) == 3 for typ in types.typical)
    else:  # overlapping types: some class is typical of two or more
        assert max(len(types.types_of(c)) for c in range(10)) >= 2


def test_impossible_separation_raises():
    clique = list(itertools.combinations(range(4), 2))  # 4 mutually confused classes need 4 types
    with pytest.raises(ValueError, match="cannot place the confused pairs"):
        make_scene_types(6, clique, n_types=3, typical_per_type=3)
    ok = make_scene_types(6, clique, n_types=4, typical_per_type=3, seed=1)
    _assert_pairs_apart(ok, clique)
    with pytest.raises(ValueError, match="cannot cover"):
        make_scene_types(10, n_types=2, typical_per_type=3)
    with pytest.raises(ValueError, match="with itself"):
        make_scene_types(10, [(3, 3)])
    with pytest.raises(ValueError, match="0..9"):
        make_scene_types(10, [(3, 10)])
    with pytest.raises(ValueError, match="context"):
        make_scene_types(10, context="medium")
    with pytest.raises(ValueError, match="typical of the same scene type"):
        SceneTypes(np.full((1, 3), 1 / 3), ((0, 1, 2),), np.ones(1), ((0, 1),))


def test_pair_counts_equal_brute_force_and_are_symmetric():
    types = make_scene_types(10, FASHION_CONFUSED_PAIRS, seed=0)
    scenes = sample_scenes(types, 300, seed=1)
    C = scenes.pair_counts()
    assert np.array_equal(C, _brute_pair_counts(scenes)) and np.array_equal(C, C.T)
    assert C.sum() == np.sum(scenes.sizes * (scenes.sizes - 1))
    assert scenes.sizes.min() == 3 and scenes.sizes.max() == 6  # U{3..6}, both ends reached in 300 draws
    parts = scenes.split(np.arange(scenes.n_objects))
    assert len(parts) == 300 and all(
        np.array_equal(p, np.arange(scenes.offsets[s], scenes.offsets[s + 1])) for s, p in enumerate(parts))
    assert np.array_equal(scenes.scene(7), scenes.labels[scenes.offsets[7]:scenes.offsets[8]])


@pytest.mark.parametrize("context", ["strong", "weak"])
def test_empirical_cooccurrence_matches_the_generating_distribution(context):
    """Normalised pair counts P^ = sum_s X_s / sum_s m_s (X_s: scene s's pair-count matrix, m_s =
    n_s(n_s-1)) against P = sum_t w_t pi_t pi_t^T. Tolerance: 5 delta-method standard errors per entry,
    SE^2 = sum_s (X_s - P^ m_s)^2 / (sum_s m_s)^2, plus 1e-4; P(b|a) within 0.02 absolute."""
    types = make_scene_types(10, FASHION_CONFUSED_PAIRS, context=context, seed=2)
    scenes = sample_scenes(types, 20000, seed=3)
    M = scenes.class_counts().astype(float)
    X = M[:, :, None] * M[:, None, :] - np.einsum("sa,ab->sab", M, np.eye(10))
    m = scenes.sizes * (scenes.sizes - 1.0)
    P_hat = X.sum(axis=0) / m.sum()
    assert np.allclose(P_hat, scenes.pair_counts() / scenes.pair_counts().sum())
    se = np.sqrt(((X - P_hat[None] * m[:, None, None]) ** 2).sum(axis=0)) / m.sum()
    P = types.pair_distribution()
    assert np.isclose(P.sum(), 1) and np.all(np.abs(P_hat - P) <= 5 * se + 1e-4)
    cond_hat = P_hat / P_hat.sum(axis=1, keepdims=True)
    assert np.abs(cond_hat - types.conditional()).max() < 0.02
    # strong context: a confused pair co-occurs far less than a class with its own type's classes
    if context == "strong":
        for a, b in FASHION_CONFUSED_PAIRS:
            partner = next(c for c in types.typical[types.types_of(a)[0]] if c != a)
            assert P[a, b] < 0.3 * P[a, partner]


def test_scene_type_and_size_frequencies():
    types = make_scene_types(10, FASHION_CONFUSED_PAIRS, n_types=5, seed=0)
    scenes = sample_scenes(types, 10000, seed=0, size_range=(2, 4))
    f_type = np.bincount(scenes.scene_type, minlength=5) / 10000
    f_size = np.bincount(scenes.sizes, minlength=5)[2:] / 10000
    se = np.sqrt(0.2 * 0.8 / 10000)
    assert np.all(np.abs(f_type - 0.2) < 5 * se) and np.all(np.abs(f_size - 1 / 3) < 5 * np.sqrt(2 / 9 / 10000))
    # labels within a type follow pi_t (chi-square-free check: 5 SE per class)
    for t in range(5):
        lab = scenes.labels[np.repeat(scenes.scene_type, scenes.sizes) == t]
        f = np.bincount(lab, minlength=10) / lab.size
        p = types.probs[t]
        assert np.all(np.abs(f - p) <= 5 * np.sqrt(p * (1 - p) / lab.size) + 1e-9)


def test_no_repeats_and_seeds():
    types = make_scene_types(10, FASHION_CONFUSED_PAIRS, seed=0)
    s = sample_scenes(types, 500, seed=4, repeats=False)
    assert all(np.unique(lab).size == lab.size for lab in s.labels_per_scene())
    a, b, c = (sample_scenes(types, 50, seed=k) for k in (7, 7, 8))
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.offsets, b.offsets)
    assert not (a.labels.size == c.labels.size and np.array_equal(a.labels, c.labels))


def test_pool_assignment_and_benchmark():
    rng = np.random.default_rng(0)
    val_pool = rng.integers(0, 10, 3000)
    test_pool = rng.integers(0, 10, 2000)
    bench = make_scene_benchmark(10, val_labels=val_pool, test_labels=test_pool,
                                 confused_pairs=FASHION_CONFUSED_PAIRS, n_train=2000, n_val=200, n_test=300, seed=5)
    _assert_pairs_apart(bench.types, FASHION_CONFUSED_PAIRS)
    assert (len(bench.train), len(bench.val), len(bench.test)) == (2000, 200, 300)
    assert bench.train.object_index is None
    for scenes, pool in ((bench.val, val_pool), (bench.test, test_pool)):
        idx = scenes.object_index
        assert np.array_equal(pool[idx], scenes.labels)  # each object's image has the object's label
        assert all(np.unique(i).size == i.size for i in scenes.split(idx))  # no image twice in a scene
        # images reused only after the class's images are used up: per class, max use - min use <= 1
        for c in range(10):
            uses = np.bincount(idx[scenes.labels == c], minlength=pool.size)[pool == c]
            assert uses.max() - uses.min() <= 1
    # pairs from a confusion matrix
    conf = np.eye(10) * 100
    conf[6, 0] = conf[2, 4] = 30
    b2 = make_scene_benchmark(10, val_labels=val_pool, test_labels=test_pool, confusion=conf, n_pairs=2,
                              n_train=10, n_val=5, n_test=5)
    assert b2.types.confused_pairs == ((0, 6), (2, 4))
    with pytest.raises(ValueError, match="no image of it"):
        sample_scenes(bench.types, 50, pool_labels=np.zeros(20, dtype=int))


def test_bad_scene_input_raises():
    types = make_scene_types(10, seed=0)
    with pytest.raises(ValueError, match="n_scenes"):
        sample_scenes(types, 0)
    with pytest.raises(ValueError, match="size_range min 5 exceeds max 3"):
        sample_scenes(types, 5, size_range=(5, 3))
    with pytest.raises(ValueError, match="SceneTypes"):
        sample_scenes(np.ones((2, 10)) / 10, 5)
    with pytest.raises(ValueError, match="empty scene"):
        Scenes(np.array([1, 2]), np.array([0, 0, 2]), np.array([0, 0]), 10)
    with pytest.raises(ValueError, match="labels must lie"):
        Scenes(np.array([1, 12]), np.array([0, 2]), np.array([0]), 10)
    with pytest.raises(ValueError, match="one per object"):
        sample_scenes(types, 3, seed=0).split(np.zeros(2))
