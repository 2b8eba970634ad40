"""Preprocessing in front of a dubito estimator, with its predictive still reachable.

scikit-learn's ``Pipeline`` forwards only scikit-learn's own methods (``predict``,
``predict_proba``, ...), so ``pipe.predict_distribution(X)`` raises ``AttributeError``.
`DubitoPipeline` is a ``Pipeline`` that also forwards the dubito methods of its final step:
X goes through every transform (``transform``, as in ``Pipeline.predict``), then to

* ``predict_distribution(X, **params)`` - the final step's predictive (a `RegressionPredictive`
  or `ClassPredictive`);
* ``predict_interval(X, level=0.95, **params)`` and ``predict_quantiles(X, q, **params)`` - as
  `DubitoRegressor`'s.

Each is present only when the final step has it (scikit-learn's ``available_if``), so
``hasattr(pipe, "predict_distribution")`` tells the truth. ``predict(X, return_std=True)``
already passes through a plain ``Pipeline`` (its ``**params`` go to the final ``predict``).

    from sklearn.preprocessing import StandardScaler
    from dubito.pipeline import make_pipeline
    pipe = make_pipeline(StandardScaler(), DeepEnsembleRegressor()).fit(X, y)
    pipe.predict_distribution(X_test).interval(0.9)

In ``GridSearchCV(pipe, ...)`` the refitted pipeline is ``search.best_estimator_``; score with
`dubito.metrics.scorers`. Only X is transformed: a transform of y (``TransformedTargetRegressor``)
would change the units of the predictive, and is not supported (dubito standardises y itself).
"""

from __future__ import annotations

from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline as _sklearn_make_pipeline
from sklearn.utils.metaestimators import available_if

__all__ = ["DubitoPipeline", "make_pipeline"]


def _final_has(name: str):
    def check(self) -> bool:
        getattr(self._final_estimator, name)  # AttributeError when absent: available_if hides the method
        return True

    return check


class DubitoPipeline(Pipeline):
    """A scikit-learn ``Pipeline`` that forwards ``predict_distribution``, ``predict_interval`` and
    ``predict_quantiles`` to its final step after the transforms (module docstring)."""

    def _transform_all(self, X):
        Xt = X
        for _, _, transform in self._iter(with_final=False):
            Xt = transform.transform(Xt)
        return Xt

    @available_if(_final_has("predict_distribution"))
    def predict_distribution(self, X, **params):
        """The final step's ``predict_distribution`` of the transformed X."""
        return self._final_estimator.predict_distribution(self._transform_all(X), **params)

    @available_if(_final_has("predict_interval"))
    def predict_interval(self, X, level=0.95, **params):
        """The final step's ``predict_interval`` of the transformed X: (N, 2), or (N, 2, L) for L levels."""
        return self._final_estimator.predict_interval(self._transform_all(X), level, **params)

    @available_if(_final_has("predict_quantiles"))
    def predict_quantiles(self, X, q, **params):
        """The final step's ``predict_quantiles`` of the transformed X: (N, k)."""
        return self._final_estimator.predict_quantiles(self._transform_all(X), q, **params)


def make_pipeline(*steps, memory=None, verbose: bool = False) -> DubitoPipeline:
    """A `DubitoPipeline` of ``steps``, named as scikit-learn's ``make_pipeline`` names them
    (the lower-cased class names)."""
    base = _sklearn_make_pipeline(*steps, memory=memory, verbose=verbose)
    return DubitoPipeline(**base.get_params(deep=False))
