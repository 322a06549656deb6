"""The numba engine: compiled CPU kernels, one module per job.

- :mod:`.engine`: :class:`~.engine.NumbaEngine`, the passes of the engine
  contract, run as parallel kernels;
- :mod:`.kernels`: the pass kernels over dense and CSR data;
  :mod:`.rows`: one row's responsibilities; :mod:`.entmax_chunk`: a chunk's
  entmax rows together; :mod:`.elementary`: vectorizable
  ``exp`` and ``log1p``; :mod:`.transpose`: a chunk's transpose;
- :mod:`.layout`: how a dense pass splits its work; :mod:`.threads`: the
  threads of a pass; :mod:`.blas`: BLAS held to one thread meanwhile;
- :mod:`.compile`: compilation ahead of a fit (``python -m softkmeans compile``),
  of these kernels and of the compiled loops that :mod:`softkmeans._core` owns;
  the options every kernel is compiled with are in :mod:`softkmeans._jit`.

Nothing is imported here: each module pulls in only what it needs.
"""
