"""asv benchmarks of softkmeans (``asv run --python=same --quick`` from ``asv_bench/``)."""
