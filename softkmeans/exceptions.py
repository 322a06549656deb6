"""Warnings and errors raised by softkmeans."""

__all__ = ["CriticalTemperatureWarning"]


class CriticalTemperatureWarning(UserWarning):
    """A softmax K-Means was fitted above the critical temperature.

    At ``sigma^2 > lambda_max``, the largest eigenvalue of the data covariance,
    the configuration with every softmax centroid at the data mean is a strict
    local minimizer of ``F_sigma`` (Prop. 9 of the paper), and the alternating
    update typically brings all centroids there: the clustering collapses.
    Entmax estimators are not warned: their sparse responsibilities keep
    distant centroids apart at this temperature.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from softkmeans import SoftKMeans
    >>> from softkmeans.exceptions import CriticalTemperatureWarning
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = SoftKMeans(n_clusters=2, sigma=10.0, random_state=0).fit(X)
    >>> any(issubclass(w.category, CriticalTemperatureWarning) for w in caught)
    True
    """
