"""Data generators and reference computations shared by the tests."""

import numpy as np
import scipy.sparse as sp


def make_mixture(n_per=60, k=3, d=2, spread=0.3, scale=4.0, seed=0):
    """Equal-weight isotropic Gaussian mixture with well separated means (shuffled)."""
    rng = np.random.RandomState(seed)
    angles = 2 * np.pi * np.arange(k) / k
    radius = scale / (2 * np.sin(np.pi / k)) if k > 1 else 0.0
    means = np.zeros((k, d))
    means[:, 0], means[:, 1 % d] = radius * np.cos(angles), radius * np.sin(angles)
    X = np.vstack([m + spread * rng.standard_normal((n_per, d)) for m in means])
    labels = np.repeat(np.arange(k), n_per)
    order = rng.permutation(len(X))
    return X[order], labels[order], means


def partition_distortion(X, weights, labels, k):
    """``J`` of a partition at its means, by definition."""
    return sum(float(weights[labels == j] @ np.sum(
        (X[labels == j] - np.average(X[labels == j], axis=0, weights=weights[labels == j]))
        ** 2, axis=1)) for j in range(k) if np.any(labels == j))


def noncanonical_csr(X):
    """CSR matrix equal to ``X`` whose every entry is stored twice (a quarter and three
    quarters of its value) and whose column indices are in decreasing order in each row."""
    canonical = sp.csr_matrix(X)
    starts, stops = canonical.indptr[:-1], canonical.indptr[1:]
    rows = list(zip(starts, stops, strict=True))
    indices = [np.tile(canonical.indices[a:b], 2)[::-1] for a, b in rows]
    data = [np.concatenate([0.25 * canonical.data[a:b], 0.75 * canonical.data[a:b]])[::-1]
            for a, b in rows]
    indptr = np.concatenate([[0], np.cumsum(2 * (stops - starts))])
    return sp.csr_matrix((np.concatenate(data), np.concatenate(indices), indptr),
                         shape=canonical.shape)


def _has_cuda_torch():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _has_cupy_gpu():
    try:
        from softkmeans._engines._cupy import gpu_available
    except ImportError:
        return False
    return gpu_available()


def array_namespaces():
    """``pytest.param((module name, device name))`` of the namespaces the array engine is
    tested on: numpy, array-api-strict (its default and a second device) and PyTorch on the
    CPU, then, marked ``gpu`` and skipped without one, PyTorch on CUDA and CuPy."""
    import pytest

    gpu = [pytest.mark.gpu]
    return [
        pytest.param(("numpy", None), id="numpy"),
        pytest.param(("array_api_strict", None), id="strict"),
        pytest.param(("array_api_strict", "device1"), id="strict-device1"),
        pytest.param(("torch", "cpu"), id="torch-cpu"),
        pytest.param(("torch", "cuda"), id="torch-cuda", marks=gpu + [pytest.mark.skipif(
            not _has_cuda_torch(), reason="needs PyTorch with a CUDA device")]),
        pytest.param(("cupy", None), id="cupy", marks=gpu + [pytest.mark.skipif(
            not _has_cupy_gpu(), reason="needs CuPy and a CUDA device")]),
    ]


def to_namespace(X, namespace):
    """``X`` (numpy) as an array of ``namespace = (module name, device name)``; the test is
    skipped when the module is not installed."""
    import pytest

    name, device = namespace
    if name == "numpy":
        return X
    xp = pytest.importorskip(name)
    if name == "array_api_strict":
        device = xp.Device(device) if device else None
    return xp.asarray(X, device=device) if device else xp.asarray(X)
