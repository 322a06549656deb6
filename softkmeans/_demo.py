"""The demo: what the three estimators add to K-Means, on data where it shows.

Four short cases, each on data drawn here with a fixed seed (nothing to download):

1. annealing against a poor start: 20 overlapping blobs on which a single k-means++ start
   of ``KMeans`` often stops in a worse local minimum, and ``AnnealedKMeans`` does not;
2. soft memberships: ``predict_proba`` of points between two overlapping clusters;
3. exactness: below its identification temperature ``EntmaxKMeans`` retraces Lloyd's
   iterations from the same start;
4. the warning that a temperature near the critical one collapses the centroids.
"""

import textwrap
import warnings

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import make_blobs

from ._annealed import AnnealedKMeans
from ._entmax import EntmaxKMeans
from ._soft import SoftKMeans
from .exceptions import CriticalTemperatureWarning

__all__ = ["run_demo"]

#: The blobs of case 1: ``make_blobs`` with this seed, 3000 points in 8-D, 20 centres.
BLOBS_SEED = 0
N_SEEDS = 10


def _say(file, *lines):
    for line in lines:
        print(line, file=file)


def _annealing(random_state, file):
    """Case 1: J over the best J found, for single starts, ten starts and the annealing."""
    X, _ = make_blobs(3000, 8, centers=20, cluster_std=1.5, random_state=BLOBS_SEED)
    k = 20
    single = KMeans(k, n_init=1, random_state=random_state).fit(X).inertia_
    starts = [KMeans(k, n_init=1, random_state=s).fit(X).inertia_ for s in range(N_SEEDS)]
    ten = KMeans(k, n_init=10, random_state=random_state).fit(X).inertia_
    soft = SoftKMeans(k, random_state=random_state).fit(X).inertia_
    sparse = EntmaxKMeans(k, random_state=random_state).fit(X).inertia_
    annealed = [AnnealedKMeans(k, random_state=s).fit(X).inertia_ for s in range(3)]
    best = min([single, ten, soft, sparse, *starts, *annealed])
    reached = sum(j <= best * (1 + 1e-6) for j in starts)
    rows = [
        (f"KMeans (scikit-learn), n_init=1, random_state={random_state}", single / best),
        (f"SoftKMeans(), random_state={random_state} (the same start)", soft / best),
        (f"EntmaxKMeans(), random_state={random_state} (the same start)", sparse / best),
        (f"KMeans (scikit-learn), n_init=10, random_state={random_state}", ten / best),
        ("AnnealedKMeans(), random_state=0, 1 and 2", max(annealed) / best),
    ]
    _say(file,
         "1. Annealing against a poor start",
         "   20 overlapping blobs, 3000 points in 8-D, k = 20. Inertia J over the lowest J",
         "   found by any run below (1.000 is the best fit; 1.300 is 30% worse):", "")
    for name, ratio in rows:
        _say(file, f"   {name:<62}{ratio:8.3f}")
    _say(file, "",
         f"   KMeans(n_init=1) over random_state 0..{N_SEEDS - 1}: {reached} of {N_SEEDS} reach "
         f"the best fit, the worst is {max(starts) / best:.3f}.",
         "   AnnealedKMeans starts from the data mean and splits its centroids as the",
         "   temperature falls: every random_state gives the same fit.", "")


def _overlap():
    """Two unit-variance Gaussian clusters whose centres are 3 apart, and five probe points."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal([0.0, 0.0], 1.0, (300, 2)), rng.normal([3.0, 0.0], 1.0, (300, 2))])
    probes = np.array([[0.0, 0.0], [1.0, 0.0], [1.5, 0.0], [2.0, 0.0], [3.0, 0.0]])
    return X, probes


def _exact(value):
    """A responsibility, with exact zeros and ones printed as such."""
    return f"{value:.0f}" if value in (0.0, 1.0) else f"{value:.3f}"


def _left_first(model, proba):
    """Columns of ``proba`` with the centroid of smaller x first."""
    return proba[:, np.argsort(model.cluster_centers_[:, 0])]


def _memberships(random_state, file):
    """Case 2: predict_proba of points on the segment between two overlapping clusters."""
    X, probes = _overlap()
    hard = KMeans(2, n_init=1, random_state=random_state).fit(X)
    soft = SoftKMeans(2, random_state=random_state).fit(X)
    sparse = EntmaxKMeans(2, sigma=soft.sigma_, random_state=random_state).fit(X)
    left = np.argmin(hard.cluster_centers_[:, 0])
    hard_left = (hard.predict(probes) == left).astype(float)
    p_soft = _left_first(soft, soft.predict_proba(probes))[:, 0]
    p_sparse = _left_first(sparse, sparse.predict_proba(probes))[:, 0]
    _say(file,
         "2. Soft memberships on overlapping points",
         "   Two unit-variance clusters centred at x = 0 and x = 3, 300 points each.",
         f"   SoftKMeans() fits sigma_ = {soft.sigma_:.3f}; EntmaxKMeans uses the same sigma.",
         "   Share of each point that goes to the left cluster:", "",
         f"   {'point':<12}{'KMeans':>8}{'SoftKMeans':>13}{'EntmaxKMeans':>15}")
    for point, h, s, e in zip(probes, hard_left, p_soft, p_sparse, strict=True):
        _say(file, f"   ({point[0]:.1f}, {point[1]:.1f}){h:>10.0f}{s:>13.3f}{_exact(e):>15}")
    _say(file, "",
         "   KMeans says all or nothing; softmax gives every point a share of both clusters;",
         "   entmax gives exactly 0 or 1 (printed without decimals) away from the boundary",
         "   and shares only the points near it.", "")


def _exactness(file):
    """Case 3: EntmaxKMeans below sigma_id against KMeans from the same centroids."""
    X, _ = make_blobs(3000, 8, centers=20, cluster_std=1.5, random_state=BLOBS_SEED)
    start, _ = kmeans_plusplus(X, 20, random_state=0)
    hard = KMeans(20, init=start, n_init=1).fit(X)
    sparse = EntmaxKMeans(20, sigma=0.2, init=start).fit(X)
    same = np.array_equal(hard.labels_, sparse.labels_)
    gap = np.abs(hard.cluster_centers_ - sparse.cluster_centers_).max()
    _say(file,
         "3. Entmax recovers K-Means exactly",
         "   The blobs of case 1, EntmaxKMeans(sigma=0.2) and KMeans from the same centroids.",
         f"   Identification temperature of the fit: {sparse.identification_sigma_:.3f} "
         f"(sigma is below it); rows not one-hot: {sparse.n_unidentified_:.0f}.",
         f"   Iterations: KMeans {hard.n_iter_}, EntmaxKMeans {sparse.n_iter_}; same labels: "
         f"{'yes' if same else 'no'}; largest centroid difference: {gap:.1e}.", "")


def _critical(random_state, file):
    """Case 4: the fits, and the warning, as sigma approaches the critical temperature."""
    X, _ = _overlap()
    critical = SoftKMeans(2, random_state=random_state, certify=True).fit(X).critical_sigma_
    _say(file,
         "4. A warning near the critical temperature",
         f"   The data of case 2; critical temperature sqrt(lambda_max) = {critical:.3f}.",
         "   Above it the softmax centroids merge into the data mean.", "",
         f"   {'sigma / critical':<19}{'centroid distance':>18}   warning")
    for ratio in (0.5, 0.95, 1.2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CriticalTemperatureWarning)
            model = SoftKMeans(2, sigma=ratio * critical, random_state=random_state).fit(X)
        first, second = model.cluster_centers_
        said = [w for w in caught if issubclass(w.category, CriticalTemperatureWarning)]
        _say(file, f"   {ratio:<19.2f}{np.linalg.norm(first - second):>18.3f}   "
                   f"{'CriticalTemperatureWarning' if said else '-'}")
    if said:
        text = textwrap.wrap(f"The warning says: {said[-1].message}", 86)
        _say(file, "", *("   " + line for line in text))


def run_demo(random_state=0, file=None):
    """Print the four cases of the demo.

    Each case fits on data drawn with a fixed seed; the whole demo takes a few seconds
    once numba's kernels are compiled (``pip install .`` compiles them).

    Parameters
    ----------
    random_state : int, default=0
        Seed of the k-means++ starts of ``KMeans``, ``SoftKMeans`` and ``EntmaxKMeans``
        (the same start for all three). The data are fixed.
    file : file-like, default=None
        Where to print; standard output when None.
    """
    _annealing(random_state, file)
    _memberships(random_state, file)
    _exactness(file)
    _critical(random_state, file)
