r"""Peer methods a user would pick instead of dubito, run by the same runner on the same splits.

`NGBoostPeer`: NGBoost (Duan et al. 2020, "NGBoost: Natural Gradient Boosting for Probabilistic
Prediction", ICML) with a Normal predictive, as the issue-19 leaderboard's baseline row. Protocol
of the NGBoost paper's UCI experiments: the number of boosting stages is chosen by the NLL of a
held-out 20 % of the training rows (early stopping after `PATIENCE` stages without improvement, at
most `MAX_STAGES`), then the model is refitted on all training rows with that many stages. Other
settings are ngboost's defaults (learning rate 0.01, depth-3 regression trees, natural gradient).

ngboost is not a dependency of dubito: ``pip install ngboost``. Its wheel pins scikit-learn < 1.7
on Python < 3.14, a pin that conflicts with dubito's test extras (mlxtend wants >= 1.8); ngboost
0.6.0 runs unchanged with scikit-learn 1.9 (``pip install --no-deps ngboost``, measured here).
A missing ngboost fails the cell with one clear error naming the install.
"""

from __future__ import annotations

import numpy as np

from dubito.early_stopping import holdout_split
from dubito.predictive.normal import Normal

__all__ = ["MAX_STAGES", "PATIENCE", "VALIDATION_FRACTION", "NGBoostPeer"]

#: The NGBoost paper's validation share and stage cap; early stopping after 50 stages without a
#: better held-out NLL.
VALIDATION_FRACTION = 0.2
MAX_STAGES = 2000
PATIENCE = 50


def _ngboost():
    try:
        from ngboost import NGBRegressor
        from ngboost.distns import Normal as NGBNormal
    except ImportError as exc:
        raise ImportError(
            f"the NGBoost peer row needs the optional package ngboost ({exc}): pip install ngboost "
            "(or pip install --no-deps ngboost where its scikit-learn pin conflicts; 0.6.0 runs with 1.9)"
        ) from None
    return NGBRegressor, NGBNormal


class NGBoostPeer:
    """NGBoost with a Normal predictive; stages by held-out NLL, then refitted on every row."""

    def __init__(self, random_state: int = 0):
        self.random_state = random_state

    def fit(self, X, y) -> NGBoostPeer:
        NGBRegressor, NGBNormal = _ngboost()
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        train, val = holdout_split(len(y), VALIDATION_FRACTION, self.random_state)
        probe = NGBRegressor(Dist=NGBNormal, n_estimators=MAX_STAGES, verbose=False, random_state=self.random_state)
        probe.fit(X[train], y[train], X_val=X[val], Y_val=y[val], early_stopping_rounds=PATIENCE)
        self.n_stages_ = int(probe.best_val_loss_itr) + 1
        self.model_ = NGBRegressor(Dist=NGBNormal, n_estimators=self.n_stages_, verbose=False,
                                   random_state=self.random_state).fit(X, y)
        return self

    def predict_distribution(self, X) -> Normal:
        params = self.model_.pred_dist(np.asarray(X, dtype=np.float64)).params
        return Normal(np.asarray(params["loc"], dtype=np.float64), np.asarray(params["scale"], dtype=np.float64) ** 2)
