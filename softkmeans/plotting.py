"""Figures of fitted models (matplotlib is imported by each function, not by softkmeans)."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["plot_cluster_path"]


def plot_cluster_path(model, axes=None):
    """The phase diagram and the distortion of ``AnnealedKMeans(n_clusters="auto")``'s path.

    Left: the number of codevectors against the temperature ``sigma`` (log
    scale), each ``k`` drawn from the transition that made it to the next one.
    Right: the polished distortion ``J`` against ``k``, with the ICL of the
    spherical and of the principal-axis mixture (the criterion is the smaller)
    and the spherical mixture's BIC on a second axis; the chosen ``k``
    (``n_clusters_``) is marked on both.

    Parameters
    ----------
    model : AnnealedKMeans
        Fitted with ``n_clusters="auto"`` (it has ``cluster_path_``).
    axes : sequence of two matplotlib Axes, default=None
        Where to draw; a new figure of two panels when None.

    Returns
    -------
    axes : sequence of two matplotlib Axes

    Examples
    --------
    >>> import numpy as np
    >>> from softkmeans import AnnealedKMeans
    >>> from softkmeans.plotting import plot_cluster_path
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.normal(c, 0.3, size=(30, 2)) for c in (0, 3, 6)])
    >>> model = AnnealedKMeans("auto", max_clusters=6).fit(X)
    >>> axes = plot_cluster_path(model)  # doctest: +SKIP
    """
    check_is_fitted(model, "cluster_path_")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    path = model.cluster_path_
    ks = np.array([point["n_clusters"] for point in path])
    split = np.array([point["sigma_split"] for point in path])
    appeared = np.array([point["sigma_appeared"] for point in path])
    appeared[0] = 2 * split[0]  # one codevector lasts from infinity: draw it to 2 sigma_1
    phase, distortion = axes
    phase.hlines(ks, split, appeared, color="C0", lw=3)
    phase.vlines(split[:-1], ks[:-1], ks[1:], color="C0", lw=1, alpha=0.5)
    chosen = ks == model.n_clusters_
    phase.hlines(ks[chosen], split[chosen], appeared[chosen], color="C3", lw=5,
                 label=f"chosen k = {model.n_clusters_}")
    phase.set(xscale="log", xlabel="temperature sigma", ylabel="codevectors k",
              title="Phase diagram of the growth")
    phase.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap on short ranges
    phase.invert_xaxis()
    phase.legend()
    distortion.plot(ks, [point["inertia"] for point in path], "o-", color="C0", label="J")
    distortion.axvline(model.n_clusters_, color="C3", ls="--")
    distortion.set(yscale="log", xlabel="k", ylabel="polished J",
                   title="Distortion and criteria")
    criteria = distortion.twinx()
    for key, style, color, label in (("icl", "s-", "C1", "ICL, spherical"),
                                     ("axis_icl", "d-", "C2", "ICL, principal axes"),
                                     ("bic", "^:", "C4", "BIC, spherical")):
        criteria.plot(ks, [point[key] for point in path], style, color=color, ms=3,
                      label=label)
    criteria.set_ylabel("ICL, BIC")
    criteria.legend(loc="upper center")
    return axes
