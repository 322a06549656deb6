"""
=============================================================
Beyond memory: a memmap, a dask array, a cluster and a stream
=============================================================

The data here are written to a ``.npy`` file and never loaded whole: a dask
array whose tasks map their rows of the file (``numpy.memmap`` at the rows'
offset, one block at a time) is fitted by
:class:`~softkmeans.SoftKMeans`. Each iteration maps the engine's pass over
the blocks and sums the ``k x d`` sufficient statistics through dask's
scheduler; the seeds come from k-means||. The same code runs on a cluster:
only the ``Client`` changes (its address, and storage every worker can read).

The same file is then streamed through
:meth:`~softkmeans.SoftKMeans.partial_fit`, batch by batch in a random order,
from centroids near the dask fit's: the figure shows the largest distance
between the stream's centroids and the batch solution after each batch. With
``decay=1`` every batch keeps its weight, so the stream's centroids are
(nearly) the means of the rows seen so far: their error falls as the sampling
error of a mean over a random sample drawn without replacement (the dotted
line), and once every batch has been seen little is left of it: only that each
batch's responsibilities were taken at the centroids of its time.

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
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    N, D, K = 20_000, 8, 10
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


def read_rows(path, offset, count):
    """``count`` rows of the file from byte ``offset``, copied (the map closes with the task)."""
    return np.array(np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(count, D)))


def file_array(path):
    """A dask array whose tasks read ROWS rows each from the .npy file.

    The header is parsed once, here, and the tasks map their rows by offset.
    """
    start = np.load(path, mmap_mode="r").offset  # where the rows begin, after the header
    row_bytes = D * np.dtype(np.float32).itemsize
    blocks = [da.from_delayed(
        dask.delayed(read_rows)(path, start + a * row_bytes, min(ROWS, N - a)),
        shape=(min(ROWS, N - a), D), dtype=np.float32) for a in range(0, N, ROWS)]
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
        # three starts: a single k-means|| start can leave two components to one centroid
        model = SoftKMeans(K, n_init=3, random_state=0).fit(X)
        labels = model.predict(X)  # lazy, chunked like X
        sizes = np.bincount(labels.compute(), minlength=K)
    print(f"{model.n_iter_} iterations, sigma_={model.sigma_:.3f}, cluster sizes "
          f"{sizes.min()}..{sizes.max()}")

    # The same file as a stream of memmap batches, from centroids near the dask fit's.
    mapped = np.load(path, mmap_mode="r")
    start = model.cluster_centers_ + 0.5
    stream = SoftKMeans(K, sigma=model.sigma_, init=start)
    batch = SoftKMeans(K, sigma=model.sigma_, init=start).fit(X)
    n_batches = 32
    size = -(-N // n_batches)
    errors = []
    for block in np.random.default_rng(0).permutation(n_batches):
        stream.partial_fit(mapped[block * size:(block + 1) * size])
        errors.append(np.abs(stream.cluster_centers_ - batch.cluster_centers_).max())
    tmp.cleanup()
    print(f"largest centroid error after 1, {n_batches // 2} and {n_batches} batches: "
          f"{errors[0]:.2g}, {errors[n_batches // 2 - 1]:.2g}, {errors[-1]:.2g}")

    seen = np.arange(1, n_batches + 1)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(seen[:-1], errors[:-1], "o-", label="partial_fit, decay=1")
    sampling = np.sqrt((n_batches - seen) / (seen * (n_batches - 1.0)))  # 1 at one batch
    ax.loglog(seen[:-1], errors[0] * sampling[:-1], "k:", label="sampling error of a mean")
    ax.set_xlabel(f"batches seen (of {n_batches}, in a random order)")
    ax.set_ylabel("largest centroid error")
    ax.set_title("A stream approaches the batch solution")
    ax.legend()
    fig.tight_layout()
    plt.show()
