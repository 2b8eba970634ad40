"""scikit-learn's estimator checks, with fast settings (tiny net, few epochs)."""

from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from dubito.data.synthetic import toy2
from dubito.regression import DeepEnsembleRegressor

# Fast but still a real learner: check_regressors_train asks for R^2 > 0.5 on its data set.
# validated fitting on (held-out share 0.1): batch 8 fits the checks' 10-row data sets
FAST = DeepEnsembleRegressor(n_members=2, hidden=(16,), epochs=20, batch_size=8, lr=1e-2, progress=False, random_state=0)

# Checks that cannot apply, each with its reason (empty: every check applies and passes).
EXPECTED_FAILED = {}


@parametrize_with_checks([FAST], expected_failed_checks=lambda est: EXPECTED_FAILED)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_clone_pipeline_and_cross_val_score():
    X, y, _ = toy2(n=450, seed=0)
    pipe = make_pipeline(StandardScaler(), clone(FAST).set_params(hidden=(32, 16), epochs=40))
    scores = cross_val_score(pipe, X, y, cv=3)  # measured R^2: 0.61, 0.81, 0.70 (noise caps it at ~0.8)
    assert scores.shape == (3,) and all(s > 0.5 for s in scores), scores
