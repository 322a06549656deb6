"""The derived passes, written once over row blocks of squared distances.

An engine that yields the squared distances of its row blocks to any
centroids (``_blocks``) and says how one block turns into responsibilities
and into log-sum-exps gets from :class:`BlockEngine` the passes of the
contract (:class:`._contract.Engine`) that write or reduce a value per row and
centroid: ``responsibilities``, ``sq_distances`` (``transform``),
``max_sq_distances`` and ``log_sum_exp`` (the diagnostics' and ``score``'s).
The array-namespace engines (the numpy reference, its float32 form that CI
runs for the GPU, the CuPy engine) share them; the numba engine computes them
in its kernels instead.
"""

import numpy as np

from ._in_memory import InMemorySteps
from ._namespace import host_dtype, to_numpy

__all__ = ["BlockEngine"]


class BlockEngine(InMemorySteps):
    """The derived passes over ``_blocks``; subclasses provide the blocks.

    A subclass defines ``n_samples``, ``sample_weight`` (host float64) and:

    - ``_blocks(centers)``: ``(rows, D)`` over row blocks, ``D`` the block's
      squared distances to ``centers`` (``xp`` array, compute dtype);
    - ``_block_responsibilities(D, spec)`` and ``_block_log_sum_exp(D, sigma)``;
    - ``_compute_dtype``: the dtype of the blocks' distances, also that of
      the outputs when a caller names none.

    ``xp`` and ``device`` are the blocks' array namespace (of the array API
    standard) and device; ``_output`` moves a result to where the input lives.
    """

    def _output(self, a):
        return a

    def _new_output(self, centers, dtype):
        """An empty (n_samples x n_clusters) result of ``dtype`` (float32 or float64 of any
        namespace; None: the compute dtype), in the blocks' namespace."""
        if dtype is None:
            dtype = self._compute_dtype
        else:
            dtype = self.xp.float32 if host_dtype(dtype) == np.float32 else self.xp.float64
        return self.xp.empty((self.n_samples, centers.shape[0]), dtype=dtype, device=self.device)

    def _put(self, out, rows, values):
        """``out[rows] = values``, cast to the dtype of ``out`` (the standard does not cast)."""
        out[rows, ...] = self.xp.astype(values, out.dtype, copy=False)

    def responsibilities(self, centers, spec, dtype=None):
        """Responsibilities of every observation, shape (n_samples, n_clusters), in ``dtype``.

        Each block is written into the output as it is computed: besides the
        output, only one block's values are allocated.
        """
        out = self._new_output(centers, dtype)
        for rows, D in self._blocks(centers):
            self._put(out, rows, self._block_responsibilities(D, spec))
        return self._output(out)

    def sq_distances(self, centers, dtype=None, sqrt=False):
        """Squared distances to every centroid, shape (n_samples, n_clusters), in ``dtype``.

        ``sqrt=True`` gives the distances themselves, each the square root of
        the squared distance in the compute dtype, then rounded to ``dtype``.
        """
        out = self._new_output(centers, dtype)
        for rows, D in self._blocks(centers):
            self._put(out, rows, self.xp.sqrt(D) if sqrt else D)
        return self._output(out)

    def max_sq_distances(self, points):
        """``max_i ||x_i - p||^2`` over the observations with positive weight, for every point.

        Host float64; 0 where no observation has positive weight.
        """
        xp = self.xp
        out = xp.zeros(points.shape[0], dtype=self._compute_dtype, device=self.device)
        positive_weight = self._weights_on_device() > 0
        for rows, D in self._blocks(points):
            out = xp.maximum(out, xp.max(xp.where(positive_weight[rows, None], D, 0.0), axis=0))
        return np.asarray(to_numpy(out), dtype=np.float64)

    def _weights_on_device(self):
        """``sample_weight`` in the blocks' namespace."""
        return self.sample_weight

    def log_sum_exp(self, centers, sigma):
        """``log sum_j exp(-d_ij / (2 sigma^2))`` of every observation, in float64."""
        out = self.xp.empty(self.n_samples, dtype=self.xp.float64, device=self.device)
        for rows, D in self._blocks(centers):
            self._put(out, rows, self._block_log_sum_exp(D, sigma))
        return self._output(out)
