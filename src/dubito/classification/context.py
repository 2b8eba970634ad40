r"""Co-occurrence CRF over the objects of one scene (spec §2.10; a RECONSTRUCTION [R]).

The thesis (Feng 2019) motivates a CRF whose pairwise potentials are object co-occurrence
statistics (§1.2-1.4: "marker vs toothbrush; a calculator nearby makes 'marker' more likely",
"at most second-order potentials") but leaves Ch. 3 and §4.4 empty. What follows is the spec's
reconstruction after Rabinovich et al., "Objects in Context" (ICCV 2007) [RVG+07]; it is not
the thesis's method.

Model. A scene holds objects i = 1..n with predictive probabilities p̄_i = p̄(. | x_i) (MC
dropout, ensemble or Laplace; `dubito.predictive.ClassPredictive`). Over labels y ∈ {0..K-1}^n

    P(y | x) = (1/Z(x)) Π_i p̄_i(y_i)^α · Π_{i<j, A_ij = 1} exp( s_n Φ[y_i, y_j] ),
    s_n = w / (n - 1)   (``normalize=True``, spec §2.10; s_n = w otherwise),

with a symmetric K x K log-potential Φ from `CooccurrenceStatistics`, the weight w, the unary
power α (default 1) and the pairwise graph A (complete by default; an optional ``adjacency``
makes it sparse, e.g. a chain or a star, which the tests use for exactness of BP on trees; the
normalisation stays w/(n-1) whatever the graph). Dividing by n - 1 keeps the context term of
one node a *mean* over its neighbours, so it does not grow with the scene and swamp the
unaries (spec §2.10, pitfall 12; the spec's pilot: PMI without it collapses at w = 1).

Co-occurrence (`CooccurrenceStatistics.fit`, `dubito.classification.cooccurrence`) from label-only
training scenes (spec §2.10): smoothed counts C of ordered pairs of distinct objects per scene, and
Φ (``potential``) the symmetrised log-conditional ½ (log P(b | a) + log P(a | b)) (default) or the
PMI log P(a, b) / (P(a) P(b)).

Inference (`CooccurrenceCRF.refine`, node marginals P(y_i = c | x); `map_labels`, the MAP):

* ``"exact"``: enumerate the K^n configurations as one log-score tensor of shape (K,)*n (the
  unary and pairwise terms broadcast-added, vectorised), normalise by logsumexp, sum out the
  other axes. Refused (ValueError) above ``max_exact`` = 2·10^6 configurations (spec §2.10).
* ``"pruned"``: keep each node's ``top_k`` = 5 most probable unary labels (spec §2.10) and
  enumerate the top_k^n sub-configurations exactly; pruned labels get probability 0. With
  top_k = K it is ``"exact"``.
* ``"loopy"``: loopy belief propagation, sum-product in log space (max-product for the MAP)
  with a synchronous (flooding) schedule over all directed edges:
      m_{i→j}(b) = logsumexp_a [ α log p̄_i(a) + s_n Φ[a, b] + Σ_{k ∈ N(i) \ j} m_{k→i}(a) ],
  each message normalised (logsumexp = 0), then damped in log space
      m ← (1 - δ) m_new + δ m_old,  δ = ``damping`` = 0.5,  renormalised,
  stopped when max |m - m_old| < ``tol`` = 1e-6 (log-message units) or after ``max_iter`` =
  100 sweeps (all three spec §2.10); beliefs b_i ∝ α log p̄_i + Σ_k m_{k→i}. A scene that does
  not converge raises a `sklearn.exceptions.ConvergenceWarning` and is recorded in
  ``inference_info_`` (the last beliefs are returned). On a tree BP is exact; on the complete
  graph it is an approximation (the tests state its error on small scenes).
* ``"auto"`` (default): exact when K^n <= max_exact, else loopy. DEVIATION from the spec's
  order (exact, then pruned, then loopy; §2.10), by measurement (benchmarks/classification_crf.py,
  K = 10, Dirichlet(0.5) unaries, w = 0.5): top-5 pruning was off the exact marginals by up to
  0.18 at n = 3..6 while loopy BP was within 0.007, and loopy was faster from n = 7 on (4 ms vs
  5 ms at n = 7, 6 ms vs 170 ms at n = 9). Pruning stays available as ``inference="pruned"``.

Probabilities equal to 0 enter as log p = log(float64 tiny) ≈ -708.4 (finite, so no inf - inf
in BP and 0^α = 0 up to ~1e-308 relative).

Learning (`CooccurrenceCRF.fit_weight`, spec §2.10): a grid over w scored on labelled
validation scenes by the mean NLL of the CRF marginals (or accuracy), or maximum
pseudo-likelihood  PL(w, α) = Σ_scenes Σ_i log P(y_i | y_{-i}, x), concave in (w, α) because
the model is log-linear in them (L-BFGS-B; its gradient is checked by finite differences).

Everything is float64 numpy on the CPU (design.md: predictive parameters are float64 numpy;
no torch is involved, so there is no ``device``).
"""

from __future__ import annotations

import math
import warnings
from contextlib import nullcontext

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from dubito._validation import (
    check_bool,
    check_choice,
    check_float,
    check_int,
)
from dubito.classification.cooccurrence import (
    DEFAULT_SMOOTHING,
    POTENTIALS,
    CooccurrenceStatistics,
)
from dubito.classification.crf_inputs import (
    _is_predictive,
    adjacency_matrix,
    labelled_scenes,
    scene_list,
    scene_probs,
)
from dubito.classification.crf_kernels import (
    _log_joint,
    _loopy_bp,
    _pair_scale,
    _pl_features,
    _pl_value,
    _tensor_marginals,
    _unary_log,
)
from dubito.predictive.base import as_numpy
from dubito.predictive.classes import ClassPredictive

__all__ = [
    "DEFAULT_DAMPING",
    "DEFAULT_MAX_EXACT",
    "DEFAULT_MAX_ITER",
    "DEFAULT_SMOOTHING",
    "DEFAULT_TOL",
    "DEFAULT_TOP_K",
    "DEFAULT_WEIGHT",
    "DEFAULT_WEIGHT_GRID",
    "INFERENCE",
    "POTENTIALS",
    "CooccurrenceCRF",
    "CooccurrenceStatistics",
]

#: Largest number of configurations enumerated exactly (spec §2.10: "K^n <= 2·10^6").
DEFAULT_MAX_EXACT = 2_000_000
#: Labels kept per node by top-k pruning (spec §2.10: "k = 5").
DEFAULT_TOP_K = 5
#: Loopy BP: message damping, tolerance, sweeps (spec §2.10: "damping 0.5, <= 100 iterations, tolerance 1e-6").
DEFAULT_DAMPING = 0.5
DEFAULT_TOL = 1e-6
DEFAULT_MAX_ITER = 100
#: Default pairwise weight w (spec §5.2 pilot: w = 0.5 was the best of {0.5, 4} for the
#: log-conditional with the (n-1) normalisation). Tune it with `CooccurrenceCRF.fit_weight`.
DEFAULT_WEIGHT = 0.5
#: Default grid of ``fit_weight(method="grid")`` (our choice around the spec §5.2 pilot values
#: 0.5 (helps) and 4 (collapse sets in); 0 = no context).
DEFAULT_WEIGHT_GRID = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
#: Bounds of the pseudo-likelihood optimiser (our choice: beyond |w| = 100 every scene of a few
#: objects is collapsed; perfectly consistent data would otherwise send w to infinity).
_PL_MAX = 100.0
#: NLL floor of the grid score (= dubito.metrics.classification.NLL_FLOOR, spec §7.15).
_NLL_FLOOR = 1e-7

INFERENCE = ("auto", "exact", "pruned", "loopy")


class CooccurrenceCRF:
    r"""Fully connected pairwise CRF over one scene's objects (module docstring; spec §2.10 [R]).

    Parameters
    ----------
    potential : CooccurrenceStatistics or array (K, K)
        The co-occurrence statistics (their ``log_potential()`` is used) or Φ itself (finite,
        symmetric).
    weight : float, default 0.5
        Pairwise weight w (spec §5.2 pilot); w = 0 returns the (α-powered) unaries.
    unary_power : float >= 0, default 1
        α, the unary temperature (spec §2.10).
    normalize : bool, default True
        Scale the pairwise term by 1/(n-1) (spec §2.10).
    inference : {"auto", "exact", "pruned", "loopy"}, default "auto"
        "auto" = exact when K^n <= max_exact, else loopy (module docstring).
    max_exact : int, default 2·10^6
        Most configurations enumerated (exact or pruned); above it "exact" raises ValueError.
    top_k : int or None, default 5
        Labels kept per node by ``inference="pruned"`` (spec §2.10; None keeps all).
    damping, tol, max_iter : loopy BP settings (0.5, 1e-6, 100; spec §2.10).
    progress : bool, default False
        rich progress bar over scenes in ``refine_many``/``fit_weight`` (on stderr). Off by
        default: a scene takes ~0.1-10 ms.

    After each ``refine``/``refine_many``/``map_labels``, ``inference_info_`` holds one dict per
    scene: method, n_objects, n_configurations (enumerated), iterations/converged/delta (loopy).
    ``fit_weight`` sets ``weight`` (and ``unary_power`` with ``fit_unary_power=True``) and
    records ``weight_fit_``.
    """

    def __init__(self, potential, *, weight: float = DEFAULT_WEIGHT, unary_power: float = 1.0,
                 normalize: bool = True, inference: str = "auto", max_exact: int = DEFAULT_MAX_EXACT,
                 top_k: int | None = DEFAULT_TOP_K, damping: float = DEFAULT_DAMPING, tol: float = DEFAULT_TOL,
                 max_iter: int = DEFAULT_MAX_ITER, progress: bool = False):
        if isinstance(potential, CooccurrenceStatistics):
            self.statistics = potential
            phi = potential.log_potential()
        else:
            self.statistics = None
            phi = as_numpy(potential, "potential")
        if phi.ndim != 2 or phi.shape[0] != phi.shape[1] or phi.shape[0] < 2:
            raise ValueError(f"potential must be a (K, K) log-potential with K >= 2, got shape {phi.shape}")
        if not np.all(np.isfinite(phi)):
            raise ValueError("potential must be finite (smooth the co-occurrence counts: smoothing > 0)")
        if not np.allclose(phi, phi.T, rtol=0, atol=1e-10):
            raise ValueError("potential must be symmetric (Φ[a, b] = Φ[b, a]): the pairs of a scene are unordered")
        self.phi = 0.5 * (phi + phi.T)
        self.phi.setflags(write=False)
        self.n_classes = phi.shape[0]
        self.weight = weight
        self.unary_power = unary_power
        self.normalize = normalize
        self.inference = inference
        self.max_exact = max_exact
        self.top_k = top_k
        self.damping = damping
        self.tol = tol
        self.max_iter = max_iter
        self.progress = progress
        self.inference_info_: list[dict] = []

    # ------------------------------------------------------------------ settings and inputs
    def _settings(self) -> dict:
        check_bool(self.normalize, "normalize")
        check_bool(self.progress, "progress")
        damping = check_float(self.damping, "damping", min_value=0.0)
        if damping >= 1:
            raise ValueError(f"damping must lie in [0, 1), got {damping}")
        top_k = None if self.top_k is None else check_int(self.top_k, "top_k", min_value=1)
        return {
            "weight": check_float(self.weight, "weight"),
            "alpha": check_float(self.unary_power, "unary_power", min_value=0.0),
            "normalize": bool(self.normalize),
            "inference": check_choice(self.inference, "inference", INFERENCE),
            "max_exact": check_int(self.max_exact, "max_exact", min_value=1),
            "top_k": top_k,
            "damping": damping,
            "tol": check_float(self.tol, "tol", strictly_positive=True),
            "max_iter": check_int(self.max_iter, "max_iter", min_value=1),
        }

    @staticmethod
    def _count(k: int, n: int) -> str:
        """k^n as text (k ** n can exceed float range)."""
        return f"{k ** n:.3g}" if n * math.log10(k) < 300 else f"10^{n * math.log10(k):.0f}"

    def _method(self, s: dict, n: int) -> str:
        k, limit = self.n_classes, s["max_exact"]
        full = k ** n
        if s["inference"] == "exact":
            if full > limit:
                raise ValueError(
                    f"exact enumeration of a scene of {n} objects needs K^n = {k}^{n} = {self._count(k, n)} configurations, "
                    f"above max_exact = {limit:g}; use inference='loopy' (or 'pruned'/'auto'), or raise max_exact")
            return "exact"
        if s["inference"] == "pruned":
            kk = min(k, s["top_k"] or k)
            if kk ** n > limit:
                raise ValueError(
                    f"pruned enumeration of a scene of {n} objects needs top_k^n = {kk}^{n} = {self._count(kk, n)} "
                    f"configurations, above max_exact = {limit:g}; use inference='loopy' or a smaller top_k")
            return "pruned"
        if s["inference"] == "loopy":
            return "loopy"
        return "exact" if full <= limit else "loopy"  # "auto" (module docstring: no pruning)

    def _support(self, probs: np.ndarray, method: str, top_k: int | None) -> list[np.ndarray]:
        n, k = probs.shape
        if method == "exact" or top_k is None or top_k >= k:
            return [np.arange(k)] * n
        order = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]
        return [np.sort(row) for row in order]

    # ------------------------------------------------------------------ one scene
    def _run(self, probs: np.ndarray, adj: np.ndarray, s: dict, mode: str):
        n, k = probs.shape
        theta = _unary_log(probs, s["alpha"])
        psi = _pair_scale(n, s["weight"], s["normalize"]) * self.phi
        method = self._method(s, n)
        info = {"method": method, "n_objects": n}
        if method == "loopy":
            beliefs, it, conv, delta = _loopy_bp(theta, psi, adj, damping=s["damping"], tol=s["tol"],
                                                 max_iter=s["max_iter"], mode=mode)
            info.update(iterations=it, converged=conv, delta=delta, n_configurations=0)
            if mode == "sum":
                out = np.exp(beliefs)
                return out / out.sum(axis=1, keepdims=True), info
            return np.argmax(beliefs, axis=1), info
        support = self._support(probs, method, s["top_k"])
        L = _log_joint(theta, psi, adj, support)
        info.update(n_configurations=int(L.size), converged=True)
        if mode == "sum":
            return _tensor_marginals(L, support, k), info
        flat = np.unravel_index(int(np.argmax(L)), L.shape)
        return np.array([support[i][flat[i]] for i in range(n)], dtype=np.int64), info

    def _warn(self, infos: list[dict]) -> None:
        bad = [i for i, d in enumerate(infos) if not d.get("converged", True)]
        if bad:
            worst = max(infos[i]["delta"] for i in bad)
            warnings.warn(
                f"loopy belief propagation did not converge in {self.max_iter} sweeps (tol {self.tol:g}) on "
                f"{len(bad)} of {len(infos)} scene(s) (first: scene {bad[0]}; largest last message change "
                f"{worst:.3g}); their last beliefs are returned. Raise max_iter or damping, or lower the weight",
                ConvergenceWarning, stacklevel=3)

    def refine(self, probs, adjacency=None):
        r"""Node marginals P(y_i = c | x) of one scene, shape (n_objects, K).

        ``probs``: (n_objects, K) predictive probabilities p̄_i (rows summing to 1), or a
        `ClassPredictive` of N = n_objects inputs, in which case a ClassPredictive of the
        marginals is returned (one draw: the CRF marginals are a single distribution, so its
        mutual information is 0). ``adjacency``: optional (n, n) symmetric 0/1 matrix with a zero
        diagonal; None = complete graph.
        """
        s = self._settings()
        p = scene_probs(probs, self.n_classes)
        adj = adjacency_matrix(adjacency, p.shape[0])
        out, info = self._run(p, adj, s, "sum")
        self.inference_info_ = [info]
        self._warn(self.inference_info_)
        return ClassPredictive(out) if _is_predictive(probs) else out

    def map_labels(self, probs, adjacency=None) -> np.ndarray:
        """MAP labels (n_objects,) of one scene: argmax of the enumerated joint (exact/pruned) or
        of the max-product beliefs (loopy; exact on trees with a unique MAP)."""
        s = self._settings()
        p = scene_probs(probs, self.n_classes)
        adj = adjacency_matrix(adjacency, p.shape[0])
        out, info = self._run(p, adj, s, "max")
        self.inference_info_ = [info]
        self._warn(self.inference_info_)
        return out

    def log_joint(self, probs, adjacency=None) -> np.ndarray:
        """The normalised log P(y | x) of every configuration, a tensor of shape (K,)*n by exact
        enumeration (refused above ``max_exact``); e.g. to sample scenes from the CRF."""
        s = self._settings()
        p = scene_probs(probs, self.n_classes)
        n = p.shape[0]
        adj = adjacency_matrix(adjacency, n)
        s = dict(s, inference="exact")
        self._method(s, n)
        psi = _pair_scale(n, s["weight"], s["normalize"]) * self.phi
        return _log_joint(_unary_log(p, s["alpha"]), psi, adj, [np.arange(self.n_classes)] * n)

    # ------------------------------------------------------------------ many scenes
    def _bar(self, total: int, description: str):
        if not self.progress:
            return nullcontext(None)

        return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=Console(stderr=True))

    def _refine_arrays(self, probs_list: list[np.ndarray], s: dict, description: str) -> list[np.ndarray]:
        outs, infos = [], []
        with self._bar(len(probs_list), description) as bar:
            task = bar.add_task(description, total=len(probs_list)) if bar is not None else None
            for p in probs_list:
                out, info = self._run(p, ~np.eye(p.shape[0], dtype=bool), s, "sum")
                outs.append(out)
                infos.append(info)
                if bar is not None:
                    bar.update(task, advance=1)
        self.inference_info_ = infos
        return outs

    def refine_many(self, scenes, *, scene_ids=None):
        """Refine many scenes (complete graphs).

        * ``refine_many([probs_0, probs_1, ...])``: a list of (n_s, K) arrays or ClassPredictives
          -> a list of the same kinds;
        * ``refine_many(probs, scene_ids=ids)``: one (N, K) array or ClassPredictive of all
          objects and an (N,) array naming each object's scene -> (N, K) marginals (or a
          ClassPredictive) in the input order.
        """
        s = self._settings()
        if scene_ids is not None:
            p = scene_probs(scenes, self.n_classes, "probs")
            ids = np.asarray(as_numpy(scene_ids, "scene_ids") if hasattr(scene_ids, "detach") else scene_ids)
            if ids.shape != (p.shape[0],):
                raise ValueError(f"scene_ids must have shape ({p.shape[0]},) (one scene id per object), got {ids.shape}")
            out = np.empty_like(p)
            _, inverse = np.unique(ids, return_inverse=True)
            groups = [np.flatnonzero(inverse == g) for g in range(inverse.max() + 1)]
            refined = self._refine_arrays([p[g] for g in groups], s, "CRF scenes")
            for g, r in zip(groups, refined):
                out[g] = r
            self._warn(self.inference_info_)
            return ClassPredictive(out) if _is_predictive(scenes) else out
        raw, probs_list = scene_list(scenes, self.n_classes)
        refined = self._refine_arrays(probs_list, s, "CRF scenes")
        self._warn(self.inference_info_)
        return [ClassPredictive(r) if _is_predictive(sc) else r for sc, r in zip(raw, refined)]

    # ------------------------------------------------------------------ learning w
    def pseudo_log_likelihood(self, scenes, labels, *, weight=None, unary_power=None) -> tuple[float, np.ndarray]:
        r"""PL(w, α) = Σ_scenes Σ_i log P(y_i | y_{-i}, x) and its gradient (∂/∂w, ∂/∂α) (spec §2.10).

        P(y_i = c | y_{-i}, x) ∝ p̄_i(c)^α exp( s_n Σ_{j≠i} Φ[c, y_j] ) on the complete graph, so
        PL is concave in (w, α) and ∂PL/∂θ = Σ_i (f_i(y_i) - E_{P(c | y_-i)} f_i(c)) with the features
        f_i(c) = ((1/(n-1)) Σ_{j≠i} Φ[c, y_j], log p̄_i(c)). Defaults: the current weight and unary_power.
        """
        s = self._settings()
        w = s["weight"] if weight is None else check_float(weight, "weight")
        a = s["alpha"] if unary_power is None else check_float(unary_power, "unary_power", min_value=0.0)
        probs_list, ys = labelled_scenes(scenes, labels, self.n_classes)
        U, P, y = _pl_features(self.phi, probs_list, ys, s["normalize"])
        return _pl_value(U, P, y, w, a)

    def fit_weight(self, scenes, labels, *, method: str = "grid", grid=None, score: str = "nll",
                   fit_unary_power: bool = False) -> CooccurrenceCRF:
        r"""Choose the pairwise weight w on labelled validation scenes (spec §2.10); returns self.

        * ``method="grid"``: refine every scene at each w of ``grid`` (default
          ``DEFAULT_WEIGHT_GRID``) and keep the w with the lowest mean NLL of the marginals at the
          true labels (floored at 1e-7, spec §7.15) or, with ``score="accuracy"``, the highest
          accuracy of argmax marginals; ties -> the smallest w.
        * ``method="pseudo-likelihood"``: maximise PL(w) (and α with ``fit_unary_power``) by
          L-BFGS-B from w = 0, |w| <= 100, 0 <= α <= 100 (concave, so the start does not matter).

        Sets ``self.weight`` (and ``self.unary_power``) and ``self.weight_fit_`` (the scores or
        the optimiser's result).
        """

        method = check_choice(method, "method", ("grid", "pseudo-likelihood"))
        score = check_choice(score, "score", ("nll", "accuracy"))
        check_bool(fit_unary_power, "fit_unary_power")
        s = self._settings()
        probs_list, ys = labelled_scenes(scenes, labels, self.n_classes)
        if method == "grid":
            if fit_unary_power:
                raise ValueError("fit_unary_power is only available with method='pseudo-likelihood'")
            g = np.asarray(DEFAULT_WEIGHT_GRID if grid is None else grid, dtype=np.float64).ravel()
            if g.size == 0 or not np.all(np.isfinite(g)):
                raise ValueError("grid must be a non-empty sequence of finite weights")
            yy = np.concatenate(ys)
            scores = []
            for w in g:
                refined = np.concatenate(self._refine_arrays(probs_list, dict(s, weight=float(w)), f"CRF grid w={w:g}"))
                if score == "nll":
                    scores.append(float(-np.mean(np.log(np.maximum(refined[np.arange(yy.size), yy], _NLL_FLOOR)))))
                else:
                    scores.append(float(np.mean(refined.argmax(axis=1) == yy)))
            scores = np.array(scores)
            best = int(np.argmin(scores) if score == "nll" else np.argmax(scores))
            ties = np.flatnonzero(scores == scores[best])
            best = int(ties[np.argmin(g[ties])])
            self.weight = float(g[best])
            self.weight_fit_ = {"method": "grid", "score": score, "grid": g, "scores": scores, "weight": self.weight}
            return self
        U, P, y = _pl_features(self.phi, probs_list, ys, s["normalize"])
        alpha0 = s["alpha"]

        def objective(theta):
            w, a = (theta[0], theta[1]) if fit_unary_power else (theta[0], alpha0)
            value, grad = _pl_value(U, P, y, w, a)
            return -value, -(grad if fit_unary_power else grad[:1])

        x0 = np.array([0.0, alpha0]) if fit_unary_power else np.array([0.0])
        bounds = [(-_PL_MAX, _PL_MAX), (0.0, _PL_MAX)] if fit_unary_power else [(-_PL_MAX, _PL_MAX)]
        res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
        if not res.success:
            warnings.warn(f"pseudo-likelihood optimisation did not converge: {res.message}", ConvergenceWarning,
                          stacklevel=2)
        self.weight = float(res.x[0])
        if fit_unary_power:
            self.unary_power = float(res.x[1])
        self.weight_fit_ = {"method": "pseudo-likelihood", "weight": self.weight, "unary_power": self.unary_power,
                            "pseudo_log_likelihood": float(-res.fun), "n_nodes": int(y.size), "result": res}
        return self

    def __repr__(self) -> str:
        return (f"CooccurrenceCRF(K={self.n_classes}, weight={self.weight!r}, unary_power={self.unary_power!r}, "
                f"inference={self.inference!r})")
