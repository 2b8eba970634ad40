r"""Training of `MCDropoutClassifier`: mini-batch epochs with validated fitting.

Validated fitting (`dubito.early_stopping`, issue 19; the held-out rows are drawn by
`MCDropoutClassifier.fit`, see `dubito.classification.mc_dropout`). After each epoch the held-out NLL

    NLL_val = -(1/N_val) Σ_{(x, y) held out} log softmax(f(x; ω̄))_y

is scored, f(·; ω̄) the mean network (dropout off, i.e. the weight-scaling approximation of the
T-pass predictive, eq. 2.23): one cheap deterministic pass instead of T stochastic ones, and the
data term only (the dropout regularisers Σ R_i are a prior term, not a likelihood). Training stops
after ``patience`` epochs without a drop of more than ``_MIN_DELTA`` = 1e-6 nats (the tolerance of
earlier versions, kept so that the thesis's models train alike), and the best epoch's weights are
restored. The epochs run in the shared loop `dubito.training_loop.run_epochs`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from dubito.early_stopping import EarlyStopping
from dubito.nn.concrete_dropout import (
    StochasticDropout,
    regularization,
    regularized_parameters,
)
from dubito.training_loop import module_snapshots, run_epochs

__all__ = ["mean_net_nll", "train_network"]

#: The tolerance of the stopping rule: a held-out NLL counts as better when it is lower by more than this
#: (nats; the rule of earlier versions, so the thesis experiment's models train as before).
_MIN_DELTA = 1e-6


def train_network(est, net, X, y, Xv, yv, s) -> None:
    """Mini-batch training of `MCDropoutClassifier` ``est``'s ``net`` (the loss of
    `dubito.classification.mc_dropout`) for at most ``epochs`` epochs, one permutation of the rows
    per epoch from torch's global generator (seeded by the caller), in the shared epoch loop
    `dubito.training_loop.run_epochs`.

    With held-out rows (Xv, yv), `mean_net_nll` is scored after each epoch (`EarlyStopping`,
    tolerance ``_MIN_DELTA``); with ``early_stopping`` training ends after ``patience`` epochs
    without improvement and ``net`` gets its best epoch's weights back (without it the held-out
    NLL is only recorded: a patience of ``epochs`` + 1 never ends training). Sets ``loss_curve_``,
    ``validation_curve_``, ``best_epoch_``, ``stopped_by_`` and ``rate_history_``."""
    dev = s["device"]
    n = X.shape[0]
    covered = regularized_parameters(net)
    l2 = [p for p in net.parameters() if p.requires_grad and id(p) not in covered]
    lam = s["weight_regularizer"]
    params = [p for p in net.parameters() if p.requires_grad]
    sites = [m for m in net.modules() if isinstance(m, StochasticDropout)]
    history = [[float(m.p_drop.detach().float().mean()) for m in sites]]
    curve, record, stopper = np.zeros(0), None, None
    if s["epochs"] > 0:
        opt_cls = torch.optim.Adam if s["optimizer"] == "adam" else torch.optim.RMSprop
        opt = opt_cls(params, lr=s["lr"])
        xt = est._tensor(X, s)
        yt = torch.as_tensor(y, dtype=torch.long, device=dev)
        batch = min(s["batch_size"], n)

        def train_epoch(epoch: int) -> float:
            net.train()
            perm = torch.randperm(n).to(dev)
            total = torch.zeros((), dtype=torch.float64, device=dev)  # summed on the device: no host copy per step
            for start in range(0, n, batch):
                idx = perm[start : start + batch]
                loss = F.cross_entropy(net(xt[idx]), yt[idx]) + regularization(net, n).to(dev)
                if lam > 0 and l2:
                    loss = loss + lam * sum(p.pow(2).sum() for p in l2)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach().double() * idx.shape[0]
            history.append([float(m.p_drop.detach().float().mean()) for m in sites])
            return float(total) / n

        validate = keep_best = restore_best = None
        if Xv is not None:
            xv = est._tensor(Xv, s)
            yvt = torch.as_tensor(yv, dtype=torch.long, device=dev)
            patience = s["patience"] if est.early_stopping else s["epochs"] + 1
            stopper = EarlyStopping(patience, 1, min_delta=_MIN_DELTA)

            def validate():
                return [mean_net_nll(net, xv, yvt, s)]

            if est.early_stopping:
                keep_best, restore = module_snapshots(net)

                def restore_best():
                    if stopper.best_epoch[0] > 0:  # 0: no finite held-out NLL, keep the last weights
                        restore()

        record = run_epochs(train_epoch, epochs=s["epochs"], description="MC dropout", progress=est.progress,
                            validate=validate, keep_best=keep_best, restore_best=restore_best, stopper=stopper,
                            lr=s["lr"], naive_loss=float(np.log(est.n_classes_)))
        curve = record.loss_curve
    net.eval()
    est.loss_curve_ = np.asarray(curve, dtype=np.float64)
    est.rate_history_ = np.asarray(history).reshape(len(history), len(sites))
    est.stopped_by_ = "cap"
    est.best_epoch_ = len(curve)
    if stopper is None:
        est.validation_curve_ = np.zeros(0)
        return
    est.validation_curve_ = record.validation_curve.reshape(-1)
    if est.early_stopping and stopper.best_epoch[0] > 0:
        est.best_epoch_ = int(record.best_epoch[0])
        est.stopped_by_ = record.stopped_by


def mean_net_nll(net, xv, yv, s) -> float:
    """Held-out NLL of the mean network (eval mode: dropout off, BatchNorm's running
    statistics), -(1/N_val) Σ log softmax(f(x))_y in float64 (module docstring)."""
    net.eval()
    total = 0.0
    with torch.no_grad():
        for start in range(0, xv.shape[0], 4096):
            logits = net(xv[start : start + 4096]).double()
            total += float(F.cross_entropy(logits, yv[start : start + 4096], reduction="sum"))
    return total / xv.shape[0]
