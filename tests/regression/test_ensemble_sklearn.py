"""scikit-learn workflows: clone, pipelines, cross-validation (its estimator checks run for every
estimator in tests/test_common_estimators.py)."""

from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dubito.data.synthetic import toy2
from dubito.regression import DeepEnsembleRegressor

# A tiny, fast ensemble (validated fitting on: batch 8 leaves room for the held-out share); the
# N(0, 1) prior of the paper's toys, as the default precision 10 was chosen for the default widths
FAST = DeepEnsembleRegressor(n_members=2, hidden=(16,), epochs=20, batch_size=8, lr=1e-2, prior_precision=1.0,
                             progress=False, random_state=0)


def test_clone_pipeline_and_cross_val_score():
    X, y, _ = toy2(n=450, seed=0)
    pipe = make_pipeline(StandardScaler(), clone(FAST).set_params(hidden=(32, 16), epochs=40))
    scores = cross_val_score(pipe, X, y, cv=3)  # measured R^2: 0.61, 0.81, 0.70 (noise caps it at ~0.8)
    assert scores.shape == (3,) and all(s > 0.5 for s in scores), scores
