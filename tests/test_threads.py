"""Results do not depend on the number of threads: fixed slots, summed in a fixed order."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

ESTIMATORS = {
    "annealed": lambda n_threads: AnnealedKMeans(8, strategy="paper", n_temperatures=5,
                                                 max_iter=30, random_state=0,
                                                 n_threads=n_threads),
    "mass-constrained": lambda n_threads: AnnealedKMeans(8, max_iter=30, n_threads=n_threads),
    "soft": lambda n_threads: SoftKMeans(8, sigma=0.05, n_init=2, max_iter=30, tol=0,
                                         random_state=0, n_threads=n_threads),
    "entmax": lambda n_threads: EntmaxKMeans(8, sigma=0.05, max_iter=30, tol=0, random_state=0,
                                             n_threads=n_threads),
}


@pytest.fixture(scope="module")
def uniform():
    """No cluster structure: every rounding difference moves some labels."""
    X = np.random.default_rng(0).uniform(size=(40_000, 20))
    sparse = X.copy()
    sparse[sparse < 0.5] = 0.0
    return {"dense": X, "csr": sp.csr_matrix(sparse)}


@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_one_or_two_threads_give_the_same_bits(uniform, name, layout):
    """AnnealedKMeans changed 199 labels of 40,000 between one and two threads (118 on CSR)."""
    X = uniform[layout]
    one, two = (ESTIMATORS[name](n_threads).fit(X) for n_threads in (1, 2))
    np.testing.assert_array_equal(one.labels_, two.labels_)
    np.testing.assert_array_equal(one.cluster_centers_, two.cluster_centers_)
    assert one.objective_ == two.objective_ and one.inertia_ == two.inertia_


_FIT_AND_HASH = """
import hashlib, sys, warnings
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
import softkmeans
warnings.simplefilter("ignore")
X = StandardScaler().fit_transform(
    make_blobs(20_000, 16, centers=50, cluster_std=1.5, random_state=1)[0])
model = getattr(softkmeans, sys.argv[1])(50, random_state=0).fit(X)
print(hashlib.sha1(model.cluster_centers_.tobytes()).hexdigest(), model.n_iter_)
"""


@pytest.mark.parametrize("name", ["SoftKMeans", "EntmaxKMeans"])
def test_the_blas_thread_count_leaves_the_bits(name):
    """With OpenBLAS started on two threads, numpy's products outside the passes (the rows'
    weighted norms, k-means++'s distances) split their sums by thread: the centroids of this
    fit moved in their last bits. Fits hold BLAS at one thread, as KMeans does."""
    outputs = []
    for blas_threads in ("1", "2"):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": blas_threads}
        done = subprocess.run([sys.executable, "-c", _FIT_AND_HASH, name], env=env,
                              capture_output=True, text=True, check=True, timeout=300)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
