"""Dask collections: fits over blocks equal in-memory fits; inference is lazy and blockwise."""

import os
import subprocess
import sys

import numpy as np
import pytest
from _helpers import make_mixture
from sklearn.base import clone

from softkmeans import AnnealedKMeans, EntmaxKMeans, SoftKMeans

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

ESTIMATORS = {
    "soft-auto": lambda init: SoftKMeans(4, init=init),
    "soft-fixed": lambda init: SoftKMeans(4, sigma=0.6, init=init, certify=True),
    "soft-gradient": lambda init: SoftKMeans(4, sigma=0.6, algorithm="gradient", init=init),
    "entmax-auto": lambda init: EntmaxKMeans(4, init=init, certify=True),
    "entmax-reseed": lambda init: EntmaxKMeans(4, sigma=0.2, init=init),
}


@pytest.fixture(scope="module")
def data():
    X, _, means = make_mixture(n_per=500, k=4, d=3, spread=0.5, scale=3.0, seed=0)
    weights = np.random.RandomState(1).uniform(0.2, 3.0, len(X))
    return X, weights, means + 0.4


def _chunked(X, chunks):
    return da.from_array(X, chunks=(chunks, X.shape[1]))


def _assert_same_fit(a, b):
    assert hasattr(a, "bounds_") == hasattr(b, "bounds_") == a.certify
    certified = ("critical_sigma_",) if a.certify else ()
    for name in ("cluster_centers_", "sigma_", "objective_", "inertia_", "margin_min_",
                 "gap_", *certified):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-10, atol=1e-10,
                                   err_msg=name)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(b.labels_.compute(), a.labels_)
    np.testing.assert_allclose(b.margins_.compute(), a.margins_, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("weighted", [False, True])
def test_a_fit_over_blocks_equals_the_in_memory_fit(data, name, weighted):
    X, weights, init = data
    w = weights if weighted else None
    dw = _chunked(weights[:, None], 300)[:, 0] if weighted else None  # other chunks than X
    a = ESTIMATORS[name](init).fit(X, sample_weight=w)
    b = ESTIMATORS[name](init).fit(_chunked(X, 450), sample_weight=dw)
    _assert_same_fit(a, b)
    assert type(b.cluster_centers_) is np.ndarray
    if isinstance(a, EntmaxKMeans):
        assert b.n_unidentified_ == pytest.approx(a.n_unidentified_, rel=1e-10)


def test_reseeding_and_coinciding_starts_over_blocks(data):
    X, _, init = data
    far = np.vstack([init[:3], [[50.0, 50.0, 50.0]]])  # an empty cluster: reseeded
    copies = np.vstack([init[:2], init[:2]])  # equal starts: moved apart
    for model in (EntmaxKMeans(4, sigma=0.3, init=far), SoftKMeans(4, sigma=0.5, init=copies)):
        a = clone(model).fit(X)
        b = clone(model).fit(_chunked(X, 450))
        np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=1e-10,
                                   atol=1e-10)


def test_empty_and_unknown_chunks(data):
    X, _, init = data
    a = SoftKMeans(4, init=init).fit(X)
    empty = da.from_array(X, chunks=((0, 900, 0, 1100, 0), (3,)))
    unknown = _chunked(X, 700)
    unknown = unknown[unknown[:, 0] > -1e9]  # a boolean mask: chunk sizes unknown
    assert np.isnan(unknown.chunks[0][0])
    for Z in (empty, unknown):
        _assert_same_fit(a, SoftKMeans(4, init=init).fit(Z))
        labels = a.predict(Z)
        assert labels.chunks[0] == Z.chunks[0] or np.isnan(labels.chunks[0][0])
        np.testing.assert_array_equal(labels.compute(), a.predict(X))


def test_float32_blocks(data):
    X, _, init = data
    X32 = X.astype(np.float32)
    a = SoftKMeans(4, init=init).fit(X32)
    b = SoftKMeans(4, init=init).fit(_chunked(X32, 500))
    assert b.cluster_centers_.dtype == np.float32
    np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_, atol=1e-5)  # float32
    assert b.transform(_chunked(X32, 500)).dtype == np.float32


def test_inference_is_lazy_and_chunked_like_the_input(data):
    X, weights, init = data
    model = SoftKMeans(4, init=init).fit(X)
    Z = _chunked(X, 333)
    for method in ("predict", "predict_proba", "transform", "score_samples"):
        out = getattr(model, method)(Z)
        assert isinstance(out, da.Array)
        assert out.chunks[0] == Z.chunks[0]
        expected = getattr(model, method)(X)
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(out.compute(), expected)
    assert model.score(Z) == pytest.approx(model.score(X), rel=1e-12)
    dw = _chunked(weights[:, None], 500)[:, 0]
    assert model.score(Z, sample_weight=dw) == pytest.approx(
        model.score(X, sample_weight=weights), rel=1e-12)
    assert isinstance(model.fit_predict(Z), da.Array)


def test_a_dask_dataframe_is_accepted_with_its_feature_names(data):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, _, init = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    a = SoftKMeans(4, init=init).fit(frame)
    b = SoftKMeans(4, init=init).fit(dd.from_pandas(frame, npartitions=3))
    np.testing.assert_array_equal(b.feature_names_in_, ["a", "b", "c"])
    _assert_same_fit(a, b)
    weighted = dd.from_pandas(frame.assign(w=np.arange(len(X)) % 3 + 1.0), npartitions=3)
    c = SoftKMeans(4, init=init).fit(weighted[["a", "b", "c"]], sample_weight=weighted["w"])
    d = SoftKMeans(4, init=init).fit(X, sample_weight=np.arange(len(X)) % 3 + 1.0)
    np.testing.assert_allclose(c.cluster_centers_, d.cluster_centers_, rtol=1e-10)
    renamed = dd.from_pandas(frame.rename(columns={"a": "z"}), npartitions=3)
    with pytest.raises(ValueError, match="feature names"):
        b.predict(renamed)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_seeding_over_blocks(data, init):
    X, weights, _ = data
    Z = _chunked(X, 400)
    dw = _chunked(weights[:, None], 400)[:, 0]
    fits = [SoftKMeans(4, init=init, n_init=1, random_state=seed).fit(Z, sample_weight=dw)
            for seed in (0, 0, 1)]
    np.testing.assert_array_equal(fits[0].cluster_centers_, fits[1].cluster_centers_)
    assert not np.array_equal(fits[0].cluster_centers_, fits[2].cluster_centers_)
    reference = SoftKMeans(4, random_state=0, n_init=3).fit(X, sample_weight=weights)
    assert fits[0].inertia_ <= 1.01 * reference.inertia_


def test_seeds_are_drawn_from_observations_of_positive_weight(data):
    from softkmeans._dask.engine import BlockwiseEngine
    from softkmeans._dask.seeding import weighted_candidates

    X, _, _ = data
    weights = np.zeros(len(X))
    weights[1::7] = 1.0  # row 0 has no weight
    engine = BlockwiseEngine(_chunked(X, 250), _chunked(weights[:, None], 250)[:, 0],
                             "auto", None)
    rng = np.random.RandomState(0)
    candidates, masses = weighted_candidates(engine, 4, rng)
    random_seeds = engine.draw_seeds("random", 4, rng)
    for rows in (candidates, random_seeds):
        found = [np.flatnonzero((X == row).all(axis=1)) for row in rows]
        assert all(len(r) == 1 and weights[r[0]] > 0 for r in found)
    assert len(candidates) > 4 and np.all(masses > 0)
    np.testing.assert_allclose(masses.sum(), weights.sum())


def test_reclustered_candidates_beat_a_kmeans_plusplus_pick(data):
    from sklearn.cluster import kmeans_plusplus
    from threadpoolctl import threadpool_limits

    from softkmeans._dask.engine import BlockwiseEngine
    from softkmeans._dask.seeding import recluster, weighted_candidates

    X, weights, _ = data
    engine = BlockwiseEngine(_chunked(X, 400), _chunked(weights[:, None], 400)[:, 0],
                             "auto", None)
    candidates, masses = weighted_candidates(engine, 8, np.random.RandomState(0))

    def cost(seeds):
        return masses @ ((candidates[:, None] - seeds) ** 2).sum(axis=2).min(axis=1)

    for seed in range(5):
        seeds = recluster(candidates, masses, 8, np.random.RandomState(seed), engine.n_samples)
        _, rows = kmeans_plusplus(candidates, 8, sample_weight=masses,
                                  random_state=np.random.RandomState(seed))
        assert cost(seeds) <= 0.9 * cost(candidates[rows])
        with threadpool_limits(2, user_api="openmp"):
            again = recluster(candidates, masses, 8, np.random.RandomState(seed),
                              engine.n_samples)
        np.testing.assert_array_equal(again, seeds)


def test_reclustering_costs_at_most_a_pass_over_the_data(monkeypatch):
    import softkmeans._dask.seeding as seeding

    made = []

    class Recorded(seeding.KMeans):
        def fit(self, X, y=None, sample_weight=None):
            made.append((self.n_init, self.max_iter))
            return super().fit(X, sample_weight=sample_weight)

    monkeypatch.setattr(seeding, "KMeans", Recorded)
    rng = np.random.RandomState(0)
    candidates = rng.normal(size=(2000, 2))
    masses = rng.uniform(1.0, 2.0, 2000)
    # few clusters: the full reclustering, ten starts to convergence
    seeding.recluster(candidates, masses, 5, rng, 10**7)
    # 200 clusters of 2,000 candidates from 50,000 rows: one start of 25 iterations (the
    # distances of one pass, 50,000 x 200, over 2,000 x 200 per iteration)
    seeding.recluster(candidates, masses, 200, rng, 50_000)
    # little data: the floor of the budget (10 million distances) sets the iterations
    seeding.recluster(candidates[:300], masses[:300], 200, rng, 300)
    assert made == [(10, 300), (1, 25), (1, 166)]


def test_one_reduction_per_iteration(data):
    from dask.callbacks import Callback

    X, _, init = data
    Z = _chunked(X, 500)

    def computes(max_iter):
        count = []
        with Callback(start=lambda dsk: count.append(1)):
            SoftKMeans(4, sigma=0.6, init=init, max_iter=max_iter, tol=0).fit(Z)
        return len(count)

    assert computes(8) - computes(3) == 5


def test_bad_collections_are_refused(data):
    X, weights, init = data
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SoftKMeans(4).fit(_chunked(bad, 500))
    with pytest.raises(ValueError, match="2D"):
        SoftKMeans(4).fit(da.ones(10, chunks=5))
    with pytest.raises(ValueError, match="Negative"):
        SoftKMeans(4).fit(_chunked(X, 500), sample_weight=-weights)
    with pytest.raises(TypeError, match="dtype"):
        SoftKMeans(4).fit(_chunked(X.astype(complex), 500))
    model = SoftKMeans(4, init=init).fit(X)
    with pytest.raises(ValueError, match="features"):
        model.predict(da.ones((10, 2), chunks=5))


def test_annealing_predicts_on_blocks_but_fits_in_memory(data):
    X, _, _ = data
    model = AnnealedKMeans(4).fit(X)
    np.testing.assert_array_equal(model.predict(_chunked(X, 500)).compute(), model.predict(X))
    with pytest.raises(TypeError, match="dask"):
        AnnealedKMeans(4).fit(_chunked(X, 500))


def test_a_local_cluster_of_two_processes(data):
    distributed = pytest.importorskip("distributed")
    X, weights, _ = data
    means = make_mixture(n_per=500, k=4, d=3, spread=0.5, scale=3.0, seed=0)[2]
    a = SoftKMeans(4, sigma=0.5, init=means).fit(X, sample_weight=weights)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        Z = _chunked(X, 500)
        b = SoftKMeans(4, sigma=0.5, init=means).fit(
            Z, sample_weight=_chunked(weights[:, None], 500)[:, 0])
        labels = b.predict(Z).compute()
    np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=1e-10)
    np.testing.assert_array_equal(labels, a.labels_)


def test_nothing_imports_dask_until_a_dask_collection_arrives():
    code = (
        "import sys, numpy as np\n"
        "from softkmeans import SoftKMeans, EntmaxKMeans\n"
        "X = np.random.RandomState(0).rand(50, 2)\n"
        "m = SoftKMeans(2, random_state=0).fit(X)\n"
        "m.predict(X); m.predict_proba(X); m.transform(X); m.score(X)\n"
        "EntmaxKMeans(2, random_state=0).partial_fit(X)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('dask', 'distributed')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _cupy_with_a_device():
    """CuPy when it imports and sees a CUDA device, else None."""
    try:
        import cupy
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # not installed, no driver, no device: all mean no GPU here
        return None


@pytest.mark.gpu
@pytest.mark.skipif(_cupy_with_a_device() is None, reason="needs CuPy and a CUDA device")
@pytest.mark.parametrize("name", ["soft-fixed", "entmax-auto"])
def test_cupy_blocks_fit_as_numpy_blocks(data, name):
    """Blocks that are CuPy arrays run the CuPy engine: the fit and the inference over
    them are those of the host's data, to the GPU's rounding."""
    cupy = _cupy_with_a_device()
    X, _, init = data
    host = ESTIMATORS[name](init).fit(X)
    on_gpu = _chunked(X, 450).map_blocks(cupy.asarray)
    model = ESTIMATORS[name](init).fit(on_gpu)
    assert type(model.cluster_centers_) is np.ndarray
    np.testing.assert_allclose(model.cluster_centers_, host.cluster_centers_, rtol=1e-8,
                               atol=1e-10)
    assert model.objective_ == pytest.approx(host.objective_, rel=1e-8)
    assert model.n_iter_ == host.n_iter_
    labels = model.predict(on_gpu)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(cupy.asnumpy(labels.compute()), host.predict(X))


def _raising_block(block):
    raise RuntimeError("a task of the collection failed")


@pytest.mark.parametrize("fault", ["nan", "task"])
def test_a_failed_fit_leaves_the_estimator_as_it_was(data, fault):
    """Unfitted stays unfitted (NotFittedError, not an AttributeError); fitted keeps its fit."""
    from sklearn.exceptions import NotFittedError

    X, _, init = data
    if fault == "nan":
        bad = X.copy()
        bad[700, 1] = np.nan
        bad = _chunked(bad, 500)
    else:
        bad = _chunked(X, 500)
        bad = da.concatenate([bad[:1000], bad[1000:].map_blocks(_raising_block, dtype=X.dtype)])
    model = SoftKMeans(4, init=init)
    with pytest.raises((ValueError, RuntimeError)):
        model.fit(bad)
    assert not [name for name in vars(model) if name.endswith("_")]
    with pytest.raises(NotFittedError):
        model.predict(X)
    model.fit(X)
    state = {name: value for name, value in vars(model).items() if name.endswith("_")}
    with pytest.raises((ValueError, RuntimeError)):
        model.fit(bad)
    assert set(vars(model)) >= set(state)
    for name, value in state.items():
        assert getattr(model, name) is value, name


_BLAS_AFTER_A_DASK_FIT = """
import numpy as np, dask, dask.array as da
from threadpoolctl import threadpool_info
from softkmeans import SoftKMeans
from softkmeans._engines import _blas
blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
before = blas()
X = da.from_array(np.random.default_rng(0).normal(size=(4000, 4)), chunks=(500, 4))
with dask.config.set(scheduler="threads", num_workers=4):
    SoftKMeans(3, random_state=0).fit(X)
SoftKMeans(3, random_state=0, n_threads=2).fit(X.compute())
assert not _blas._holders and blas() == before, (blas(), before)
print(before)
"""


def test_blas_gets_its_threads_back_after_a_dask_fit():
    """Block tasks on dask's threads hold BLAS at one thread; the last to end, on whatever
    thread, gives BLAS back the threads it had (threadpoolctl heeds only the thread that
    set a shared OpenBLAS pool last, unless that thread lets go)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", _BLAS_AFTER_A_DASK_FIT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
