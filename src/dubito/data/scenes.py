"""Synthetic multi-object scenes with co-occurrence structure, for the context CRF (spec §5.1 item 3).

The spec's construction [R, a reconstruction: the thesis has no scene data]:

* ``n_types`` (4-6) scene types, each a class distribution ``pi_t`` with ``typical_mass`` (~0.9) on
  ``typical_per_type`` (3-4) "typical" classes, spread evenly over them, and the rest spread evenly
  over the other classes (`make_scene_types`);
* the most-confused class pairs of the source model (`most_confused_pairs` of its confusion matrix
  on the adaptation pool; `FASHION_CONFUSED_PAIRS` as a default for Fashion-MNIST) are placed in
  **different** scene types: the two classes of a pair are never both typical of one type (the
  marker/toothbrush analogue: context tells them apart);
* a scene: its type ``t`` drawn from ``weights`` (uniform), its size ``n ~ U{3..6}``, its ``n``
  object labels drawn i.i.d. from ``pi_t`` (a class may repeat, spec pitfall 12; ``repeats=False``
  draws distinct classes instead) (`sample_scenes`);
* ~2,000 label-only training scenes give the co-occurrence statistics; validation scenes take their
  images from the adaptation pool and test scenes from the final evaluation set (`make_scene_benchmark`,
  ``pool_labels``: each object gets a row of the pool with its label);
* ``context="weak"``: overlapping scene types (6 typical classes per type, 0.6 mass), same pair rule.

Co-occurrence: `Scenes.pair_counts` are the raw ordered-pair counts of distinct objects
``sum_scenes sum_{i != j} 1[y_i = a, y_j = b]`` (= ``M^T M - diag(sum_s M_s)`` with ``M`` the
scenes x classes count matrix), what ``dubito.classification.context.CooccurrenceStatistics(
pair_counts)`` takes (it adds the smoothing ``s0``); `Scenes.labels_per_scene` is what its ``fit``
takes. With i.i.d. objects, two distinct objects of one scene have labels ``(a, b)`` with
probability ``sum_t w_t pi_t[a] pi_t[b]`` whatever the scene size, so the normalised pair counts
converge to `SceneTypes.pair_distribution` (the generating distribution; tests check it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

__all__ = [
    "CONTEXT_PRESETS",
    "FASHION_CONFUSED_PAIRS",
    "SceneBenchmark",
    "SceneTypes",
    "Scenes",
    "make_scene_benchmark",
    "make_scene_types",
    "most_confused_pairs",
    "sample_scenes",
]

# [R] Fashion-MNIST's well-known confusions (shirt/T-shirt, pullover/coat, shirt/coat, shirt/pullover,
# sneaker/ankle boot): a default when no confusion matrix of the source model is at hand.
FASHION_CONFUSED_PAIRS = ((0, 6), (2, 4), (4, 6), (2, 6), (7, 9))

# spec §5.1: strong context = ~0.9 mass on 3-4 typical classes; weak = overlapping types [R: 6 at 0.6]
CONTEXT_PRESETS = {
    "strong": {"typical_per_type": 3, "typical_mass": 0.9},
    "weak": {"typical_per_type": 6, "typical_mass": 0.6},
}


def _int(v, what: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
        raise ValueError(f"{what} must be an int >= {lo}, got {v!r}")
    return int(v)


def _rng(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def _check_pairs(pairs, n_classes: int) -> tuple[tuple[int, int], ...]:
    out = []
    try:
        items = list(pairs)
    except TypeError:
        raise ValueError(f"confused_pairs must be a sequence of (a, b) class pairs, got {pairs!r}") from None
    for p in items:
        try:
            a, b = p
        except (TypeError, ValueError):
            raise ValueError(f"confused pair {p!r} is not an (a, b) pair") from None
        for c in (a, b):
            if isinstance(c, bool) or not isinstance(c, Integral) or not 0 <= c < n_classes:
                raise ValueError(f"confused pair {p!r}: classes must be ints in 0..{n_classes - 1}")
        if a == b:
            raise ValueError(f"confused pair {p!r} pairs a class with itself")
        key = (min(int(a), int(b)), max(int(a), int(b)))
        if key not in out:
            out.append(key)
    return tuple(out)


def most_confused_pairs(confusion, n_pairs: int = 5) -> list[tuple[int, int]]:
    """The ``n_pairs`` unordered class pairs ``(a, b)``, ``a < b``, with the largest symmetric
    confusion ``C[a, b] + C[b, a]`` (``C[i, j]`` = count of true ``i`` predicted ``j``), largest
    first, ties by class index; pairs never confused are left out (spec §5.1: pilot 1-8, 2-3, ...)."""
    C = np.asarray(confusion, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 2:
        raise ValueError(f"confusion must be a square (K, K) matrix with K >= 2, got shape {C.shape}")
    if not np.all(np.isfinite(C)) or np.any(C < 0):
        raise ValueError("confusion must hold finite, non-negative counts")
    n_pairs = _int(n_pairs, "n_pairs", 0)
    S = C + C.T
    a, b = np.triu_indices(C.shape[0], k=1)
    vals = S[a, b]
    order = np.lexsort((b, a, -vals))  # by value desc, then a, then b
    return [(int(a[i]), int(b[i])) for i in order[:n_pairs] if vals[i] > 0]


# ------------------------------------------------------------------------------ scene types


@dataclass(frozen=True, eq=False)
class SceneTypes:
    """Scene types: ``probs`` (T, K), row t = the class distribution pi_t of scene type t;
    ``typical`` (T tuples) its typical classes; ``weights`` (T,) the scene-type prior;
    ``confused_pairs`` the pairs kept apart (never both typical of one type)."""

    probs: np.ndarray
    typical: tuple[tuple[int, ...], ...]
    weights: np.ndarray
    confused_pairs: tuple[tuple[int, int], ...] = ()
    typical_mass: float = 0.9
    context: str = "custom"

    def __post_init__(self) -> None:
        P = np.array(self.probs, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] < 1 or P.shape[1] < 2:
            raise ValueError(f"probs must be (n_types, n_classes) with n_classes >= 2, got shape {P.shape}")
        if not np.all(np.isfinite(P)) or np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0, atol=1e-9):
            raise ValueError("each row of probs must be a probability distribution over the classes")
        w = np.array(self.weights, dtype=np.float64)
        if w.shape != (P.shape[0],) or np.any(w < 0) or not np.isclose(w.sum(), 1.0, atol=1e-9):
            raise ValueError(f"weights must be a distribution over the {P.shape[0]} scene types")
        if len(self.typical) != P.shape[0]:
            raise ValueError("typical must list the typical classes of every scene type")
        pairs = _check_pairs(self.confused_pairs, P.shape[1])
        for t, typ in enumerate(self.typical):
            s = set(typ)
            for a, b in pairs:
                if a in s and b in s:
                    raise ValueError(f"confused pair ({a}, {b}) is typical of the same scene type {t}")
        P.setflags(write=False)
        w.setflags(write=False)
        object.__setattr__(self, "probs", P)
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "typical", tuple(tuple(int(c) for c in typ) for typ in self.typical))
        object.__setattr__(self, "confused_pairs", pairs)

    @property
    def n_types(self) -> int:
        return self.probs.shape[0]

    @property
    def n_classes(self) -> int:
        return self.probs.shape[1]

    def pair_distribution(self) -> np.ndarray:
        """P(a, b) = sum_t w_t pi_t[a] pi_t[b]: the labels of two distinct objects of one scene
        (i.i.d. objects, ``repeats=True``), the limit of the normalised `Scenes.pair_counts`."""
        return np.einsum("t,ta,tb->ab", self.weights, self.probs, self.probs)

    def conditional(self) -> np.ndarray:
        """P(b | a) = P(a, b) / P(a) (rows sum to 1): the generating conditional co-occurrence."""
        J = self.pair_distribution()
        return J / J.sum(axis=1, keepdims=True)

    def types_of(self, c: int) -> list[int]:
        """Scene types in which class ``c`` is typical."""
        return [t for t, typ in enumerate(self.typical) if c in typ]


def _place(n_classes: int, n_types: int, m: int, conflicts: list[set[int]], rng, max_tries: int = 500):
    """Every class in >= 1 type, types of size <= m, no conflicting pair inside a type; then top the
    types up to m with non-conflicting classes (fewest types first). Randomised greedy, restarts."""
    for _ in range(max_tries):
        groups: list[set[int]] = [set() for _ in range(n_types)]
        ok = True
        # most-constrained classes first, random among equals
        order = sorted(rng.permutation(n_classes).tolist(), key=lambda c: -len(conflicts[c]))
        for c in order:
            cands = [t for t in range(n_types) if len(groups[t]) < m and not (groups[t] & conflicts[c])]
            if not cands:
                ok = False
                break
            sizes = np.array([len(groups[t]) for t in cands])
            best = [t for t, s in zip(cands, sizes) if s == sizes.min()]
            groups[best[int(rng.integers(len(best)))]].add(c)
        if not ok:
            continue
        n_in = np.array([sum(c in g for g in groups) for c in range(n_classes)])
        for t in rng.permutation(n_types).tolist():
            while len(groups[t]) < m:
                cands = [c for c in range(n_classes) if c not in groups[t] and not (groups[t] & conflicts[c])]
                if not cands:
                    break
                counts = n_in[cands]
                best = [c for c, k in zip(cands, counts) if k == counts.min()]
                c = best[int(rng.integers(len(best)))]
                groups[t].add(c)
                n_in[c] += 1
        return [tuple(sorted(g)) for g in groups]
    return None


def make_scene_types(n_classes: int, confused_pairs: Sequence[tuple[int, int]] = (), *, n_types: int = 4,
                     context: str = "strong", typical_per_type: int | None = None,
                     typical_mass: float | None = None, seed=0) -> SceneTypes:
    """``n_types`` scene types over ``n_classes`` classes (spec §5.1): each class typical of at least
    one type, ``typical_per_type`` typical classes per type (fewer only where the pair rule leaves no
    choice) holding ``typical_mass`` in total (evenly), the rest spread evenly over the other classes;
    no ``confused_pairs`` pair typical of one type. ``context`` "strong" (3 typical, 0.9 mass) or
    "weak" (6 typical, 0.6: overlapping types) sets the defaults; explicit values override them.
    Uniform type weights. Seeded randomised placement; ValueError when the pairs cannot be separated.
    """
    n_classes = _int(n_classes, "n_classes", 2)
    n_types = _int(n_types, "n_types", 1)
    if context not in CONTEXT_PRESETS:
        raise ValueError(f"context must be one of {sorted(CONTEXT_PRESETS)}, got {context!r}")
    preset = CONTEXT_PRESETS[context]
    m = preset["typical_per_type"] if typical_per_type is None else _int(typical_per_type, "typical_per_type", 1)
    mass = preset["typical_mass"] if typical_mass is None else typical_mass
    if isinstance(mass, bool) or not isinstance(mass, Real) or not 0 < mass <= 1:
        raise ValueError(f"typical_mass must be a number in (0, 1], got {mass!r}")
    if m > n_classes:
        raise ValueError(f"typical_per_type={m} exceeds the {n_classes} classes")
    if m * n_types < n_classes:
        raise ValueError(f"{n_types} scene types x {m} typical classes = {m * n_types} slots cannot cover "
                         f"{n_classes} classes; raise n_types or typical_per_type")
    pairs = _check_pairs(confused_pairs, n_classes)
    conflicts: list[set[int]] = [set() for _ in range(n_classes)]
    for a, b in pairs:
        conflicts[a].add(b)
        conflicts[b].add(a)
    rng = _rng(seed)
    groups = _place(n_classes, n_types, m, conflicts, rng)
    if groups is None:
        raise ValueError(f"cannot place the confused pairs {list(pairs)} in different types among {n_types} scene "
                         f"types of {m} typical classes each; raise n_types or pass fewer pairs")
    P = np.empty((n_types, n_classes))
    for t, g in enumerate(groups):
        rest = n_classes - len(g)
        P[t] = (1.0 - mass) / rest if rest else 0.0
        P[t, list(g)] = mass / len(g) if rest else 1.0 / len(g)
    return SceneTypes(P, tuple(groups), np.full(n_types, 1.0 / n_types), pairs, float(mass), context)


# ----------------------------------------------------------------------------------- scenes


@dataclass(eq=False)
class Scenes:
    """Scenes in flat form: scene ``s`` holds the objects ``offsets[s]:offsets[s+1]`` of ``labels``.

    ``scene_type`` (n_scenes,) the generating type; ``object_index`` (n_objects,) the row of each
    object's image in its pool (None for label-only scenes); ``n_classes`` K.
    """

    labels: np.ndarray
    offsets: np.ndarray
    scene_type: np.ndarray
    n_classes: int
    object_index: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64)
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.scene_type = np.asarray(self.scene_type, dtype=np.int64)
        if self.offsets.ndim != 1 or self.offsets.size < 2 or self.offsets[0] != 0 or self.offsets[-1] != self.labels.size:
            raise ValueError("offsets must run from 0 to the number of objects, one entry per scene plus one")
        if np.any(np.diff(self.offsets) < 1):
            raise ValueError("every scene must hold at least one object (an empty scene was given)")
        if self.scene_type.shape != (self.offsets.size - 1,):
            raise ValueError("scene_type must have one entry per scene")
        if self.labels.size and (self.labels.min() < 0 or self.labels.max() >= self.n_classes):
            raise ValueError(f"labels must lie in 0..{self.n_classes - 1}")
        if self.object_index is not None:
            self.object_index = np.asarray(self.object_index, dtype=np.int64)
            if self.object_index.shape != self.labels.shape:
                raise ValueError("object_index must have one entry per object")

    def __len__(self) -> int:
        return self.offsets.size - 1

    @property
    def n_scenes(self) -> int:
        return len(self)

    @property
    def n_objects(self) -> int:
        return int(self.labels.size)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def scene_of(self) -> np.ndarray:
        """Scene id of every object (n_objects,)."""
        return np.repeat(np.arange(len(self)), self.sizes)

    def scene(self, s: int) -> np.ndarray:
        """Labels of scene ``s``."""
        if isinstance(s, bool) or not isinstance(s, Integral) or not 0 <= s < len(self):
            raise IndexError(f"scene {s!r} does not exist ({len(self)} scenes)")
        return self.labels[self.offsets[s]: self.offsets[s + 1]]

    def split(self, values) -> list[np.ndarray]:
        """Per-object ``values`` (first axis n_objects, e.g. predicted probabilities of each object's
        image, ``probs[scenes.object_index]``) cut into one array per scene."""
        v = np.asarray(values)
        if v.ndim == 0 or v.shape[0] != self.n_objects:
            raise ValueError(f"values must have {self.n_objects} rows (one per object), got shape {v.shape}")
        return np.split(v, self.offsets[1:-1])

    def labels_per_scene(self) -> list[np.ndarray]:
        """One label array per scene (``CooccurrenceStatistics.fit``'s input)."""
        return self.split(self.labels)

    def class_counts(self) -> np.ndarray:
        """(n_scenes, K) number of objects of each class in each scene."""
        M = np.zeros((len(self), self.n_classes), dtype=np.int64)
        np.add.at(M, (self.scene_of, self.labels), 1)
        return M

    def pair_counts(self) -> np.ndarray:
        """Raw co-occurrence counts (K, K): ordered pairs of distinct objects of one scene,
        ``sum_s (c_s c_s^T - diag(c_s))`` with ``c_s`` the class counts of scene s (spec §2.10 before
        smoothing); symmetric; total ``sum_s n_s (n_s - 1)``."""
        M = self.class_counts().astype(np.float64)
        return M.T @ M - np.diag(M.sum(axis=0))


def _check_size_range(size_range) -> tuple[int, int]:
    try:
        lo, hi = size_range
    except (TypeError, ValueError):
        raise ValueError(f"size_range must be (min, max) scene sizes, got {size_range!r}") from None
    lo, hi = _int(lo, "size_range min", 1), _int(hi, "size_range max", 1)
    if lo > hi:
        raise ValueError(f"size_range min {lo} exceeds max {hi}")
    return lo, hi


def sample_scenes(scene_types: SceneTypes, n_scenes: int, *, size_range=(3, 6), seed=0, repeats: bool = True,
                  pool_labels=None) -> Scenes:
    """Draw ``n_scenes`` scenes: type ``t ~ weights``, size ``n ~ U{size_range}`` (both ends
    included; spec: U{3..6}), labels i.i.d. from ``pi_t`` (``repeats=False``: ``n`` distinct classes,
    successive sampling without replacement from ``pi_t`` via Gumbel top-k).

    ``pool_labels`` (labels of an image pool, e.g. the adaptation pool or the evaluation set): each
    object also gets the row of an image of its class (`Scenes.object_index`), walking through a
    seeded permutation of that class's rows so images are reused only once all of the class's
    images have been used (a scene never shows one image twice unless its class has fewer images
    than the scene has objects of it). A class the scenes need but the pool lacks raises ValueError.
    """
    if not isinstance(scene_types, SceneTypes):
        raise ValueError(f"scene_types must be a SceneTypes (make_scene_types), got {type(scene_types).__name__}")  # noqa: TRY004
    n_scenes = _int(n_scenes, "n_scenes", 1)
    lo, hi = _check_size_range(size_range)
    K = scene_types.n_classes
    if not repeats and hi > K:
        raise ValueError(f"repeats=False: scenes of up to {hi} objects need at least {hi} classes, there are {K}")
    rng = _rng(seed)
    types = rng.choice(scene_types.n_types, size=n_scenes, p=scene_types.weights)
    sizes = rng.integers(lo, hi + 1, size=n_scenes)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n_obj = int(offsets[-1])
    obj_type = np.repeat(types, sizes)
    if repeats:
        # inverse-CDF draws, vectorised over objects
        cdf = np.cumsum(scene_types.probs, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random(n_obj)
        labels = (u[:, None] > cdf[obj_type]).sum(axis=1)
    else:
        with np.errstate(divide="ignore"):
            logp = np.log(scene_types.probs)
        g = logp[types][:, :] + rng.gumbel(size=(n_scenes, K))
        ranked = np.argsort(-g, axis=1, kind="stable")
        pos = np.arange(n_obj) - np.repeat(offsets[:-1], sizes)
        labels = ranked[np.repeat(np.arange(n_scenes), sizes), pos]
        if np.any(~np.isfinite(g[np.repeat(np.arange(n_scenes), sizes), labels])):
            raise ValueError("repeats=False: a scene type has fewer classes with positive probability than a scene has objects")
    labels = labels.astype(np.int64)
    object_index = None
    meta = {"size_range": (lo, hi), "repeats": bool(repeats), "context": scene_types.context}
    if pool_labels is not None:
        object_index = _assign_pool(labels, pool_labels, K, rng)
        meta["pool_size"] = int(np.asarray(pool_labels).size)
    return Scenes(labels, offsets, types, K, object_index, meta)


def _assign_pool(labels: np.ndarray, pool_labels, K: int, rng) -> np.ndarray:
    pool = np.asarray(pool_labels)
    if pool.ndim != 1 or pool.size == 0:
        raise ValueError(f"pool_labels must be a non-empty 1-D array of class labels, got shape {pool.shape}")
    if pool.dtype.kind not in "iu":
        if pool.dtype.kind == "f" and np.all(pool == np.round(pool)):
            pool = pool.astype(np.int64)
        else:
            raise ValueError(f"pool_labels must hold integer class labels, got dtype {pool.dtype}")
    if pool.min() < 0 or pool.max() >= K:
        raise ValueError(f"pool_labels must lie in 0..{K - 1}")
    out = np.empty(labels.size, dtype=np.int64)
    for c in np.unique(labels):
        rows = np.flatnonzero(pool == c)
        if rows.size == 0:
            raise ValueError(f"the scenes need objects of class {int(c)} but pool_labels has no image of it")
        where = np.flatnonzero(labels == c)
        reps = -(-where.size // rows.size)
        walk = np.concatenate([rng.permutation(rows) for _ in range(reps)])
        out[where] = walk[: where.size]
    return out


# -------------------------------------------------------------------------------- benchmark


@dataclass(eq=False)
class SceneBenchmark:
    """The spec's scene set-up: ``types``; ``train`` (label-only scenes for the co-occurrence
    statistics); ``val`` (objects are rows of the adaptation pool); ``test`` (rows of the final
    evaluation set)."""

    types: SceneTypes
    train: Scenes
    val: Scenes
    test: Scenes


def make_scene_benchmark(n_classes: int, *, val_labels, test_labels, confusion=None, confused_pairs=None,
                         n_pairs: int = 5, n_types: int = 4, context: str = "strong", n_train: int = 2000,
                         n_val: int = 500, n_test: int = 1000, size_range=(3, 6), seed: int = 0) -> SceneBenchmark:
    """Scene types from the most-confused pairs (``confused_pairs``, else the top ``n_pairs`` of
    ``confusion``, else none), then ``n_train`` label-only training scenes, ``n_val`` scenes over the
    pool with labels ``val_labels`` (the adaptation pool) and ``n_test`` over ``test_labels`` (the
    final evaluation set); independent seeds ``SeedSequence([seed, part])`` (spec §5.1 defaults)."""
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if confused_pairs is None:
        confused_pairs = most_confused_pairs(confusion, n_pairs) if confusion is not None else ()
    types = make_scene_types(n_classes, confused_pairs, n_types=n_types, context=context,
                             seed=np.random.default_rng([int(seed), 0]))
    train = sample_scenes(types, n_train, size_range=size_range, seed=np.random.default_rng([int(seed), 1]))
    val = sample_scenes(types, n_val, size_range=size_range, seed=np.random.default_rng([int(seed), 2]),
                        pool_labels=val_labels)
    test = sample_scenes(types, n_test, size_range=size_range, seed=np.random.default_rng([int(seed), 3]),
                         pool_labels=test_labels)
    return SceneBenchmark(types, train, val, test)
