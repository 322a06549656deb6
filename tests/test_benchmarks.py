"""Every asv benchmark runs its setup and one call at a tiny size, so the suite cannot rot."""

import importlib.util
import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asv_bench"))

from benchmarks import cluster, common, startup  # noqa: E402

TINY = (300, 4)
SUITES = [obj for name, obj in vars(cluster).items()
          if inspect.isclass(obj) and name.endswith("Suite")]
METHODS = [(suite, name) for suite in SUITES for name in dir(suite)
           if name.startswith(("time_", "peakmem_", "track_"))]


def test_every_estimator_has_a_suite():
    names = {suite.__name__ for suite in SUITES}
    assert {"SoftKMeansSuite", "EntmaxKMeansSuite", "AnnealedKMeansSuite",
            "SklearnKMeansSuite", "FaissKMeansSuite"} <= names


@pytest.mark.parametrize(("suite", "method"), METHODS,
                         ids=[f"{s.__name__}.{m}" for s, m in METHODS])
def test_benchmark_runs_at_tiny_size(suite, method):
    bench = suite()
    try:
        bench.setup(*TINY)
    except NotImplementedError as exc:  # asv's way to skip (faiss missing)
        pytest.skip(str(exc))
    result = getattr(bench, method)(*TINY)
    if method.startswith("track_"):
        assert result > 0


def test_temperatures_are_ordered():
    sigmas = common.temperatures(*TINY)
    assert 0 < sigmas["identified"] <= sigmas["low"]
    assert sigmas["high"] > 0


def _script(name):
    """The module of ``benchmarks/<name>.py`` (a script, not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Every cached case, and the cheapest cold one (a cold case compiles for seconds).
STARTUP_CASES = [(layout, dtype, "cached") for layout in startup.LAYOUTS
                 for dtype in startup.DTYPES] + [("CSR", "float64", "cold")]


@pytest.mark.parametrize("case", STARTUP_CASES, ids=["-".join(c) for c in STARTUP_CASES])
def test_startup_benchmark_runs_in_a_fresh_process(case):
    bench = startup.StartupSuite()
    bench.setup(*case)
    seconds = _script("compile_time").seconds_in_fresh_process(*bench.timeraw_first_fit(*case))
    assert seconds > 0


def test_import_benchmark_runs_in_a_fresh_process():
    assert _script("compile_time").seconds_in_fresh_process(startup.timeraw_import()) > 0


def test_startup_code_rejects_unknown_cases():
    with pytest.raises(ValueError, match="unknown case"):
        startup.first_fit_code("dense", "float16", "cached")


def test_compile_records_separate_each_function_from_its_callees():
    from numba import njit

    @njit(cache=False)
    def inner(x):
        return x * 2.0

    @njit(cache=False)
    def outer(x):
        return inner(x) + 1.0

    script = _script("compile_time")
    records = script.compile_records("value = outer(1.5)", {"outer": outer})
    compiles = {name.rsplit(".", 1)[-1]: (own, total) for name, own, total in records["compiles"]}
    assert set(compiles) == {"inner", "outer"}
    own, total = compiles["outer"]
    assert 0 < own < total
    assert total == pytest.approx(own + compiles["inner"][1])
    assert 0 < records["llvm"] < records["wall"]


def test_compile_breakdown_of_a_cold_first_fit(capsys):
    script = _script("compile_time")
    records = script.breakdown_in_fresh_process("CSR", "float64")
    names = {name for name, _, _ in records["compiles"]}
    assert "kernels.csr_pass" in names
    script.print_breakdown(records, top=3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("first fit") and "LLVM" in lines[0]
    assert lines[2].startswith("kernels.csr_pass")  # it holds the others
    assert "more" in lines[-1]


@pytest.mark.parametrize(("init", "installed"), [("array", True), ("k-means++", False)])
def test_large_first_fits_print_cached_and_cold(init, installed, capsys):
    """And, with --installed, the first fit of an environment's installed package (the one
    running the tests has it: the README's test command installs it)."""
    extra = ["--installed", sys.executable] if installed else []
    assert _script("compile_time").main(["--sizes", "300x4x3", "--init", init, *extra]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert f"init {init}" in header
    columns = "cached s    cold s" + ("  installed s" if installed else "")
    assert header.endswith(columns)
    assert row.startswith("300 x 4, k = 3")
    values = row.split()[-3 if installed else -2:]
    assert all(float(value) > 0 for value in values)


def test_size_argument_must_be_three_integers():
    with pytest.raises(SystemExit):
        _script("compile_time").main(["--sizes", "300x4"])


def test_compile_breakdown_rejects_unknown_cases():
    with pytest.raises(SystemExit):
        _script("compile_time").main(["--breakdown", "dense", "float16"])


def test_compare_prints_every_contender_with_its_ratios(capsys, monkeypatch):
    compare = _script("compare")
    monkeypatch.setattr(compare, "SETTLE", 0.0)
    n, k = TINY
    assert compare.main(["--sizes", f"{n}x{k}", "--repeats", "3", "--annealed", "--memory"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {}
    for line in lines:
        if line.startswith("| ") and not line.startswith("| contender"):
            name, ms, ratio, gemm = line.strip("| ").split(" | ")
            rows[name] = (float(ms), ratio, float(gemm))
    expected = {"GEMM X@C.T", "sklearn Lloyd", "numpy softmax", *(name for name, _ in compare.OURS)}
    if importlib.util.find_spec("faiss") is not None:
        expected.add("FAISS")
    assert set(rows) == expected
    assert rows["sklearn Lloyd"][1] == "1.00 (1.00-1.00)"
    assert rows["GEMM X@C.T"][2] == 1.0
    # Two decimals: a tiny time or ratio may print as 0.00, never as a negative or nan.
    assert all(ms >= 0 and float(ratio.split()[0]) >= 0 and gemm > 0
               for ms, ratio, gemm in rows.values())
    memory = next(line for line in lines if line.startswith("fit memory: peak RSS"))
    assert memory.endswith(f"X = {n * 64 * 4 / 1e6:.0f} MB")
    annealed = next(line for line in lines if line.startswith("AnnealedKMeans"))
    assert f"n={n:.0e} k={k}" in annealed and "x one KMeans fit" in annealed


def test_quality_distortion_is_kmeans_inertia():
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs

    quality = _script("quality")
    X, _ = make_blobs(500, n_features=3, centers=4, random_state=0)
    model = KMeans(4, n_init=1, random_state=0).fit(X)
    assert quality.distortion(X, model.cluster_centers_, chunk=128) == pytest.approx(
        model.inertia_, rel=1e-9)


def test_quality_distortion_of_sparse_rows_is_kmeans_inertia():
    from scipy import sparse
    from sklearn.cluster import KMeans

    quality = _script("quality")
    X = sparse.random(400, 60, density=0.1, format="csr", random_state=0)
    model = KMeans(5, n_init=1, random_state=0).fit(X)
    assert quality.distortion(X, model.cluster_centers_, chunk=128) == pytest.approx(
        model.inertia_, rel=1e-9)


def test_quality_quick_workloads_write_their_tables(tmp_path, capsys):
    quality = _script("quality")
    argv = ["--quick", "--datasets", "--colour-k", "16", "--repeats", "1", "--out", str(tmp_path)]
    assert quality.main(argv) == 0
    text = capsys.readouterr().out
    assert "## J / J*" not in text and not (tmp_path / "quality.png").exists()
    cases = [line.strip("| ").split(" | ") for line in
             text.split("## AnnealedKMeans() over KMeans(n_init=10) on the workloads")[1]
             .split("##")[0].splitlines() if line.startswith("|")][2:]
    # Every text and colour case (the colour samples of 5000 pixels, no whole image in
    # quick mode); the lognormal fits appear in the totals only.
    assert [(row[0], row[1], row[3]) for row in cases] == [
        ("text", "docstrings", "20"), ("text", "topics", "5"),
        *(("colour", f"{image} sample {s}", "16") for image in ("china", "flower")
          for s in range(2))]
    assert cases[1][2] == "200 x 2000"
    totals = [line.strip("| ").split(" | ") for line in
              text.split("## The workloads in total")[1].splitlines() if line.startswith("|")]
    assert [(row[0], row[1]) for row in totals[2:]] == [("text", "2"), ("colour", "4"),
                                                       ("lognormal", "9")]
    entries = json.loads((tmp_path / "quality.json").read_text())["workloads"]
    assert len(entries) == 15
    for entry in entries:
        assert 0.5 < entry["J_ratio"] < 2 and entry["time_ratio"] > 0


def test_quality_quick_battery_writes_its_tables(tmp_path, capsys):
    quality = _script("quality")
    names = ["iris", "blobs20"]
    argv = ["--quick", "--datasets", *names, "--workloads", "--ref-runs", "3", "--repeats", "1",
            "--seeds", "0", "1", "--out", str(tmp_path)]
    assert quality.main(argv) == 0
    text = capsys.readouterr().out
    assert (tmp_path / "quality.md").read_text() == text
    assert (tmp_path / "quality.png").stat().st_size > 0
    rst = (tmp_path / "quality.rst").read_text()
    assert rst.count(".. list-table::") == 5 and "|" not in rst
    contenders = list(quality.CONTENDERS)
    sections = {}
    for block in text.split("\n## ")[1:]:
        title, *lines = block.splitlines()
        sections[title] = [line.strip("| ").split(" | ") for line in lines if line.startswith("|")]
    ratios = sections["J / J* (J* = best of 3 single-start KMeans runs)"]
    assert ratios[0] == ["dataset", "J*", *contenders]
    assert [row[0].split()[0] for row in ratios[2:]] == names
    times = sections["Fit time / KMeans(n_init=10)"]
    total = times[-1]
    assert total[0] == "**total**" and total[2 + contenders.index("KMeans(n_init=10)")] == "1.00"
    assert len(sections["ARI against the true labels"]) == 2 + len(names)
    assert len(sections["AnnealedKMeans(): J / J* over random_state in 0 1"]) == 2 + len(names)
    results = json.loads((tmp_path / "quality.json").read_text())["datasets"]
    for result in results:
        entries = result["contenders"]
        assert set(entries) == set(contenders)
        # KMeans(n_init=1, random_state=0) is one of the reference runs; on these data
        # every start of KMeans(n_init=10) reaches the same best fit.
        for name in ("KMeans(n_init=1)", "KMeans(n_init=10)"):
            assert entries[name]["J_ratio"] >= 1 - 1e-9
        assert all(entry["seconds"] > 0 for entry in entries.values())
        assert 0 < result["sigma"]["same_start_ratio"] and len(result["annealed_seeds"]) == 2


def test_streaming_benchmark_runs_at_tiny_size(capsys):
    streaming = _script("streaming")
    for case in ("minibatch", "dead"):
        streaming.main([case, "--n", "3000", "--d", "4", "--k", "5", "--batch-size", "500"])
    out = capsys.readouterr().out
    assert "MiniBatchKMeans x3" in out and "centroids reseeded" in out


def test_scaling_benchmark_reads_the_file_by_blocks(tmp_path):
    scaling = _script("scaling")
    path = tmp_path / "mixture.npy"
    scaling.make_data(path, 1000, 3, 4, rows=300)
    X = scaling.file_blocks(path, rows=400)
    assert X.chunks[0] == (400, 400, 200)
    np.testing.assert_array_equal(X.compute(), np.load(path))


def test_fit_cost_quick_run_writes_its_table(tmp_path, capsys):
    fit_cost = _script("fit_cost")
    names = ["iris", "uniform8"]
    results, dask_rows = fit_cost.main(["--quick", "--datasets", *names, "--repeats", "1",
                                        "--out", str(tmp_path)])
    assert dask_rows is None and [r["name"] for r in results] == names
    text = (tmp_path / "fit_cost.md").read_text()
    assert text in capsys.readouterr().out and "**median / max**" in text
    assert ".. list-table::" in (tmp_path / "fit_cost.rst").read_text()
    for result in results:
        anchor = result["contenders"]["KMeans(n_init=1)"]
        assert anchor["time_ratio"] == 1.0 and anchor["J_ratio"] == 1.0
        for name in ("SoftKMeans()", "EntmaxKMeans()"):
            entry = result["contenders"][name]
            assert not entry["convergence_warning"] and entry["n_iter"] >= 1
            assert 0.9 < entry["J_ratio"] < 1.1
    saved = json.loads((tmp_path / "fit_cost.json").read_text())
    assert [r["name"] for r in saved["results"]] == names


def test_fit_cost_compares_dask_fits_by_iterations(monkeypatch):
    pytest.importorskip("dask_ml")
    fit_cost = _script("fit_cost")
    monkeypatch.setattr(fit_cost, "DASK_SPREADS", (3.0,))
    args = fit_cost.argparse.Namespace(quick=True, seed=0, repeats=1, budget=1.0, clock="wall")
    rows = fit_cost.dask_comparison(args)["rows"]
    assert [(r["contender"], r["start"]) for r in rows] == [
        ("dask-ml KMeans", "own"), ("SoftKMeans()", "own"), ("EntmaxKMeans()", "own"),
        ("SoftKMeans()", "dask-ml's"), ("EntmaxKMeans()", "dask-ml's")]
    assert rows[0]["iter_ratio"] == rows[0]["time_ratio"] == rows[0]["J_ratio"] == 1.0
    for row in rows[1:]:
        assert row["iter_ratio"] == row["n_iter"] / rows[0]["n_iter"]
        assert not row["convergence_warning"] and 0.9 < row["J_ratio"] < 1.1
    iris = fit_cost.run_dataset("iris", fit_cost.DATASETS["iris"](True), args)
    text = fit_cost.report([iris], {"n": 1, "chunk": 1, "rows": rows}, [])
    assert "| 3 | SoftKMeans() | dask-ml's |" in text


def test_choose_k_quick_run_writes_its_tables(tmp_path, capsys):
    choose_k = _script("choose_k")
    rows = choose_k.main(["--quick", "--ref-runs", "2", "--gap-draws", "2",
                          "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert (tmp_path / "choose_k.md").read_text() == text
    assert (tmp_path / "choose_k.rst").read_text().count(".. list-table::") == 5
    assert json.loads((tmp_path / "choose_k.json").read_text()) == json.loads(json.dumps(rows))
    for row in rows:
        assert set(row["found"]) == set(choose_k.RECIPES)
        assert all(1 <= k <= row["K"] for k in row["found"].values())
        assert all(seconds > 0 for seconds in row["seconds"].values())
    blobs = [row for row in rows if row["name"].startswith("blobs")]
    assert all(row["found"]["AnnealedKMeans(auto)"] == row["k_true"] for row in blobs)
    for row in blobs:  # past k_true the path may sit above the reference (the docs' table)
        assert all(ratio <= 1.005 for k, ratio in row["path_J_ratios"].items()
                   if int(k) <= row["k_true"])
    assert all(row["fitted_J_ratio"] <= 1.005 for row in blobs)


def test_choose_k_times_every_recipe_in_rotated_order(monkeypatch):
    """Each recipe runs ``repeats`` times, first in turn, and its time is the median."""
    choose_k = _script("choose_k")
    calls = []
    ticks = iter(range(10_000))
    recipes = {name: (lambda X, K, name=name: calls.append(name) or 2) for name in "abc"}
    monkeypatch.setattr(choose_k, "RECIPES", recipes)
    found, seconds = choose_k.time_recipes(None, 4, 2, 3, lambda: next(ticks))
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert found == {"a": 2, "b": 2, "c": 2}
    assert seconds == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_knee_of_a_broken_line():
    knee = _script("choose_k").knee
    assert knee([10.0, 4.0, 1.0, 0.9, 0.8, 0.7]) == 2
    assert knee([1.0, 1.0, 1.0]) == 0


def test_choose_k_search_mends_an_elongated_cluster_cut_in_segments():
    """The benchmark's anisotropic set (k = 3, d = 2): restarts alone leave the path at
    k = 10 0.6% above the best of ten KMeans fits (one long cluster cut at the wrong
    places); the merge-and-split search brings it to that best."""
    choose_k = _script("choose_k")
    data = next(d for d in choose_k.unequal_and_anisotropic(1) if d.name == "anisotropic k=3 d=2")
    ratios, _ = choose_k.path_ratios(data.X, 10, 10)
    assert ratios[10] <= 1.0001
    assert max(ratios.values()) <= 1.005


def test_choose_k_insertion_mends_a_middle_k_of_overlapping_blobs():
    """The benchmark's two overlapping blobs (d = 2): cuts, merges and unions leave the
    path at k = 7 0.59% above the best of ten KMeans fits; a centroid inserted into the
    fit at k = 6 lets Lloyd's algorithm move every border, to 0.16% above it."""
    choose_k = _script("choose_k")
    data = next(d for d in choose_k.blobs(0) if d.name == "blobs k=2 d=2 overlapping")
    ratios, _ = choose_k.path_ratios(data.X, 10, 10)
    assert ratios[7] <= 1.002
    assert max(ratios.values()) <= 1.005
