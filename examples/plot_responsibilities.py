r"""
===========================================================
Softmax and entmax-1.5 responsibilities in the plane
===========================================================

Three fixed centroids (white circles) and, at three temperatures, the soft
assignment of every point of the plane: each point is colored by the
responsibility-weighted mix of the three cluster colors, so pure colors are hard
assignments and blends are soft ones.

- Top row, softmax: outside the dotted contour the responsibilities are within
  ``1e-6`` of one-hot, but no point is ever exactly one-hot.
- Bottom row, entmax-1.5: outside the solid contour the responsibilities are
  *exactly* one-hot. The soft region is the band of points closer than
  :math:`2\sigma^2 / \lVert\mu_j - \mu_l\rVert` to a bisector, i.e. the points
  whose margin is below :math:`4\sigma^2`
  (:func:`softkmeans.diagnostics.unidentified_count` counts them in a data set).
"""

import matplotlib.pyplot as plt
import numpy as np

from softkmeans.diagnostics import responsibilities

CENTERS = np.array([[0.0, 0.0], [2.0, 0.0], [1.0, 1.7]])
COLORS = np.array([[0.85, 0.25, 0.2], [0.2, 0.45, 0.85], [0.25, 0.7, 0.3]])
SIGMA_SQ = (0.05, 0.2, 0.6)
NEAR_ONE_HOT = 1e-6


def plane(resolution):
    """A grid of points around the centroids, as (n_points, 2) plus its axes."""
    xs = np.linspace(-1.2, 3.2, resolution)
    ys = np.linspace(-1.2, 2.9, resolution)
    gx, gy = np.meshgrid(xs, ys)
    return np.column_stack([gx.ravel(), gy.ravel()]), xs, ys


def draw(ax, resp, xs, ys, hard_mask, linestyle):
    """Blend the cluster colors by responsibility and outline the hard region."""
    shape = (len(ys), len(xs))
    ax.imshow((resp @ COLORS).reshape(*shape, 3), origin="lower",
              extent=(xs[0], xs[-1], ys[0], ys[-1]), interpolation="nearest")
    if hard_mask.any() and not hard_mask.all():
        ax.contour(xs, ys, hard_mask.reshape(shape).astype(float), levels=[0.5],
                   colors="k", linewidths=0.8, linestyles=linestyle)
    ax.scatter(*CENTERS.T, s=40, c="white", edgecolors="k", zorder=3)
    ax.set_xticks([])
    ax.set_yticks([])


def make_figure(resolution=150):
    """The 2 x 3 figure: softmax (top) and entmax-1.5 (bottom) at three temperatures."""
    points, xs, ys = plane(resolution)
    fig, axes = plt.subplots(2, 3, figsize=(9, 6), constrained_layout=True)
    for col, sigma_sq in enumerate(SIGMA_SQ):
        sigma = np.sqrt(sigma_sq)
        soft = responsibilities(points, CENTERS, sigma)
        draw(axes[0, col], soft, xs, ys, soft.max(axis=1) >= 1 - NEAR_ONE_HOT, ":")
        sparse = responsibilities(points, CENTERS, sigma, alpha=1.5)
        draw(axes[1, col], sparse, xs, ys, np.all((sparse == 0) | (sparse == 1), axis=1), "-")
        axes[0, col].set_title(rf"$\sigma^2 = {sigma_sq}$")
    axes[0, 0].set_ylabel("softmax")
    axes[1, 0].set_ylabel("entmax-1.5")
    return fig


if __name__ == "__main__":
    resolution = 150  # points per side of the plane
    # sphinx_gallery_start_ignore
    # The tests run every example at a small size.
    import os

    if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
        resolution = 12
    # sphinx_gallery_end_ignore
    make_figure(resolution)
    plt.show()
