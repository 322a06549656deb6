"""numba's kernels compile in the calling process: a cold cache changes the time, not the bits."""

import os
import subprocess
import sys

import numpy as np
import scipy.sparse as sp

from softkmeans._engines._numba.compile import input_kind

_SEEDED_FITS = """
import hashlib
import numpy as np
import scipy.sparse as sp
from softkmeans import EntmaxKMeans, SoftKMeans
from softkmeans._engines._numba.kernels import csr_pass, dense_pass

rng = np.random.default_rng(0)
X = rng.normal(size=(20000, 16)).astype(np.float32)
for model, data in ((SoftKMeans(10, sigma=1.0, random_state=0, tol=0, max_iter=8), X),
                    (EntmaxKMeans(5, sigma=0.5, random_state=0), sp.csr_matrix(X[:3000]))):
    model.fit(data)
    digest = hashlib.sha256(model.cluster_centers_.tobytes() + model.labels_.tobytes())
    print(repr(model.objective_), model.n_iter_, digest.hexdigest())
print(sum(sum(k.stats.cache_misses.values()) for k in (dense_pass, csr_pass)))
"""


def test_a_seeded_fit_gives_the_same_bits_with_a_cold_or_a_warm_cache(tmp_path):
    """The first process compiled in the background and ran its passes on the numpy engine
    meanwhile: its objective differed from later processes' in the 7th digit."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def run():
        done = subprocess.run([sys.executable, "-c", _SEEDED_FITS], capture_output=True,
                              text=True, env=env, check=False, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.splitlines()
        return lines[:2], int(lines[-1])

    cold, cold_misses = run()
    warm, warm_misses = run()
    assert cold_misses > 0  # the first process compiled the kernels...
    assert warm_misses == 0  # ...and the second loaded them from the cache
    assert cold == warm


def test_input_kind_names_layout_and_dtypes():
    X = np.zeros((3, 2), dtype=np.float32)
    assert input_kind(X) == ("dense", "float32")
    assert input_kind(sp.csr_matrix(X.astype(np.float64))) == ("CSR", "float64", "int32")
