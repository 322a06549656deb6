"""Run every gallery script at a small size so that none rots."""

import os
import re
import runpy
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


# plot_choosing_sigma scans sigma past the critical temperature on purpose (centroids merge).
@pytest.mark.filterwarnings("ignore::softkmeans.exceptions.CriticalTemperatureWarning")
@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, monkeypatch, tmp_path):
    import matplotlib.pyplot as plt

    monkeypatch.setenv("SOFTKMEANS_EXAMPLE_SMALL", "1")
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), f"{path.name} made no figure"
    plt.close("all")


def test_examples_exist():
    assert len(EXAMPLES) >= 3
    assert os.path.isdir(EXAMPLES[0].parent)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_gallery_pages_hide_the_small_size(path):
    """The tests' small size is set in blocks that sphinx-gallery leaves off the page."""
    shown = re.sub(r"# sphinx_gallery_start_ignore.*?# sphinx_gallery_end_ignore", "",
                   path.read_text(), flags=re.S)
    assert "SOFTKMEANS_EXAMPLE_SMALL" not in shown
    assert "SMALL" not in shown
