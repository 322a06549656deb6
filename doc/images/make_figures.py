"""Draw the static figures of the documentation into ``doc/images/``.

Run from the repository root (matplotlib needed)::

    python doc/images/make_figures.py

- ``responsibilities.png``: softmax and entmax-1.5 responsibilities in the plane, drawn by
  the gallery example ``examples/plot_responsibilities.py`` (the landing page shows it
  without running the gallery).
- ``fit_cost.png``: the whole-fit table of ``doc/performance.rst`` (the output of
  ``benchmarks/fit_cost.py``) as a plot, read from that page so that plot and table agree.
"""

import re
import runpy
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
DOC = HERE.parent
ROOT = DOC.parent


def read_fit_cost_table(page=DOC / "performance.rst"):
    """The whole-fit table of the performance page as ``(columns, rows)``.

    ``rows`` maps a dataset's label to one ``(time ratio, n_iter, J ratio)`` per contender
    column (the anchor ``KMeans`` column is left out: its ratios are 1 by definition).
    """
    text = page.read_text()
    start = text.index("Whole fits against KMeans")
    table = text[text.index(".. list-table::", start):]
    table = table[:table.index("\n\n", table.index("* - **median"))]
    rows = {}
    columns = None
    for record in re.split(r"\n   \* - ", table)[1:]:
        cells = [c.strip() for c in re.split(r"\n     - ?", record)]
        if columns is None:
            columns = cells[2:]
            continue
        if cells[0].startswith("**"):
            continue
        rows[cells[0]] = [tuple(float(v.strip().rstrip("x").removeprefix("J "))
                                for v in cell.split(",")) for cell in cells[2:]]
    return columns, rows


def fit_cost_figure(path=HERE / "fit_cost.png"):
    """Fit time over ``KMeans(n_init=1)``'s, one row per dataset, one marker per contender."""
    columns, rows = read_fit_cost_table()
    names = list(rows)[::-1]
    fig, ax = plt.subplots(figsize=(7.5, 6.2), constrained_layout=True)
    styles = {"GMM spherical": ("s", "#999999"), "SoftKMeans()": ("o", "#1f77b4"),
              "EntmaxKMeans()": ("D", "#d62728")}
    for col, column in enumerate(columns):
        marker, color = styles.get(column, ("o", None))
        ratios = [rows[name][col][0] for name in names]
        ax.scatter(ratios, range(len(names)), marker=marker, s=45, color=color,
                   label=column.replace("GMM spherical",
                                        'GaussianMixture(covariance_type="spherical")'),
                   zorder=3)
    ax.axvline(1.0, color="k", lw=1)
    ax.text(1.02, len(names) - 0.4, "KMeans(n_init=1)", fontsize=9, va="top")
    ax.set_xscale("log")
    ax.set_xticks([0.5, 1, 2, 4, 8])
    ax.set_xticklabels(["0.5x", "1x", "2x", "4x", "8x"])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=9)
    ax.grid(axis="x", which="major", color="0.9")
    ax.set_xlabel("whole-fit time over KMeans(n_init=1) from the same k-means++ start")
    ax.legend(loc="lower right", fontsize=9, framealpha=1)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def responsibilities_figure(path=HERE / "responsibilities.png"):
    """The gallery's figure of responsibilities in the plane."""
    example = runpy.run_path(str(ROOT / "examples" / "plot_responsibilities.py"))
    fig = example["make_figure"](150)
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    responsibilities_figure()
    fit_cost_figure()
