r"""Predictive over K classes from T draws of class probabilities (MC dropout, ensembles, Laplace).

Draws p_t(y | x_i), t = 1..T (shape (T, N, K); (N, K) is read as T = 1) give

* ``probs``               p̄_i = (1/T) sum_t p_t(. | x_i)                          (thesis eq. 2.23)
* ``confidence``          max_c p̄_ic,                range [1/K, 1]                (thesis eq. 4.1)
* ``predictive_entropy``  H[p̄_i] = -sum_c p̄_ic log p̄_ic,  range [0, log K]        (thesis eq. 4.2)
* ``expected_entropy``    (1/T) sum_t H[p_t(. | x_i)]  (the aleatoric part)
* ``mutual_information``  H[p̄_i] - (1/T) sum_t H[p_t],  0 <= MI <= min(H, log T)  (thesis eq. 4.3)
* ``variation_ratio``     1 - max_c #{t : argmax p_t = c} / T,  range [0, 1 - 1/K] (spec §2.8 [R])

Logs are natural (nats) and 0 log 0 = 0 (``scipy.special.xlogy``), so one-hot draws give
finite measures. MI is clipped at 0: it is >= 0 exactly (entropy is concave), but the
difference of two float64 sums can come out at about -1e-16. All arrays are float64 numpy
(design.md: predictive parameters are float64 on the CPU).

The draws are reduced at construction, chunk by chunk over the inputs, to p̄, log p̄, the
expected entropy and the per-draw argmax votes; the (T, N, K) array is not kept, so a float32
torch tensor of draws never exists as a whole float64 copy. ``pool`` combines predictives as
if their draws had been concatenated (an ensemble of M members with T passes each = M·T
draws, spec §2.6).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp, xlogy

from dubito.predictive.base import as_numpy

__all__ = ["ClassPredictive", "PROB_ATOL"]

#: Tolerance on |sum_c p_tic - 1| for probability draws (our choice): float32 softmax outputs
#: sum to 1 within ~1e-7 sqrt(K), i.e. well inside 1e-5 for K up to ~10^4. Rows within the
#: tolerance are renormalised to sum to 1 in float64.
PROB_ATOL = 1e-5

#: Elements (T * n * K) converted to float64 at once while reducing the draws.
_CHUNK_ELEMENTS = 2**22


def _is_tensor(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu")


def _as_array_like(x, name: str):
    """A torch tensor stays (sliced lazily); anything else becomes a float64 ndarray."""
    if _is_tensor(x) or isinstance(x, np.ndarray):
        if not _is_tensor(x) and x.dtype.kind not in "biuf":
            return as_numpy(x, name)
        return x
    return as_numpy(x, name)


class ClassPredictive:
    r"""Predictive distribution over ``n_classes`` classes at N inputs, from T probability draws.

    ``ClassPredictive(probs_draws)``: probabilities of shape (T, N, K), or (N, K) for T = 1,
    as a numpy array or torch tensor (any device or dtype). Each draw must be a probability
    vector: no NaN or inf, no negative entry, sum within ``atol`` (default ``PROB_ATOL`` =
    1e-5) of 1; anything else raises one ``ValueError`` naming every problem found. Rows
    within the tolerance are renormalised. ``ClassPredictive.from_logits(logits_draws)``
    takes unnormalised log-probabilities (stable log-softmax; log p̄ kept in log space).

    Measures (module docstring) are properties of shape (N,); ``probs`` and ``log_probs`` are
    (N, K); ``predict()`` gives argmax p̄ (ties -> the lowest class index). ``pred[idx]``
    restricts to inputs (int, slice, boolean mask, integer array); ``len(pred)`` = N.
    """

    #: The uncertainty/certainty measures, by name (``measure(name)``).
    MEASURES = ("confidence", "predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio")

    def __init__(self, probs_draws, *, atol: float = PROB_ATOL):
        self._build(probs_draws, from_logits=False, atol=float(atol))

    @classmethod
    def from_logits(cls, logits_draws) -> ClassPredictive:
        r"""From logits f_t (shape (T, N, K) or (N, K)): p_t = softmax(f_t) (thesis eq. 2.1).

        log p_t = f_t - logsumexp_c f_tc (shift-invariant, no overflow), and
        log p̄ = logsumexp_t log p_t - log T (spec §3.3), so ``log_probs`` stays finite where
        p̄ underflows. Logits must be finite.
        """
        obj = cls.__new__(cls)
        obj._build(logits_draws, from_logits=True, atol=PROB_ATOL)
        return obj

    # ------------------------------------------------------------------ construction
    def _build(self, draws, *, from_logits: bool, atol: float) -> None:
        what = "logits_draws" if from_logits else "probs_draws"
        x = _as_array_like(draws, what)
        shape = tuple(x.shape)
        if len(shape) == 2:
            x = x[None]
            shape = (1,) + shape
        if len(shape) != 3:
            raise ValueError(
                f"{what} must have shape (T, N, K) (T draws, N inputs, K classes) or (N, K); "
                f"got {len(shape)} dimension(s), shape {shape}"
            )
        t, n, k = shape
        if t < 1 or k < 2:
            raise ValueError(f"{what} needs T >= 1 draws and K >= 2 classes; got shape {shape}")
        if not np.isfinite(atol) or atol < 0:
            raise ValueError(f"atol must be a finite number >= 0, got {atol}")

        probs = np.empty((n, k))
        log_probs = np.empty((n, k))
        exp_ent = np.empty(n)
        votes = np.zeros((n, k), dtype=np.int64)
        problems = {"nan": 0, "inf": 0, "neg": 0, "sum": 0}
        worst_neg, worst_sum = 0.0, 0.0
        step = max(1, _CHUNK_ELEMENTS // max(1, t * k))
        for a in range(0, n, step):
            b = min(n, a + step)
            c = as_numpy(x[:, a:b], what)  # (T, n_c, K) float64
            bad_nan = np.isnan(c).any(axis=2)
            bad_inf = np.isinf(c).any(axis=2)
            problems["nan"] += int(bad_nan.sum())
            problems["inf"] += int(bad_inf.sum())
            if from_logits:
                if (bad_nan | bad_inf).any():
                    continue
                logp = c - logsumexp(c, axis=2, keepdims=True)
                p = np.exp(logp)
                ent = -np.sum(p * logp, axis=2)  # logp finite, so 0 * logp = 0
                lpbar = logsumexp(logp, axis=0) - np.log(t)
                pbar = p.mean(axis=0)
            else:
                finite = ~(bad_nan | bad_inf)
                neg = (c < 0).any(axis=2) & finite
                problems["neg"] += int(neg.sum())
                if neg.any():
                    worst_neg = min(worst_neg, float(c[np.broadcast_to(finite[..., None], c.shape)].min()))
                s = c.sum(axis=2)
                off = finite & ~neg & (np.abs(s - 1) > atol)
                problems["sum"] += int(off.sum())
                if off.any():
                    worst_sum = max(worst_sum, float(np.abs(s[off] - 1).max()))
                if not finite.all() or neg.any() or off.any():
                    continue
                p = c / s[..., None]
                ent = -np.sum(xlogy(p, p), axis=2)
                pbar = p.mean(axis=0)
                with np.errstate(divide="ignore"):
                    lpbar = np.log(pbar)
            probs[a:b] = pbar
            log_probs[a:b] = lpbar
            exp_ent[a:b] = ent.mean(axis=0)
            hard = np.argmax(p, axis=2)  # (T, n_c): each draw's label, ties -> lowest index
            flat = (np.arange(b - a)[None, :] * k + hard).ravel()
            votes[a:b] = np.bincount(flat, minlength=(b - a) * k).reshape(b - a, k)

        msgs = []
        of = f" of the {t * n} vectors p_t(. | x_i)"
        if problems["nan"]:
            msgs.append(f"{problems['nan']}{of} hold NaN")
        if problems["inf"]:
            msgs.append(f"{problems['inf']}{of} hold +-inf")
        if problems["neg"]:
            msgs.append(f"{problems['neg']}{of} hold negative probabilities (smallest {worst_neg:.3g})")
        if problems["sum"]:
            msgs.append(
                f"{problems['sum']}{of} do not sum to 1 within atol={atol:g} "
                f"(largest |sum - 1| = {worst_sum:.3g}; pass logits to ClassPredictive.from_logits)"
            )
        if msgs:
            kind = "finite logits" if from_logits else "probability vectors over the last axis"
            raise ValueError(f"{what} (shape {shape}) must be {kind}: " + "; ".join(msgs))
        self._set(probs, log_probs, exp_ent, votes, t)

    def _set(self, probs, log_probs, expected_entropy, votes, n_draws) -> None:
        self._probs = probs
        self._log_probs = log_probs
        self._expected_entropy = expected_entropy
        self._votes = votes
        self._n_draws = int(n_draws)
        for arr in (self._probs, self._log_probs, self._expected_entropy, self._votes):
            arr.setflags(write=False)

    @classmethod
    def _from_parts(cls, probs, log_probs, expected_entropy, votes, n_draws) -> ClassPredictive:
        obj = cls.__new__(cls)
        obj._set(probs, log_probs, expected_entropy, votes, n_draws)
        return obj

    @classmethod
    def pool(cls, preds) -> ClassPredictive:
        r"""One predictive from the draws of several, as if concatenated along T (spec §2.6).

        With members m of T_m draws: p̄ = sum_m T_m p̄_m / sum_m T_m, the expected entropy
        likewise, votes added; log p̄ = logsumexp_m(log p̄_m + log T_m) - log sum_m T_m. MI of
        the pool therefore includes the members' disagreement (spec §6.14).
        """
        preds = list(preds)
        if not preds or not all(isinstance(p, ClassPredictive) for p in preds):
            raise ValueError("pool needs a non-empty sequence of ClassPredictive")
        shapes = {p.probs.shape for p in preds}
        if len(shapes) != 1:
            raise ValueError(f"pooled predictives must share (N, K); got {sorted(shapes)}")
        w = np.array([p.n_draws for p in preds], dtype=np.float64)
        total = w.sum()
        probs = sum(wi * p.probs for wi, p in zip(w, preds)) / total
        log_probs = logsumexp(np.stack([p.log_probs for p in preds]) + np.log(w)[:, None, None], axis=0)
        log_probs = log_probs - np.log(total)
        ent = sum(wi * p.expected_entropy for wi, p in zip(w, preds)) / total
        votes = sum(p._votes for p in preds)
        return cls._from_parts(probs, log_probs, ent, np.asarray(votes, dtype=np.int64), int(total))

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return int(self._probs.shape[0])

    @property
    def n_inputs(self) -> int:
        return len(self)

    @property
    def n_classes(self) -> int:
        return int(self._probs.shape[1])

    @property
    def n_draws(self) -> int:
        """T, the number of probability draws behind each input."""
        return self._n_draws

    # ------------------------------------------------------------------ predictive
    @property
    def probs(self) -> np.ndarray:
        """p̄, the mean of the draws, shape (N, K) (thesis eq. 2.23)."""
        return self._probs

    @property
    def log_probs(self) -> np.ndarray:
        """log p̄, shape (N, K); -inf where p̄ = 0 (exact in log space for ``from_logits``)."""
        return self._log_probs

    def predict(self) -> np.ndarray:
        """Predicted labels argmax_c p̄_ic, shape (N,), int64; ties go to the lowest index."""
        return np.argmax(self._probs, axis=1).astype(np.int64)

    # ------------------------------------------------------------------ measures
    @property
    def confidence(self) -> np.ndarray:
        """max_c p̄_ic, in [1/K, 1]; higher = more certain (thesis eq. 4.1)."""
        return self._probs.max(axis=1)

    @property
    def predictive_entropy(self) -> np.ndarray:
        """H[p̄] = -sum_c p̄_c log p̄_c in nats, 0 log 0 = 0; in [0, log K] (thesis eq. 4.2)."""
        lp = np.where(self._probs > 0, self._log_probs, 0.0)
        return -np.sum(self._probs * lp, axis=1)

    @property
    def expected_entropy(self) -> np.ndarray:
        """(1/T) sum_t H[p_t], the aleatoric part of H[p̄] (spec §2.8)."""
        return self._expected_entropy

    @property
    def mutual_information(self) -> np.ndarray:
        """H[p̄] - (1/T) sum_t H[p_t] (BALD, thesis eq. 4.3), clipped at 0 against rounding.

        0 <= MI <= H[p̄] and MI <= log T; identically 0 for T = 1 (a deterministic net).
        """
        return np.maximum(self.predictive_entropy - self._expected_entropy, 0.0)

    @property
    def variation_ratio(self) -> np.ndarray:
        """1 - (votes of the modal class)/T over the draws' argmax labels; in [0, 1 - 1/K] (spec §2.8)."""
        return 1.0 - self._votes.max(axis=1) / self._n_draws

    def measure(self, name: str) -> np.ndarray:
        """The measure called ``name`` (one of ``MEASURES``), shape (N,)."""
        if name not in self.MEASURES:
            raise ValueError(f"unknown measure {name!r}; choose one of {', '.join(self.MEASURES)}")
        return getattr(self, name)

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, index) -> ClassPredictive:
        """Restrict to a subset of the inputs (int, slice, boolean mask or integer array)."""
        if isinstance(index, (bool, np.bool_)):
            raise IndexError("a predictive is indexed by int, slice, boolean mask or integer array, not a bool")
        idx = np.atleast_1d(np.arange(len(self))[index])
        return self._from_parts(
            self._probs[idx], self._log_probs[idx], self._expected_entropy[idx], self._votes[idx], self._n_draws
        )

    def __repr__(self) -> str:
        return f"ClassPredictive(n_inputs={len(self)}, n_classes={self.n_classes}, n_draws={self.n_draws})"
