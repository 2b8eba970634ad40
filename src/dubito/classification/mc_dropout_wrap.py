"""`MCDropoutClassifier.wrap`: MC dropout around a user's trained torch classifier, ready to predict
without ``fit`` (its own dropout layers, or dropout put before a copy of its head), and the number
of classes such a model has."""

from __future__ import annotations

import copy

import numpy as np
from torch import nn

from dubito._estimator import seeds_from
from dubito._validation import to_numpy_if_tensor
from dubito.classification.networks import insert_dropout as _insert_dropout
from dubito.nn.concrete_dropout import dropout_modules, dropout_rates
from dubito.nn.feature_layer import find_feature_layer

__all__ = ["wrap_model"]


def wrap_model(cls, model: nn.Module, *, classes=None, dropout: str = "bernoulli", insert_dropout: bool = False,
               **params):
    """`MCDropoutClassifier.wrap` (``cls``): the classifier around ``model``, ready to predict (its
    docstring); the model's own dropout layers, or ``dropout`` put before a copy's head."""
    est, s, net = checked_wrap(cls, model, dropout=dropout, insert_dropout=insert_dropout, trains=False, **params)
    est.classes_, est.n_classes_ = _wrapped_classes(net, classes, s["n_classes"])
    est.net_ = net
    est.wrapped_ = True
    est.image_shape_ = s["image_shape"]
    est.predict_seed_ = seeds_from(est.random_state, 4)[3]  # fit's prediction stream
    est.dropout_rates_ = dropout_rates(net)
    est.n_train_ = 0
    est.loss_curve_ = np.zeros(0)
    est.validation_curve_ = np.zeros(0)
    est.rate_history_ = np.asarray([est.dropout_rates_], dtype=np.float64).reshape(1, -1)
    est.best_epoch_ = 0
    est.stopped_by_ = "cap"
    return est


def checked_wrap(cls, model: nn.Module, *, dropout: str, insert_dropout: bool, trains: bool, **params):
    """(estimator, settings, network) for wrapping ``model``: one ValueError per problem (not a
    module, no MC dropout, no dropout layers to sample, no head to put dropout before, and, unless
    the estimator ``trains`` from the model, ``standardize=True``). The network is ``model``
    itself, or a copy with ``dropout`` before its head (``insert_dropout``)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"wrap needs a torch nn.Module, got {type(model).__name__}")
    est = cls(dropout=dropout, network=model, insert_dropout=insert_dropout, **params)
    s = est._settings()
    if s["dropout"] == "none":
        raise ValueError("wrap is for MC dropout: dropout must be 'bernoulli', 'concrete' or 'multidrop'")
    if not trains and est.standardize is True:
        raise ValueError("standardize=True needs the training inputs' mean and sd, which a wrapped model does not "
                         "have: wrap uses the model on X as given; to train with standardised inputs use "
                         "MCDropoutClassifier(network=model, standardize=True).fit(X, y)")
    if not insert_dropout and not dropout_modules(model):
        raise ValueError(
            f"the model ({type(model).__name__}) has no dropout layers (nn.Dropout, ConcreteDropout, MultiDrop, "
            "BernoulliDropout), so MC dropout would return T identical passes: pass insert_dropout=True to put "
            f"{dropout!r} dropout before its head, or add dropout layers yourself")
    net = model
    if insert_dropout:  # on a copy: the user's model is not changed
        net = copy.deepcopy(model)
        _insert_dropout(net, s["dropout"], **est._dropout_kwargs(s))
    return est, s, net


def _wrapped_classes(net: nn.Module, classes, n_classes: int | None) -> tuple[np.ndarray, int]:
    """(classes_, K) of a wrapped model: ``classes`` (1-D, distinct, >= 2), else ``n_classes``, else
    the last ``nn.Linear``'s ``out_features``; one ValueError for each conflict."""
    if classes is not None:
        labels = np.asarray(to_numpy_if_tensor(classes))
        if labels.ndim != 1 or labels.size < 2 or np.unique(labels).size != labels.size:
            raise ValueError(f"classes must be a 1-D sequence of >= 2 distinct labels, got {classes!r}")
        if n_classes is not None and n_classes != labels.size:
            raise ValueError(f"classes has {labels.size} labels but n_classes = {n_classes}")
        return labels, int(labels.size)
    if n_classes is not None:
        return np.arange(n_classes), n_classes
    try:
        head = find_feature_layer(net, None)[1]
    except ValueError:
        raise ValueError(f"cannot tell the number of classes of the model ({type(net).__name__}): it has no nn.Linear "
                         "head; pass classes=[...] or n_classes=K") from None
    k = int(head.out_features)
    if k < 2:
        raise ValueError(f"the model's last nn.Linear has {k} output; a classifier needs logits for K >= 2 classes "
                         "(for a single binary logit, output [0, logit] instead)")
    return np.arange(k), k
