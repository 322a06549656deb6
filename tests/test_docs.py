"""The documentation's promises: the demo shows its cases, commands and code blocks run.

The doctests of the pages (``>>>`` blocks) run in ``tests/test_docstrings.py``; here the
other code the pages and the README show.
"""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc"
README = ROOT / "README.md"
PAGES = sorted(p for p in DOC.glob("*.rst") if p.name != "sg_execution_times.rst")  # generated


def _demo_output(capsys):
    from softkmeans.__main__ import main

    assert main(["demo"]) == 0
    return capsys.readouterr().out


def test_demo_shows_what_the_estimators_add(capsys):
    out = _demo_output(capsys)
    # 1. a single KMeans start is clearly worse, annealing reaches the best fit
    single = float(re.search(r"KMeans \(scikit-learn\), n_init=1, random_state=0 +([\d.]+)",
                             out).group(1))
    annealed = float(re.search(r"AnnealedKMeans\(\), random_state=0, 1 and 2 +([\d.]+)",
                               out).group(1))
    assert single > 1.1
    assert annealed == pytest.approx(1.0, abs=5e-4)
    # 2. soft memberships: a point between the clusters gets a share of both
    middle = re.search(r"\(1\.5, 0\.0\) +\d +([\d.]+) +([\d.]+)", out)
    assert 0.2 < float(middle.group(1)) < 0.8
    assert 0.2 < float(middle.group(2)) < 0.8
    # 3. exactness, 4. the warning
    assert "same labels: yes" in out
    assert "CriticalTemperatureWarning" in out
    # no compilation detail, no time column
    assert "compil" not in out.lower()
    assert " s\n" not in out and "time" not in out.lower()


def test_readme_test_command_is_the_one_ci_runs():
    """CI runs the README's test command verbatim: the two must not drift apart."""
    ci = (ROOT / ".ci" / "run").read_text()
    command = ci.split("# --- the README's test command, verbatim ---\n")[1].strip()
    assert f"```bash\n{command}\n```" in README.read_text()


def test_readme_demo_command_is_the_cli_demo():
    assert "```bash\npip install . && python -m softkmeans demo\n```" in README.read_text()


#: Literal blocks of Python that need what a test machine lacks, keyed by page and a line
#: of the block: the replacements that stand in for it, and what the result must be. Each
#: block runs in a fresh interpreter, as a reader's script would.
STAND_INS = {
    ("scaling.rst", 'Client("tcp://scheduler.example.org:8786")'): (
        "dask.distributed", [  # a cluster and storage every worker reads
            ("from distributed import Client", "from distributed import Client, LocalCluster"),
            ('Client("tcp://scheduler.example.org:8786")',
             "Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=False))"),
            ('da.from_zarr("s3://bucket/features.zarr")',
             "da.random.default_rng(0).standard_normal((20_000, 8), chunks=5_000)")],
        "assert labels.compute().shape == (20_000,) and labels.chunks == X.chunks[:1]\n"
        "assert model.cluster_centers_.shape == (100, 8) and model.n_iter_ > 1\n"
        "client.close()\n"),
    ("performance.rst", 'device="cuda"'): (
        "torch", [  # a GPU: PyTorch's CPU tensors take the same array API path
            ('torch.randn(1_000_000, 64, device="cuda")', "torch.randn(1_000, 16)"),
            ("n_clusters=100", "n_clusters=10")],
        # unseeded draws without clusters: the numpy fit may end at a nearby fixed point
        "assert isinstance(proba, torch.Tensor) and proba.shape == (1_000, 10)\n"
        "assert (proba.sum(axis=1) - 1).abs().max() < 1e-5\n"
        "assert model.cluster_centers_.dtype == torch.float32\n"
        "reference = SoftKMeans(n_clusters=10, random_state=0).fit(X.numpy())\n"
        "assert abs(model.inertia_ / reference.inertia_ - 1) < 0.01\n"),
}


def _literal_python(page):
    """Literal blocks (``::`` or ``code-block``) of a page that hold Python, not doctests."""
    blocks = re.findall(r"::(?: python)?\n\n((?:(?:   .*)?\n)+)", page.read_text())
    python = re.compile(r"^\s*(from \w|import \w|\w+ = \w+\()", re.M)
    return [textwrap.dedent(b) for b in blocks if python.search(b) and ">>>" not in b]


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "torch.rst"],
                         ids=lambda p: p.name)
def test_python_in_the_pages_runs_as_a_doctest(page):
    """Python that a page shows is a ``>>>`` block, which test_docstrings runs, or a block
    that runs with stand-ins (torch.rst's blocks run in tests/test_torch.py)."""
    for block in _literal_python(page):
        assert any(page.name == name and line in block for name, line in STAND_INS), (
            f"{page.name} shows Python that no test runs; write it as a doctest:\n{block}")


@pytest.mark.parametrize(("page", "line"), STAND_INS, ids=[p for p, _ in STAND_INS])
def test_blocks_for_a_cluster_or_a_gpu_run_with_stand_ins(page, line):
    module, replacements, checks = STAND_INS[page, line]
    pytest.importorskip(module)
    [code] = [b for b in _literal_python(DOC / page) if line in b]
    for old, new in replacements:
        assert old in code, f"{page}: the block no longer has {old!r}"
        code = code.replace(old, new)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("SCIPY_ARRAY_API", None)  # the GPU block sets it, as a reader's script does
    done = subprocess.run([sys.executable, "-c", code + checks], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


def test_readme_python_blocks_run_in_order():
    """The README's Python blocks run one after the other, as a reader would paste them."""
    namespace = {}
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", README.read_text(), re.S)):
        exec(compile(code, f"README.md[{i}]", "exec"), namespace)


def _commands(page):
    """Shell commands of the page's literal blocks that run a script of the repository."""
    text = page.read_text().replace("\\\n", " ")
    return re.findall(r"python (benchmarks/\w+\.py|doc/images/\w+\.py)([^\n]*)", text)


COMMANDS = sorted({(page.name, script, args.split("#")[0].strip())
                   for page in [*PAGES, README] for script, args in _commands(page)})


@pytest.mark.parametrize(("page", "script", "args"), COMMANDS,
                         ids=[f"{p}:{s}" for p, s, _ in COMMANDS])
def test_commands_of_the_pages_name_real_options(page, script, args):
    """Every script a page tells a reader to run exists and accepts the options it shows."""
    path = ROOT / script
    assert path.exists(), f"{page} runs {script}, which does not exist"
    options = set(re.findall(r"(--[\w-]+)", args))
    if not options:
        return
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    for option in options:
        assert option in done.stdout, f"{page}: {script} has no option {option}"


def test_pages_carry_no_lab_notebook():
    """Dates, commit hashes, issue numbers and the state of the build machine stay out."""
    patterns = [r"\b20\d\d-\d\d-\d\d\b", r"\bcommit [0-9a-f]{7,}\b", r"\bissue \d+",
                r"heavy lock", r"other jobs", r"OLD_CHECKOUT", r"SOFTKMEANS_EXAMPLE_SMALL",
                r"cannot be \w+ here"]
    texts = {page.name: page.read_text() for page in PAGES if page.name != "torch.rst"}
    texts["examples/README.txt"] = (ROOT / "examples" / "README.txt").read_text()
    texts["reproduction/report.md"] = (DOC / "reproduction" / "report.md").read_text()
    texts["README.md"] = README.read_text()
    for name, text in texts.items():
        for pattern in patterns:
            assert not re.search(pattern, text), f"{name} matches {pattern!r}"
