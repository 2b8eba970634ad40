r"""MC-dropout classifiers: Bernoulli (fixed rate), concrete and Multi-Drop dropout (Feng 2019).

Spec ``shared/specs/classification-thesis.md`` §2.2-2.5 ("the thesis" = Feng, "Uncertainty-Based
Improvement of a Visual Classification System", TUM 2019; [GHK17] = Gal, Hron & Kendall 2017).

Model. A network with dropout layers (`dubito.nn.concrete_dropout.BernoulliDropout`,
`~dubito.nn.concrete_dropout.ConcreteDropout`, `dubito.nn.multidrop.MultiDrop`, or PyTorch's
``nn.Dropout``) and a softmax likelihood p(y = d | x, ω) = softmax(f(x; ω))_d (eq. 2.1). The built-in
networks are those of `dubito.classification.networks` (the thesis's head at the spec's §5.2
width, on an MLP or 2-conv CNN feature block); ``network`` may also be any torch classifier,
e.g. a pretrained backbone with a new head. ``MCDropoutClassifier.wrap(model)`` MC-samples a
trained classifier as it is, with no ``fit`` (its own dropout layers, or one put before its head);
its inputs may be arrays, tensors (any device) or DataLoaders (`dubito.nn.feature_layer`).

Training loss (per example; mean minibatch cross-entropy, so every KL term is divided by N,
spec §2.3-2.4 and pitfall 4):

    L = (1/B) Σ_b -log p(y_b | x_b, ω̂_b)  +  Σ_i R_i  +  λ_w Σ_{θ not in an R_i} ||θ||²,

R_i the regulariser of dropout site i (λ_w ||W̃_i||²/p_keep,i + λ_w ||b_i||² - β (entropy);
`dubito.nn.concrete_dropout`), β = ``dropout_regularizer`` or 1/N_train (KL-consistent, spec
§2.4 [R]) and a plain L2 λ_w on every other weight (backbone, PyTorch dropout's layers); the rate
logits are not L2-penalised.

Prediction (eq. 2.23): ``n_samples`` = T stochastic passes with only the dropout layers active
(BatchNorm in evaluation mode: its running statistics are used and not changed, pitfall 5) give
logits f_t(x) and ``ClassPredictive.from_logits`` (p̄ = (1/T) Σ_t softmax f_t, entropy, MI, ...).
Masks are independent per unit and per pass, and one pass is one sampled network ω_t ~ q(ω) applied
to every input (Gal & Ghahramani 2016, eq. 8; `dubito.nn.concrete_dropout.MCNoise`): pass t's mask
is drawn once, (T, 1, units), and shared by all rows, so an input's predictive does not depend on
the other rows of X, their order or ``predict_batch_size`` (tested). This departs from the spec's
§2.3 ("masks drawn independently per example", its correctness test 4): each input's marginal
predictive is the same, but per-example masks made an input's draws depend on the batch around it
(issue 19, as `dubito.regression.MCDropoutRegressor`); training keeps a mask per row. PyTorch's
own ``nn.Dropout`` layers in a user network (``wrap``) are the exception: they draw a mask per row
from torch's global generator (seeded per call), so their draws, though repeatable for the same X,
change with the other rows and the chunking; replace them by
`~dubito.nn.concrete_dropout.BernoulliDropout` (same p) for batch-invariant predictions. The T
passes are **batched** (`mc_logits`): each input is repeated T times along the batch, pass-major
(row t N + n), at the first dropout layer it reaches (``mc_expand="dropout"``, default: the
deterministic part before it runs once) or at the input (``mc_expand="input"``, for models whose
dropout sits in one of several branches); one forward then evaluates all T·N rows. On a CPU this equals a Python loop over the T
passes with the same masks to rounding (tested: 1e-12 in float64). The draws are seeded
(``predict_seed_`` or the call's ``random_state``), so ``predict_distribution`` is repeatable.

Defaults and sources. T = 50 (spec §2.3 [R]; the thesis gives none). p = 0.1: the fixed rate of
"bernoulli" (spec §5.2 "mcdp: fixed p = 0.1-0.2") and the initial rate of the learned ones (Gal's
default, spec §2.4 [R]). Temperature 0.1 [T §2.2.3]. λ_w = 3.5e-6, the thesis's L2 coefficient
[T §4.1]. Adam at lr 1e-3, at most 50 epochs: spec §5.2 (the thesis's RMSprop at 1e-5 is for
fine-tuning a pretrained net and too slow from scratch; it is ``optimizer="rmsprop"``). Batch size
128 is ours (the thesis states none).

Validated fitting (`dubito.early_stopping`, issue 19). ``fit`` holds out ``validation_fraction``
= 0.1 of the training rows (scikit-learn's ``MLPClassifier`` share; the package-wide default
``DEFAULT_VALIDATION_FRACTION``), drawn stratified by class (`holdout_split` with ``classes=y``:
ceil(0.1 n_c) rows of each class c, one row of each always kept for training), never the test
split; ``validation_data=(X_val, y_val)`` replaces the draw (the thesis's fixed validation split,
20 % [T §4.1]; pass ``validation_fraction=0`` there). After each epoch it scores the held-out NLL20 % [T §4.1]; pass ``validation_fraction=0`` there). After each epoch it scores the held-out NLL
of the mean network (dropout off) and stops after ``patience`` = 20 epochs (``DEFAULT_PATIENCE``,
docs/design.md) without a drop of more than 1e-6 nats, restoring the best epoch's weights
(`dubito.classification.mc_dropout_training`). ``validation_fraction=0`` trains on every row
for ``epochs`` epochs. Recorded: ``validation_curve_`` (epochs run,), ``best_epoch_`` (from 1),
``stopped_by_`` ("patience" or "cap"). The held-out draw uses the third of the fit's four seeds
(``seeds_from(random_state, 4)``: init, training, held-out rows, prediction), so the other
streams do not depend on it.

Inputs: X (n, p) floats; images flattened channel-first with ``image_shape = (C, H, W)`` (the
network then receives (n, C, H, W)); y integer labels: ``classes_`` are the distinct labels seen,
sorted, as in scikit-learn (K of them), or with ``n_classes`` the indices 0..n_classes-1 (classes
absent from y allowed). The predictive's column k is class ``classes_[k]``.
Built-in networks standardise X (one mean and sd over all pixels for images, per column
otherwise); a user network receives X as given (``standardize="auto"``).

The estimator base is `dubito._estimator.DubitoClassifier` (``predict``: the most probable class of
``predict_proba``; ``save`` / ``load`` through ``_state`` / ``_from_state``).

Persistence (no pickle): ``est.save(path)`` writes one ``.safetensors`` file and
``MCDropoutClassifier.load(path)`` rebuilds the model from it, predicting bit-identically; a user
network needs ``load(path, network=module_or_callable)`` (`dubito.classification.mc_dropout_io`).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
from torch import nn

from dubito import io
from dubito._estimator import DubitoClassifier, seeds_from
from dubito._estimator import check_device as _check_device
from dubito._validation import (
    check_bool,
    check_choice,
    check_fitted,
    check_float,
    check_int,
    check_widths,
    to_numpy_if_tensor,
)
from dubito.classification.labels import check_labels, encode_labels, fit_classes
from dubito.classification.mc_dropout_io import mc_dropout_from_state, mc_dropout_state
from dubito.classification.mc_dropout_training import train_network
from dubito.classification.mc_dropout_wrap import checked_wrap, wrap_model
from dubito.classification.mc_passes import mc_logits
from dubito.classification.networks import DROPOUTS, _is_module_network, build_network
from dubito.classification.networks import insert_dropout as _insert_dropout
from dubito.early_stopping import (
    DEFAULT_PATIENCE,
    DEFAULT_VALIDATION_FRACTION,
    check_patience,
    check_validation_fraction,
    holdout_split,
)
from dubito.nn.concrete_dropout import MCNoise, dropout_modules, dropout_rates
from dubito.nn.feature_layer import input_batches
from dubito.nn.pilotnet import check_image_shape
from dubito.predictive.classes import ClassPredictive

__all__ = ["MCDropoutClassifier", "check_labels", "encode_labels", "fit_classes", "mc_logits", "wrap"]

OPTIMIZERS = ("adam", "rmsprop")
EXPANDS = ("dropout", "input")


class MCDropoutClassifier(DubitoClassifier):
    r"""MC-dropout classifier (module docstring) returning `ClassPredictive`.

    Parameters (sources in the module docstring)
    ----------
    dropout : {"bernoulli", "concrete", "multidrop", "none"}, default "concrete"
        The dropout of the built-in network's 4 sites, or the kind `insert_dropout` puts before a
        user network's head. "none" = the deterministic "ori" baseline (a T = 1 predictive).
    p : float in [0, 1), default 0.1
        Fixed rate ("bernoulli") or initial rate (learned ones).
    n_samples : int, default 50
        T, MC passes per prediction.
    network : "mlp", "cnn", a torch nn.Module, or a callable returning one
        A module is deep-copied at fit (the argument is never changed); a callable is called under
        the member's seeded torch generator (so an ensemble's members get independent inits).
    image_shape : (C, H, W) or (H, W), optional
        Shape of the flattened channel-first images in X (needed for "cnn"; a user network then
        receives (n, C, H, W)).
    features, hidden : widths of the built-in networks (256; (256, 256, 256), spec §5.2).
    temperature, weight_regularizer, dropout_regularizer, weight_term, mc_sampler
        Passed to the dropout layers (`dubito.nn.concrete_dropout`); dropout_regularizer None ->
        β = 1/N_train.
    insert_dropout : bool, default False
        Put ``dropout`` before the head (last nn.Linear) of a user network that has no dropout.
    n_classes : int, optional
        K, with labels the indices 0..K-1 (classes absent from y allowed); default None: the
        distinct labels of y, as scikit-learn's ``classes_``.
    standardize : "auto", True or False
        "auto": built-in networks standardise X, user networks see X as given.
    optimizer, lr, epochs, batch_size : "adam", 1e-3, 50, 128. ``epochs=0`` trains nothing
        (a pretrained model, MC-sampled as is). A batch_size above the rows trained on is
        refused with a held-out share, one full batch when validation_fraction=0.
    validation_fraction : float in [0, 0.5), default 0.1
        Share of the training rows held out (stratified by class) for early stopping on their NLL
        (module docstring); 0 trains on every row for ``epochs`` epochs. Refused (ValueError): a
        share leaving fewer training rows than ``batch_size``, or a class with one row.
    patience : int, default 20
        Epochs without a better held-out NLL before training stops.
    early_stopping : bool, default True
        False: no rows are held out and every epoch is run, keeping the last weights (a given
        ``validation_data`` is still scored into ``validation_curve_``). Kept for older code;
        ``validation_fraction=0`` is the usual way to train on every row.
    mc_expand : "dropout" or "input" (`mc_logits`).
    predict_batch_size : int or None, default None
        Rows of X per MC forward (each becomes T rows). None: max(1, 1024 // T) (20 at T = 50),
        about 1,000 rows per forward, which keeps the activations cache-sized (measured on one CPU
        thread, MLP head 256 wide, T = 50: 0.86-0.89 s per 1,024 inputs at 16 rows per forward
        against 1.4-1.7 s at 40-64 and 2.2-4 s at 256-1,024; benchmarks/classification.py).
    device : "cpu" or a CUDA device.
    random_state, progress : seed (None, int); rich progress bar while training.

    Fitted attributes: ``net_``, ``classes_`` (y's labels, or 0..n_classes-1), ``n_features_in_``, ``n_train_`` (rows
    trained on), ``loss_curve_`` (training loss per epoch run), ``validation_curve_`` (held-out
    NLL per epoch run; empty without held-out rows), ``best_epoch_`` (the epoch, from 1, whose
    weights are kept), ``stopped_by_`` ("patience": the rule; "cap": ``epochs``, or no held-out
    rows), ``dropout_rates_`` (mean p_drop per site), ``rate_history_`` ((epochs run + 1, sites):
    the rates at the start and after each epoch), ``predict_seed_``.
    """

    def __init__(self, dropout="concrete", p=0.1, n_samples=50, network="mlp", image_shape=None, features=256,
                 hidden=(256, 256, 256), temperature=0.1, weight_regularizer=3.5e-6, dropout_regularizer=None,
                 weight_term="kl", mc_sampler="relaxed", insert_dropout=False, n_classes=None, standardize="auto",
                 optimizer="adam", lr=1e-3, epochs=50, batch_size=128, early_stopping=True,
                 validation_fraction=DEFAULT_VALIDATION_FRACTION, patience=DEFAULT_PATIENCE, mc_expand="dropout",
                 predict_batch_size=None, device="cpu", random_state=None, progress=False):
        self.dropout = dropout
        self.p = p
        self.n_samples = n_samples
        self.network = network
        self.image_shape = image_shape
        self.features = features
        self.hidden = hidden
        self.temperature = temperature
        self.weight_regularizer = weight_regularizer
        self.dropout_regularizer = dropout_regularizer
        self.weight_term = weight_term
        self.mc_sampler = mc_sampler
        self.insert_dropout = insert_dropout
        self.n_classes = n_classes
        self.standardize = standardize
        self.optimizer = optimizer
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.mc_expand = mc_expand
        self.predict_batch_size = predict_batch_size
        self.device = device
        self.random_state = random_state
        self.progress = progress

    # ------------------------------------------------------------------ settings
    def _settings(self) -> dict:
        for name in ("insert_dropout", "early_stopping", "progress"):
            check_bool(getattr(self, name), name)
        user = _is_module_network(self.network)
        if not user:
            check_choice(self.network, "network", ("mlp", "cnn"))
        s = dict(
            dropout=check_choice(self.dropout, "dropout", DROPOUTS),
            p=check_float(self.p, "p", min_value=0.0),
            n_samples=check_int(self.n_samples, "n_samples", min_value=1),
            user=user,
            features=check_int(self.features, "features", min_value=1),
            hidden=check_widths(self.hidden),
            temperature=check_float(self.temperature, "temperature", strictly_positive=True),
            weight_regularizer=check_float(self.weight_regularizer, "weight_regularizer", min_value=0.0),
            dropout_regularizer=(None if self.dropout_regularizer is None else
                                 check_float(self.dropout_regularizer, "dropout_regularizer", min_value=0.0)),
            weight_term=check_choice(self.weight_term, "weight_term", ("kl", "plain")),
            mc_sampler=check_choice(self.mc_sampler, "mc_sampler", ("relaxed", "hard")),
            optimizer=check_choice(self.optimizer, "optimizer", OPTIMIZERS),
            lr=check_float(self.lr, "lr", strictly_positive=True),
            epochs=check_int(self.epochs, "epochs", min_value=0),
            batch_size=check_int(self.batch_size, "batch_size", min_value=1),
            validation_fraction=check_validation_fraction(self.validation_fraction),
            patience=check_patience(self.patience),
            mc_expand=check_choice(self.mc_expand, "mc_expand", EXPANDS),
            predict_batch_size=(None if self.predict_batch_size is None else
                                check_int(self.predict_batch_size, "predict_batch_size", min_value=1)),
            device=_check_device(self.device),
            image_shape=None if self.image_shape is None else check_image_shape(self.image_shape),
        )
        if s["p"] >= 1.0:
            raise ValueError(f"p must lie in [0, 1), got {self.p}")
        if s["p"] == 0.0 and s["dropout"] in ("concrete", "multidrop"):  # issue 22: a NaN network, found at predict
            raise ValueError(f"p=0 with dropout={s['dropout']!r}: the {s['dropout']} rate starts at logit(p) and "
                             "needs 0 < p < 1; use dropout='none' for a network without dropout")
        if self.n_classes is not None:
            s["n_classes"] = check_int(self.n_classes, "n_classes", min_value=2)
        else:
            s["n_classes"] = None
        if self.standardize not in ("auto", True, False):
            raise ValueError(f"standardize must be 'auto', True or False, got {self.standardize!r}")
        s["standardize"] = (not user) if self.standardize == "auto" else bool(self.standardize)
        if not user and self.network == "cnn" and s["image_shape"] is None:
            raise ValueError("network='cnn' needs image_shape=(C, H, W) (or (H, W) for one channel): the shape of "
                             "the channel-first images flattened into the rows of X")
        s["network"] = self.network
        return s

    def _dropout_kwargs(self, s: dict) -> dict:
        return dict(p=s["p"], temperature=s["temperature"], weight_regularizer=s["weight_regularizer"],
                    dropout_regularizer=s["dropout_regularizer"], weight_term=s["weight_term"],
                    mc_sampler=s["mc_sampler"])

    def _check_image_features(self, s: dict, n_features: int) -> None:
        shape = s["image_shape"]
        if shape is not None and int(np.prod(shape)) != n_features:
            raise ValueError(
                f"image_shape {shape} has C*H*W = {int(np.prod(shape))} values but X has {n_features} columns; "
                "X must hold the flattened channel-first images, (n, C*H*W)")

    def _build(self, s: dict, n_features: int, k: int) -> nn.Module:
        """The network (built-in, copied or made by the user's callable), with dropout checked."""
        if s["user"]:
            net = self.network
            if isinstance(net, nn.Module):
                net = copy.deepcopy(net)
            else:
                net = net()
                if not isinstance(net, nn.Module):
                    raise ValueError(f"network callable must return a torch nn.Module, got {type(net).__name__}")
            if s["dropout"] != "none" and self.insert_dropout:
                kw = self._dropout_kwargs(s)
                _insert_dropout(net, s["dropout"], **kw)
            if s["dropout"] != "none" and not dropout_modules(net):
                raise ValueError(
                    f"the model ({type(net).__name__}) has no dropout layers (nn.Dropout, ConcreteDropout, MultiDrop, "
                    "BernoulliDropout), so MC dropout would return T identical passes: pass insert_dropout=True to put "
                    f"{s['dropout']!r} dropout before its head, add dropout layers, or use dropout='none'")
            return net
        return build_network(s["network"], n_features, k, dropout=s["dropout"], features=s["features"],
                             hidden=s["hidden"], image_shape=s["image_shape"], **self._dropout_kwargs(s))

    def _shape_input(self, x: torch.Tensor) -> torch.Tensor:
        """Flat rows -> (n, C, H, W) when the network takes images (``image_shape_``)."""
        return x if self.image_shape_ is None else x.reshape(x.shape[0], *self.image_shape_)

    # ------------------------------------------------------------------ wrap
    @classmethod
    def wrap(cls, model: nn.Module, *, classes=None, dropout: str = "bernoulli", insert_dropout: bool = False,
             **params) -> MCDropoutClassifier:
        """MC dropout around a user's trained torch classifier ``model`` ((B, ...) -> (B, K) logits),
        ready to predict without a training call.

        The model must hold dropout layers (ours or ``nn.Dropout``), which the T passes sample
        (Gal & Ghahramani 2016); ``insert_dropout=True`` instead puts ``dropout`` ("bernoulli", at
        the fixed rate ``p`` = 0.1 unless given) on the input of a copy of its head (its last
        ``nn.Linear``), the model itself is not changed. Without either: ValueError (T identical
        passes would be no MC dropout).

        K: ``len(classes)`` when ``classes`` (the labels ``predict`` returns, default 0..K-1) is
        given, else ``n_classes``, else the ``out_features`` of the last ``nn.Linear``; the logits'
        width is checked at prediction. X for ``predict_proba`` / ``predict_distribution``: what the
        model takes, as a numpy array, a torch tensor (any device) or a non-shuffling
        ``DataLoader`` (floating inputs cast to the model's dtype and moved to its device; flat
        rows reshaped to ``image_shape`` when given). The model is used by reference, as it is
        (no input standardisation: ``standardize=True`` is refused, it needs ``fit``). ``fit(X, y)``
        still trains a copy from these weights (``epochs=0`` trains nothing), as
        ``MCDropoutClassifier(network=model)``. A wrapped, unfitted model cannot be ``save``-d:
        it is your module (save its ``state_dict``) and wrapping trains nothing.
        """
        return wrap_model(cls, model, classes=classes, dropout=dropout, insert_dropout=insert_dropout, **params)

    def _wrapped_inputs(self, X, rows: int):
        """Batches of a wrapped model's inputs (`dubito.nn.feature_layer.input_batches`), flat rows
        reshaped to ``image_shape`` when given."""
        return (self._shape_input(x) if (self.image_shape_ is not None and x.dim() == 2) else x
                for x in input_batches(self.net_, X, batch_size=rows))

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, validation_data=None):
        """Train on X (n, p) and integer labels y, early-stopping on held-out rows (module docstring).

        ``validation_data=(X_val, y_val)`` replaces the held-out draw of ``validation_fraction`` of
        the rows (use it when rows are augmented copies of the same object, so that the split can be
        made by object: spec pitfall 11). No rows are held out with ``epochs=0`` (nothing to stop)."""
        s = self._settings()
        X, y = self._validate_fit(X, y, min_samples=2, require_nonconstant_y=False)
        if s["n_classes"] is None:  # scikit-learn's classes_: the labels seen (issue 22: {0, 5, 10} made 11)
            classes, y = fit_classes(y)
        else:  # labels are indices 0..n_classes-1; classes not in y may exist
            y, k = check_labels(y, s["n_classes"])
            classes = np.arange(k)
        k = classes.size
        self._check_image_features(s, X.shape[1])
        init_seed, train_seed, split_seed, self.predict_seed_ = seeds_from(self.random_state, 4)
        if validation_data is not None:
            Xv, yv = validation_data
            Xv = self._validate_predict(Xv, fitted_attributes=["n_features_in_"])
            yv = np.asarray(yv)
            if yv.shape != (Xv.shape[0],):
                raise ValueError(f"validation_data: y_val must have shape ({Xv.shape[0]},), got {yv.shape}")
            yv = encode_labels(yv, classes)
        elif self.early_stopping and s["epochs"] > 0 and s["validation_fraction"] > 0:
            train_rows, val_rows = holdout_split(X.shape[0], s["validation_fraction"], split_seed,
                                                 batch_size=s["batch_size"], classes=y)
            X, y, Xv, yv = X[train_rows], y[train_rows], X[val_rows], y[val_rows]
        else:
            Xv = yv = None
        self.classes_ = classes
        self.n_classes_ = k
        self.image_shape_ = s["image_shape"] if (s["user"] or s["network"] == "cnn") else None
        if s["standardize"]:
            scalar = s["image_shape"] is not None
            self.x_mean_ = np.full(X.shape[1], X.mean()) if scalar else X.mean(axis=0)
            sd = np.full(X.shape[1], X.std()) if scalar else X.std(axis=0)
            self.x_scale_ = np.where(sd > 0, sd, 1.0)
        else:
            self.x_mean_ = np.zeros(X.shape[1])
            self.x_scale_ = np.ones(X.shape[1])
        self.n_train_ = int(X.shape[0])
        dev = s["device"]
        with self._rng(init_seed, dev):
            net = self._build(s, X.shape[1], k).to(dev)
        self._check_output(net, X, k, s)
        with self._rng(train_seed, dev):
            train_network(self, net, X, y, Xv, yv, s)
        self.net_ = net.eval()
        self.wrapped_ = False
        self.dropout_rates_ = dropout_rates(net)
        return self

    def fine_tune(self, X, y, *, epochs: int, random_state=None, validation_data=None) -> MCDropoutClassifier:
        """Train the fitted network ``epochs`` more epochs on (X, y), in place, and return self.

        The optimiser and learning rate of `fit` (a fresh optimiser state), the input
        standardisation of `fit` kept, the dropout regulariser scaled by the new N (spec §2.9 step
        3, "same method, same optimiser"); early stopping (``patience``, best weights restored) on
        ``validation_data=(X_val, y_val)`` when given, else all ``epochs`` on every row of X:
        fine-tuning draws no held-out share of its own, because its data are often a few newly
        labelled rows (`AutoLabeler`'s rounds) that are better trained on, and a fixed, held-out
        set (e.g. the source validation rows) is the meaningful yardstick. ``validation_curve_``,
        ``best_epoch_`` and ``stopped_by_`` then describe the fine-tuning run. Labels must lie in
        the fitted ``classes_``.
        ``random_state``: an int seeds the batch order and dropout noise; None draws a fresh seed.
        """
        check_fitted(self, ["net_"])
        s = self._settings()
        s["epochs"] = check_int(epochs, "epochs", min_value=1)
        X = self._validate_predict(X, fitted_attributes=["n_features_in_"])
        y = np.asarray(to_numpy_if_tensor(y))
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        y = encode_labels(y, self.classes_)
        Xv = yv = None
        if validation_data is not None:
            Xv = self._validate_predict(validation_data[0], fitted_attributes=["n_features_in_"])
            yv = np.asarray(to_numpy_if_tensor(validation_data[1]))
            if yv.shape != (Xv.shape[0],):
                raise ValueError(f"validation_data: y_val must have shape ({Xv.shape[0]},), got {yv.shape}")
            yv = encode_labels(yv, self.classes_)
        seed = seeds_from(None, 1)[0] if random_state is None else check_int(random_state, "random_state", min_value=0)
        with self._rng(seed, s["device"]):
            train_network(self, self.net_, X, y, Xv, yv, s)
        self.net_.eval()
        self.n_train_ = int(X.shape[0])
        self.dropout_rates_ = dropout_rates(self.net_)
        return self

    @staticmethod
    def _rng(seed: int, device: torch.device):
        devices = [device.index or 0] if device.type == "cuda" else []
        ctx = torch.random.fork_rng(devices=devices)

        class _Seeded:
            def __enter__(self_inner):
                ctx.__enter__()
                torch.manual_seed(seed)

            def __exit__(self_inner, *exc):
                return ctx.__exit__(*exc)

        return _Seeded()

    def _tensor(self, X: np.ndarray, s: dict | None = None) -> torch.Tensor:
        dev = s["device"] if s is not None else next(self.net_.parameters()).device
        x = torch.as_tensor((X - self.x_mean_) / self.x_scale_, dtype=torch.float32).to(dev)
        return self._shape_input(x)

    def _check_output(self, net: nn.Module, X: np.ndarray, k: int, s: dict) -> None:
        x = self._tensor(X[:2], s)
        mode = {m: m.training for m in net.modules()}
        net.eval()
        try:
            with torch.no_grad():
                out = net(x)
        except RuntimeError as exc:
            raise ValueError(f"the network failed on inputs of shape {tuple(x.shape)} ({exc}); check image_shape "
                             "and the number of columns of X") from None
        finally:
            for m, md in mode.items():
                m.training = md
        if out.dim() != 2 or out.shape != (x.shape[0], k):
            raise ValueError(f"the network must return logits of shape (batch, K) = ({x.shape[0]}, {k}); it returned "
                             f"{tuple(out.shape)}")

    # ------------------------------------------------------------------ predict
    def sample_logits(self, X, *, n_samples: int | None = None, random_state=None) -> np.ndarray:
        """The T MC-dropout logit draws at X, (T, N, K) float32 (T = 1 for ``dropout="none"``).

        Seeded by ``random_state`` (None -> ``predict_seed_``), so repeated calls agree. Pass t is
        one sampled network for every row (`mc_logits`), drawn once for all chunks of
        ``predict_batch_size`` rows, so a row's draws do not depend on the other rows of X (with our
        dropout layers; not with PyTorch's ``nn.Dropout`` in a user network, see the module docstring)."""
        wrapped = getattr(self, "wrapped_", False)
        if not wrapped:
            X = self._validate_predict(X, fitted_attributes=["net_"])
        t = self.n_samples if n_samples is None else n_samples
        t = check_int(t, "n_samples", min_value=1)
        deterministic = self.dropout == "none"
        if deterministic:
            t = 1
        seed = self.predict_seed_ if random_state is None else seeds_from(random_state, 1)[0]
        net = self.net_
        dev = next((t.device for t in (*net.parameters(), *net.buffers())), torch.device("cpu"))
        out = []
        rows = self.predict_batch_size
        if rows is None:
            rows = 4096 if deterministic else max(1, 1024 // t)
        rows = check_int(rows, "predict_batch_size", min_value=1)
        noise = MCNoise(t)  # one draw of the T masks for every chunk: a row's passes do not depend on the chunking
        batches = (self._wrapped_inputs(X, rows) if wrapped else
                   (self._tensor(X[start : start + rows]) for start in range(0, X.shape[0], rows)))
        with self._rng(seed, dev):
            for x in batches:
                if deterministic:
                    with torch.no_grad():
                        out.append(net.eval()(x).unsqueeze(0).cpu())
                else:
                    out.append(mc_logits(net, x, t, expand=self.mc_expand, noise=noise).cpu())
                if wrapped and (out[-1].dim() != 3 or out[-1].shape[-1] != self.n_classes_):
                    raise ValueError(f"the wrapped model returned logits of shape {tuple(out[-1].shape[1:])}, not "
                                     f"(batch, K) with K = {self.n_classes_} classes")
        if not out:
            return np.zeros((t, 0, self.n_classes_), dtype=np.float32)
        return torch.cat(out, dim=1).float().numpy()

    def predict_distribution(self, X, *, n_samples: int | None = None, random_state=None) -> ClassPredictive:
        """`ClassPredictive` from the T MC-dropout passes at X (module docstring)."""
        return ClassPredictive.from_logits(self.sample_logits(X, n_samples=n_samples, random_state=random_state))

    def predict_proba(self, X) -> np.ndarray:
        """p̄(y | x), (N, K): the mean of the T passes' softmax."""
        return self.predict_distribution(X).probs

    # ------------------------------------------------------------------ persistence
    def _json_params(self) -> dict:
        """`dubito.io.json_params`, with a user network as None (its class name goes to the
        fitted settings)."""
        return io.json_params(self, **({"network": None} if _is_module_network(self.network) else {}))

    def _state(self) -> tuple[dict[str, torch.Tensor], dict]:
        """(tensors, settings) of the fitted model: what `save` writes (`mc_dropout_state`)."""
        return mc_dropout_state(self)

    @classmethod
    def _from_state(cls, tensors: dict, settings: dict, *, device=None, where: str = "",
                    network=None) -> MCDropoutClassifier:
        """The classifier rebuilt from `_state`'s output (`load`; `mc_dropout_from_state`)."""
        return mc_dropout_from_state(cls, tensors, settings, device=device, where=where, network=network)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False  # seeded: repeated calls agree
        return tags



def wrap(model: nn.Module, *, dropout: str = "bernoulli", insert_dropout: bool = False, **params) -> MCDropoutClassifier:
    """Deprecated: use `MCDropoutClassifier.wrap` (ready to predict, no ``fit`` needed), or
    ``MCDropoutClassifier(network=model, insert_dropout=...)`` to train.

    Returns an unfitted `MCDropoutClassifier` around ``model`` that still needs ``fit`` (as
    before); the model's dropout (or, with ``insert_dropout=True``, its head) is checked here,
    so a model without dropout fails at once with a ValueError.
    """
    warnings.warn("dubito.classification.wrap is deprecated: MCDropoutClassifier.wrap(model, ...) is ready to predict "
                  "without fit; to train, use MCDropoutClassifier(network=model, insert_dropout=...).fit(X, y)",
                  DeprecationWarning, stacklevel=2)
    # the wrapped model's checks, done now (its head too, with insert_dropout); fit trains a copy
    est, _, _ = checked_wrap(MCDropoutClassifier, model, dropout=dropout, insert_dropout=insert_dropout, trains=True,
                             **params)
    return est
