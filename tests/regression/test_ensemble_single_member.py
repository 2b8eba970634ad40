"""BP of B-DeepNoise ([P] §3; spec §4.3): one heteroscedastic Gaussian MLP with hard tanh, i.e.
DeepEnsembleRegressor(n_members=1, correction="none", activation="hardtanh")."""
import numpy as np
import torch

from dubito.predictive import GaussianMixture
from dubito.regression import DeepEnsembleRegressor


def test_hardtanh_single_member_fits_and_predicts():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(400, 1))
    sd = np.where(X[:, 0] > 0, 0.3, 0.05)  # heteroscedastic: the variance head must see it
    y = np.abs(X[:, 0]) + sd * rng.normal(size=400)
    est = DeepEnsembleRegressor(n_members=1, correction="none", activation="hardtanh", hidden=(50, 50),
                                epochs=150, batch_size=100, lr=3e-3, lr_drop="none", validation_fraction=0.0,
                                tail_df=None, random_state=0, progress=False).fit(X, y)
    Xt = np.array([[-0.6], [-0.2], [0.2], [0.6]])
    pred = est.predict_distribution(Xt)
    assert isinstance(pred, GaussianMixture) and pred.n_components == 1
    np.testing.assert_allclose(pred.mean, est.predict(Xt), rtol=1e-12)
    np.testing.assert_allclose(pred.var, pred.noise_variances[:, 0], rtol=1e-12)  # no epistemic part
    np.testing.assert_allclose(pred.epistemic_var, 0.0, atol=1e-15)
    # the fit: mean within 0.1 of |x|, and the predicted sd larger on x > 0 (0.3 vs 0.05);
    # measured (seed 0): |err| <= 0.058, sd 0.048, 0.047 / 0.30, 0.32
    assert np.max(np.abs(pred.mean - np.abs(Xt[:, 0]))) < 0.1
    assert pred.std[2:].min() > 2 * pred.std[:2].max()
    # the trunk uses hard tanh: every hidden unit lies in [-1, 1]
    with torch.no_grad():
        h = est.net_.features(torch.as_tensor((Xt - est.x_mean_) / est.x_scale_))
    assert float(h.abs().max()) <= 1.0
