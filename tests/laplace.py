"""A test-only Laplace predictive that implements just the abstract methods of
RegressionPredictive, so the base-class defaults (bisection quantiles, inverse-CDF sampling)
and generic metric paths (CRPS quadrature) are exercised; SciPy's Laplace is the oracle."""
import numpy as np
from scipy import stats

from dubito.predictive.base import RegressionPredictive


class Laplace(RegressionPredictive):
    def __init__(self, loc, scale):
        self.loc, self.scale = np.asarray(loc, float), np.asarray(scale, float)

    @property
    def mean(self):
        return self.loc

    @property
    def var(self):
        return 2 * self.scale**2

    def _log_prob(self, y):
        return stats.laplace.logpdf(y, self.loc[:, None], self.scale[:, None])

    def _cdf(self, y):
        return stats.laplace.cdf(y, self.loc[:, None], self.scale[:, None])

    def _subset(self, index):
        return Laplace(self.loc[index], self.scale[index])
