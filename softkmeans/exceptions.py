"""Warnings and errors raised by softkmeans."""

__all__ = ["CompilationCacheWarning", "CriticalTemperatureWarning"]


class CriticalTemperatureWarning(UserWarning):
    """A softmax K-Means was fitted above the critical temperature.

    At ``sigma^2 > lambda_max``, the largest eigenvalue of the data covariance,
    the configuration with every softmax centroid at the data mean is a strict
    local minimizer of ``F_sigma`` (Prop. 9 of the paper), and the alternating
    update typically brings all centroids there: the clustering collapses.
    Entmax estimators are not warned: their sparse responsibilities keep
    distant centroids apart at this temperature. Neither is a fit with a
    single centroid, or on data that sit on one point: their answer is the
    data mean at every temperature.

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


class CompilationCacheWarning(UserWarning):
    """numba found no writable directory for its cache of the compiled kernels.

    The numba engine's kernels are cached on disk, next to the installed
    sources or in the user's cache directory, so that only the first fit after
    an installation compiles them. Where neither is writable they are compiled
    in every process, for several seconds on its first fit; the warning is
    given once, when the engine is first used. Setting the environment
    variable ``NUMBA_CACHE_DIR`` to a writable directory before Python starts
    restores the cache. numba reads a cache only from a directory it can
    write to, so kernels compiled ahead of time (``python -m softkmeans
    compile``) by another user are compiled again too.

    Examples
    --------
    >>> import warnings
    >>> from softkmeans.exceptions import CompilationCacheWarning
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", CompilationCacheWarning)
    ...     import softkmeans._jit  # warns only without a writable cache
    """
