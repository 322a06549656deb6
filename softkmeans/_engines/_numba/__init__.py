"""The numba engine: compiled CPU kernels, one module per job.

- :mod:`.engine`: :class:`~.engine.NumbaEngine`, the passes of the engine
  contract, run as parallel kernels;
- :mod:`.kernels`: the pass kernels over dense and CSR data;
  :mod:`.rows`: one row's responsibilities; :mod:`.elementary`: vectorizable
  ``exp`` and ``log1p``; :mod:`.transpose`: a chunk's transpose;
- :mod:`.layout`: how a dense pass splits its work; :mod:`.threads`: the
  threads of a pass; :mod:`.blas`: BLAS held to one thread meanwhile;
- :mod:`.jit`: the options every kernel is compiled with; :mod:`.compile`:
  compilation ahead of a fit (``python -m softkmeans compile``);
- :mod:`.hartigan`, :mod:`.priors`: kernels of the local search and the
  mass-constrained fits (:mod:`softkmeans._core`).

Nothing is imported here: each module pulls in only what it needs.
"""
