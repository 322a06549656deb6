"""
=============================================================
Beyond memory: a memmap, a dask array, a cluster and a stream
=============================================================

The data here are written to a ``.npy`` file and never loaded whole: a dask
array whose tasks read their rows from the file (``numpy.load`` with
``mmap_mode="r"``, one block at a time) is fitted by
:class:`~softkmeans.SoftKMeans`. Each iteration maps the engine's pass over
the blocks and sums the ``k x d`` sufficient statistics through dask's
scheduler; the seeds come from k-means||. The same code runs on a cluster:
only the ``Client`` changes (its address, and storage every worker can read).

The same file is then streamed through
:meth:`~softkmeans.SoftKMeans.partial_fit`, batch by batch, from the dask
fit's own starting centroids: the figure shows the largest distance between
the stream's centroids and the batch solution after each epoch, which falls
about as one over the number of batches seen (every batch keeps its weight,
``decay=1``).

Needs dask (``pip install "softkmeans[dask]"``).
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

try:
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster
except ImportError:  # the gallery still builds without dask
    dask = None

from softkmeans import SoftKMeans

N, D, K = 400_000, 16, 20
EPOCHS = 12
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    N, D, K = 20_000, 8, 10
    EPOCHS = 4
# sphinx_gallery_end_ignore
ROWS = N // 8  # rows per block


def write_mixture(path, seed=0):
    """A float32 mixture of K components written block by block to a .npy file."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-8, 8, size=(K, D))
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(N, D))
    for start in range(0, N, ROWS):
        labels = rng.integers(K, size=min(ROWS, N - start))
        out[start:start + len(labels)] = means[labels] + rng.standard_normal((len(labels), D))
    out.flush()


def read_rows(path, start, stop):
    """Rows [start, stop) of the file, copied (the map is closed when the task ends)."""
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def file_array(path):
    """A dask array whose tasks read ROWS rows each from the .npy file."""
    blocks = [da.from_delayed(dask.delayed(read_rows)(path, a, min(a + ROWS, N)),
                              shape=(min(a + ROWS, N) - a, D), dtype=np.float32)
              for a in range(0, N, ROWS)]
    return da.concatenate(blocks)


if __name__ == "__main__" and dask is not None:
    tmp = tempfile.TemporaryDirectory()
    path = Path(tmp.name) / "mixture.npy"
    write_mixture(path)
    X = file_array(path)

    # On a real cluster: client = Client("tcp://scheduler.example.org:8786"), the file on
    # storage every worker reads. Here, two workers in this process.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        model = SoftKMeans(K, random_state=0).fit(X)
        labels = model.predict(X)  # lazy, chunked like X
        sizes = np.bincount(labels.compute(), minlength=K)
    print(f"{model.n_iter_} iterations, sigma_={model.sigma_:.3f}, cluster sizes "
          f"{sizes.min()}..{sizes.max()}")

    # The same file as a stream of memmap batches, from the dask fit's starting centroids.
    mapped = np.load(path, mmap_mode="r")
    stream = SoftKMeans(K, sigma=model.sigma_, init=model.cluster_centers_ + 0.5)
    batch = SoftKMeans(K, sigma=model.sigma_, init=model.cluster_centers_ + 0.5).fit(X)
    rng = np.random.default_rng(0)
    errors = []
    for _ in range(EPOCHS):
        for block in rng.permutation(N // ROWS * 4):
            stream.partial_fit(mapped[block * ROWS // 4:(block + 1) * ROWS // 4])
        errors.append(np.abs(stream.cluster_centers_ - batch.cluster_centers_).max())
    tmp.cleanup()

    epochs = np.arange(1, EPOCHS + 1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(epochs, errors, "o-", label="partial_fit, decay=1")
    ax.loglog(epochs, errors[0] / epochs, "k:", label="1 / epochs")
    ax.set_xlabel("epochs (32 batches each)")
    ax.set_ylabel("largest centroid error")
    ax.set_title("A stream converges to the batch solution")
    ax.legend()
    fig.tight_layout()
    plt.show()
