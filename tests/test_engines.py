"""Every engine against the numpy reference, through the written contract (``Engine``).

The array engine runs on numpy and, with dense data, in the other namespaces
of :func:`_helpers.array_namespaces` (array-api-strict, PyTorch; CUDA ones
where a GPU exists).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import array_namespaces, to_namespace

from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans._engines._array import ArrayEngine, NumpyEngine
from softkmeans._engines._contract import Engine
from softkmeans._engines._namespace import to_numpy
from softkmeans._engines._numba.engine import NumbaEngine


def _array_engine_in(namespace):
    """The array engine on X moved to ``namespace`` (dense X: CSR matrices are SciPy's)."""
    def make(X, weights):
        if sp.issparse(X):
            pytest.skip("CSR data are SciPy (numpy) matrices")
        return ArrayEngine(to_namespace(X, namespace), weights)
    return make


ENGINES = [pytest.param(engine, id=engine.__name__)
           for engine in (NumpyEngine, ArrayEngine, NumbaEngine)] + [
    pytest.param(_array_engine_in(p.values[0]), id=f"ArrayEngine-{p.id}", marks=p.marks)
    for p in array_namespaces() if p.id != "numpy"]
SPECS = {"hard": RelaxationSpec("hard"), "softmax": RelaxationSpec("softmax", 0.7),
         "entmax": RelaxationSpec("entmax", 0.7, 1.5)}
#: Dense float32 data are multiplied in float32 by the numba and array engines.
RTOL = {np.float64: 1e-9, np.float32: 1e-4}


def _data(dtype, sparse):
    rng = np.random.default_rng(0)
    means = rng.uniform(-3, 3, size=(5, 8))
    X = means[rng.integers(0, 5, 700)] + rng.normal(size=(700, 8))
    if sparse:
        X[rng.uniform(size=X.shape) < 0.3] = 0.0
    X = X.astype(dtype)
    return (sp.csr_matrix(X) if sparse else X), rng.uniform(0.5, 2, 700), means + 0.2


def _close(got, want, rtol):
    got = np.asarray(to_numpy(got), dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("Engine_", ENGINES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_engine_keeps_the_contract_and_matches_the_reference(Engine_, dtype, sparse):
    X, weights, centers = _data(dtype, sparse)
    engine, reference = Engine_(X, weights), NumpyEngine(X, weights)
    assert isinstance(engine, Engine)
    rtol = RTOL[dtype]
    _close(engine.x_sq, reference.x_sq, 1e-12)
    assert engine.n_samples == X.shape[0]
    for spec in SPECS.values():
        got, want = engine.estep(centers, spec), reference.estep(centers, spec)
        for field in ("sums", "masses", "objective", "inertia", "gap", "margins", "dmin"):
            _close(getattr(got, field), getattr(want, field), rtol)
        clear = want.margins > 1e-3
        np.testing.assert_array_equal(got.labels[clear], want.labels[clear])
        _close(engine.responsibilities(centers, spec), reference.responsibilities(centers, spec),
               rtol)
    _close(engine.sq_distances(centers), reference.sq_distances(centers), rtol)
    _close(engine.max_sq_distances(centers), reference.max_sq_distances(centers), rtol)
    _close(engine.log_sum_exp(centers, 0.7), reference.log_sum_exp(centers, 0.7), rtol)
    np.testing.assert_array_equal(engine.row(3), reference.row(3))


def test_the_layers_above_reach_engines_only_through_the_contract():
    """No estimator or ``_core`` module asks an engine what it can do, or imports its insides."""
    import pathlib
    import re

    package = pathlib.Path(__file__).resolve().parents[1] / "softkmeans"
    asks = [str(path) for path in package.rglob("*.py")
            if "hasattr(engine" in path.read_text(encoding="utf-8")]
    inside = re.compile(r"_engines\._numba|from \.\._engines\._")
    climbs = [str(path) for path in (package / "_core").rglob("*.py")
              if inside.search(path.read_text(encoding="utf-8"))]
    assert asks == [] and climbs == []
