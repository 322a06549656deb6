"""The sixteen benchmark datasets of the paper (Sec. 7.2, Table 2), generated or bundled.

Nothing is downloaded: the synthetic datasets are drawn with scikit-learn's
generators (or a few lines of numpy for the spiral) and the four real ones are
the copies that scikit-learn ships. Every dataset except the separation sweep is
standardized to zero mean and unit variance per coordinate, as in the paper; the
separation sweep is left unscaled so that its gap ``delta`` sets the margin.

The paper does not state every parameter. The choices made here are fixed and
listed in :data:`DATASETS` (``description``) and in the table below.

=================  ===  =====================================================================
name               k    how it is made (n = 300 for every synthetic dataset)
=================  ===  =====================================================================
blobs              4    ``make_blobs``, 4 centers in the box [-10, 10]^2, std 0.6
moons              2    ``make_moons``, noise 0.05
spiral             3    3 arms of one turn each, radius 3, Gaussian noise 0.05
circles            2    ``make_circles``, factor 0.5, noise 0.05
separation_<d>     3    3 blobs of std 0.35 on an equilateral triangle of side delta = d,
                        delta in {0.5, 1, 2, 4, 8}; not standardized
blobs_<d>d         3    3 blobs of std 1 in d in {5, 10, 50} dimensions, centers N(0, 6^2 I_d)
iris               3    ``load_iris`` (150 x 4)
wine               3    ``load_wine`` (178 x 13)
breast_cancer      2    ``load_breast_cancer`` (569 x 30)
digits             10   ``load_digits`` (1797 x 64); constant pixels stay 0 after scaling
=================  ===  =====================================================================

Examples
--------
>>> from softkmeans.datasets import DATASETS, load
>>> len(DATASETS)
16
>>> X, n_clusters = load("moons")
>>> X.shape, n_clusters
((300, 2), 2)
>>> X, n_clusters, y = load("iris", return_labels=True)
>>> X.shape, n_clusters, y.shape
((150, 4), 3, (150,))
"""

from dataclasses import dataclass
from functools import partial
from numbers import Integral, Real

import numpy as np
from sklearn import datasets as skd
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

__all__ = ["DatasetSpec", "DATASETS", "PLANAR", "SEPARATIONS", "DIMENSIONS", "load",
           "make_spiral", "make_separation", "make_high_dim_blobs"]

#: Gaps of the separation sweep.
SEPARATIONS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: Dimensions of the high-dimensional blobs.
DIMENSIONS = (5, 10, 50)
#: Number of points of every synthetic dataset.
N_SYNTHETIC = 300

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NON_NEGATIVE = Interval(Real, 0, None, closed="left")
_POSITIVE = Interval(Real, 0, None, closed="neither")


@validate_params({"n_samples": [_POSITIVE_INT], "n_arms": [_POSITIVE_INT],
                  "radius": [_POSITIVE], "turns": [_NON_NEGATIVE], "noise": [_NON_NEGATIVE],
                  "random_state": ["random_state"]}, prefer_skip_nested_validation=True)
def make_spiral(n_samples=300, *, n_arms=3, radius=3.0, turns=1.0, noise=0.05,
                random_state=None):
    """Points along the arms of a planar spiral, one label per arm.

    Arm ``a`` is the curve ``t -> radius * t * (cos, sin)(2 pi (a / n_arms + turns t))``
    for ``t`` uniform on ``[0, 1]``; Gaussian noise of standard deviation
    ``noise`` is added to both coordinates.

    Parameters
    ----------
    n_samples : int, default=300
        Total number of points, split as evenly as possible between the arms.
    n_arms : int, default=3
    radius : float, default=3.0
        Radius reached at the end of each arm.
    turns : float, default=1.0
        Number of turns each arm makes.
    noise : float, default=0.05
    random_state : int, RandomState instance or None

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,)

    Examples
    --------
    >>> from softkmeans.datasets import make_spiral
    >>> X, y = make_spiral(30, random_state=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((30, 2), [0, 1, 2])
    """
    rng = check_random_state(random_state)
    y = np.arange(n_samples) % n_arms
    t = rng.uniform(0.0, 1.0, n_samples)
    angle = 2.0 * np.pi * (y / n_arms + turns * t)
    X = radius * t[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    return X + noise * rng.standard_normal(X.shape), y


@validate_params({"n_samples": [_POSITIVE_INT], "delta": [_NON_NEGATIVE], "std": [_NON_NEGATIVE],
                  "random_state": ["random_state"]}, prefer_skip_nested_validation=True)
def make_separation(n_samples=300, *, delta=1.0, std=0.35, random_state=None):
    """Three isotropic blobs whose centers form an equilateral triangle of side ``delta``.

    Parameters
    ----------
    n_samples : int, default=300
    delta : float, default=1.0
        Distance between any two centers.
    std : float, default=0.35
    random_state : int, RandomState instance or None

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,)

    Examples
    --------
    >>> from softkmeans.datasets import make_separation
    >>> X, y = make_separation(30, delta=8.0, random_state=0)
    >>> X.shape
    (30, 2)
    """
    angles = np.pi / 2 + 2.0 * np.pi * np.arange(3) / 3
    centers = delta / np.sqrt(3.0) * np.column_stack([np.cos(angles), np.sin(angles)])
    return skd.make_blobs(n_samples, centers=centers, cluster_std=std,
                          random_state=random_state)


@validate_params({"n_samples": [_POSITIVE_INT], "n_features": [_POSITIVE_INT],
                  "n_centers": [_POSITIVE_INT], "std": [_NON_NEGATIVE], "spread": [_NON_NEGATIVE],
                  "random_state": ["random_state"]}, prefer_skip_nested_validation=True)
def make_high_dim_blobs(n_samples=300, *, n_features=10, n_centers=3, std=1.0, spread=6.0,
                        random_state=None):
    """Isotropic blobs in ``n_features`` dimensions with centers drawn from N(0, spread^2 I).

    Parameters
    ----------
    n_samples : int, default=300
    n_features : int, default=10
    n_centers : int, default=3
    std : float, default=1.0
    spread : float, default=6.0
        Standard deviation of the centers' coordinates.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)

    Examples
    --------
    >>> from softkmeans.datasets import make_high_dim_blobs
    >>> X, y = make_high_dim_blobs(30, n_features=5, random_state=0)
    >>> X.shape
    (30, 5)
    """
    rng = check_random_state(random_state)
    centers = spread * rng.standard_normal((n_centers, n_features))
    return skd.make_blobs(n_samples, centers=centers, cluster_std=std, random_state=rng)


def _bundled(loader, n_samples, random_state):
    data = loader()
    return data.data.astype(np.float64), data.target


@dataclass(frozen=True)
class DatasetSpec:
    """One benchmark dataset.

    Attributes
    ----------
    name : str
        Registry key.
    family : str
        ``"geometry"``, ``"separation"``, ``"high-dimensional"`` or ``"real"``.
    n_clusters : int
        Number of centroids used for it (fixed).
    standardize : bool
        Whether the coordinates are scaled to zero mean and unit variance.
    description : str
        The generator and its parameters, in words.
    make : callable
        ``make(n_samples, random_state) -> (X, y)`` before standardization.
    """

    name: str
    family: str
    n_clusters: int
    standardize: bool
    description: str
    make: object


def _registry():
    blobs = partial(skd.make_blobs, centers=4, cluster_std=0.6, center_box=(-10.0, 10.0))
    specs = [
        DatasetSpec("blobs", "geometry", 4, True, "make_blobs: 4 centers, std 0.6",
                    lambda n, rs: blobs(n, random_state=rs)),
        DatasetSpec("moons", "geometry", 2, True, "make_moons: noise 0.05",
                    lambda n, rs: skd.make_moons(n, noise=0.05, random_state=rs)),
        DatasetSpec("spiral", "geometry", 3, True,
                    "3-arm spiral, one turn per arm, radius 3, noise 0.05",
                    lambda n, rs: make_spiral(n, random_state=rs)),
        DatasetSpec("circles", "geometry", 2, True, "make_circles: factor 0.5, noise 0.05",
                    lambda n, rs: skd.make_circles(n, factor=0.5, noise=0.05,
                                                   random_state=rs)),
    ]
    for delta in SEPARATIONS:
        specs.append(DatasetSpec(
            f"separation_{delta:g}", "separation", 3, False,
            f"3 blobs of std 0.35 on a triangle of side {delta:g} (unscaled)",
            partial(lambda n, rs, delta: make_separation(n, delta=delta, random_state=rs),
                    delta=delta)))
    for dim in DIMENSIONS:
        specs.append(DatasetSpec(
            f"blobs_{dim}d", "high-dimensional", 3, True,
            f"3 blobs of std 1 in {dim} dimensions, centers N(0, 36 I)",
            partial(lambda n, rs, dim: make_high_dim_blobs(n, n_features=dim, random_state=rs),
                    dim=dim)))
    for name, loader, k in [("iris", skd.load_iris, 3), ("wine", skd.load_wine, 3),
                            ("breast_cancer", skd.load_breast_cancer, 2),
                            ("digits", skd.load_digits, 10)]:
        specs.append(DatasetSpec(name, "real", k, True, f"scikit-learn's bundled {name}",
                                 partial(_bundled, loader)))
    return {spec.name: spec for spec in specs}


#: name -> :class:`DatasetSpec`, in the order of the paper's Table 2.
DATASETS = _registry()
#: The four planar datasets of the geometry family.
PLANAR = ("blobs", "moons", "spiral", "circles")


@validate_params({"name": [StrOptions(set(DATASETS))], "n_samples": [_POSITIVE_INT],
                  "random_state": [Interval(Integral, 0, None, closed="left")],
                  "return_labels": ["boolean"]}, prefer_skip_nested_validation=True)
def load(name, *, n_samples=N_SYNTHETIC, random_state=0, return_labels=False):
    """Load one benchmark dataset by name.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS`.
    n_samples : int, default=300
        Size of a synthetic dataset (ignored for the real ones).
    random_state : int, default=0
        Seed of a synthetic dataset; the same seed always gives the same data,
        whatever else was loaded before.
    return_labels : bool, default=False
        Also return the generating labels (the classes of the real datasets).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    n_clusters : int
    y : ndarray of shape (n_samples,)
        Only when ``return_labels`` is True.

    Examples
    --------
    >>> from softkmeans.datasets import load
    >>> X, k = load("separation_8")
    >>> X.shape, k
    ((300, 2), 3)
    """
    spec = DATASETS[name]
    X, y = spec.make(n_samples, random_state)
    X = np.asarray(X, dtype=np.float64)
    if spec.standardize:
        X = StandardScaler().fit_transform(X)
    if return_labels:
        return X, spec.n_clusters, np.asarray(y)
    return X, spec.n_clusters
