"""Draw the static figures of the documentation into ``doc/images/``.

Run from the repository root (matplotlib needed)::

    python doc/images/make_figures.py

- ``responsibilities.png``: softmax and entmax-1.5 responsibilities in the plane, drawn by
  the gallery example ``examples/plot_responsibilities.py`` (the landing page shows it
  without running the gallery).
- ``quality_ratio.png``: the ``J / J*`` table of ``doc/quality.rst`` (the output of
  ``benchmarks/quality.py``) as a plot, read from that page.
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


def read_list_table(page, heading):
    """The first ``list-table`` after ``heading`` in ``page``, as a list of rows of cells."""
    text = page.read_text()
    table = text[text.index(".. list-table::", text.index(heading)):]
    end = table.find("\n\n", table.index("   * - "))
    table = table if end < 0 else table[:end]
    return [[cell.strip() for cell in re.split(r"\n     - ?", record)]
            for record in re.split(r"\n   \* - ", table)[1:]]


def read_fit_cost_table(page=DOC / "performance.rst"):
    """The whole-fit table of the performance page as ``(columns, rows)``.

    ``rows`` maps a dataset's label to one ``(time ratio, n_iter, J ratio)`` per contender
    column (the anchor ``KMeans`` column is left out: its ratios are 1 by definition).
    """
    header, *body = read_list_table(page, "Whole fits against KMeans")
    rows = {cells[0]: [tuple(float(v.strip().rstrip("x").removeprefix("J "))
                             for v in cell.split(",")) for cell in cells[2:]]
            for cells in body if not cells[0].startswith("**")}
    return header[2:], rows


def read_quality_table(page=DOC / "quality.rst"):
    """The ``J / J*`` table of the quality page as ``(columns, rows)`` of ratios."""
    header, *body = read_list_table(page, "J / J\\* (J\\* = best of 50")
    return header[2:], {cells[0]: [float(v) for v in cells[2:]] for cells in body}


QUALITY_STYLES = {"KMeans(n_init=1)": ("o", "#bbbbbb"), "KMeans(n_init=10)": ("s", "#555555"),
                  "GMM spherical": ("v", "#e69f00"), "SoftKMeans()": ("o", "#1f77b4"),
                  "EntmaxKMeans()": ("D", "#d62728"), "AnnealedKMeans()": ("*", "#2ca02c")}


def quality_figure(path=HERE / "quality_ratio.png", limit=4.0):
    """Distortion above the best of 50 KMeans starts, in percent, per dataset and contender.

    The axis is linear up to ``limit`` percent; a value beyond it is drawn at the edge as a
    triangle with its value written beside it.
    """
    columns, rows = read_quality_table()
    names = list(rows)[::-1]
    fig, ax = plt.subplots(figsize=(7.5, 6.0), layout="constrained")
    offsets = [0.3 - 0.12 * i for i in range(len(columns))]
    beyond = {}
    for col, column in enumerate(columns):
        marker, color = QUALITY_STYLES.get(column, ("o", None))
        xs, ys = [], []
        for row, name in enumerate(names):
            excess = 100 * (rows[name][col] - 1)
            if excess > limit:
                ax.scatter([limit], [row + offsets[col]], marker=">", s=40, color=color,
                           zorder=3)
                beyond.setdefault(row, []).append(excess)
                continue
            xs.append(excess)
            ys.append(row + offsets[col])
        label = column.replace("GMM spherical", "GaussianMixture(spherical)")
        ax.scatter(xs, ys, marker=marker, s=60 if marker == "*" else 28, color=color,
                   label=label, zorder=3)
    for row, values in beyond.items():
        low, high = f"+{min(values):.0f}%", f"+{max(values):.0f}%"
        text = f"{low} (off the axis)" if low == high else f"{low} to {high} (off the axis)"
        ax.text(limit - 0.12, row, text, ha="right", va="center", fontsize=8)
    ax.axvline(0.0, color="k", lw=1)
    ax.set_xlim(-0.8, limit + 0.2)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=9)
    ax.grid(axis="x", color="0.9")
    ax.set_xlabel("distortion J above the best of 50 single-start KMeans fits (%); "
                  "left of 0 is better")
    fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
                   label=column.replace("GMM spherical", "GaussianMixture(spherical)"),
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
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8,
              frameon=False)  # above the axes: no marker hides behind it
    fig.savefig(path, dpi=110)
    plt.close(fig)


def responsibilities_figure(path=HERE / "responsibilities.png"):
    """The gallery's figure of responsibilities in the plane."""
    example = runpy.run_path(str(ROOT / "examples" / "plot_responsibilities.py"))
    fig = example["make_figure"](150)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def choosing_k_figure(path=HERE / "choosing_k.png"):
    """The gallery's phase diagram of one annealed fit that chooses ``k``."""
    example = runpy.run_path(str(ROOT / "examples" / "plot_choosing_k.py"))
    fig = example["axes"][0].figure
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    choosing_k_figure()
    responsibilities_figure()
    fit_cost_figure()
    quality_figure()
