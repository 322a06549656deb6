"""asv benchmarks of softkmeans.

With softkmeans importable (``pip install -e .`` in the environment that runs
asv), from ``asv_bench/``: ``asv run --python=same --quick``.
"""
