"""The PNG figures of the report (matplotlib, Agg backend)."""

import numpy as np

from .._core import bounds

__all__ = ["plot_all"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rates(plt, curves, betas, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for name, c in curves.items():
        axes[0].semilogy(betas, c["Er"], lw=1, label=name)
        axes[1].semilogy(betas, c["ET"], lw=1, label=name)
    axes[0].semilogy(betas, np.exp(-betas), "k--", lw=2, label="exp(-beta)")
    axes[0].set_title("(a) responsibility error E_r (median over runs)")
    axes[1].set_title("(b) centroid-map error E_T (median over runs)")
    for ax in axes:
        ax.set_xlabel("beta = Delta_min / (2 sigma^2)")
        ax.axvline(2.0, color="grey", lw=0.5)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _identification(plt, curves, betas, alpha, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, c in curves.items():
        axes[0].semilogx(betas, 100 * c["ident"], lw=1, label=name, drawstyle="steps-post")
    axes[0].axvline(2.0, color="k", ls="--", lw=1)
    axes[0].set_xlabel("beta")
    axes[0].set_ylabel("% of runs with one-hot entmax-1.5 responsibilities")
    axes[0].set_title("(a) identification step at beta = 2")
    axes[0].legend(fontsize=6, ncol=2)
    ratios = np.asarray(alpha["ratios"])
    for a, value in enumerate(alpha["alphas"]):
        axes[1].semilogx(ratios, 100 * alpha["ident"][a], "o-", label=f"alpha = {value:g}")
    axes[1].axvline(1.0, color="k", ls="--", lw=1)
    axes[1].set_xlabel("sigma / sigma_id(alpha)")
    axes[1].set_title("(b) sharpness of sigma_id(alpha)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _values(plt, ex, path):
    s2 = ex["sigmas"] ** 2
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.loglog(s2, ex["G"], "o-", ms=3, label="G = J - F_sigma")
    pos = ex["Gent"] > 0
    ax.loglog(s2[pos], ex["Gent"][pos], "s-", ms=3, label="G_ent = J - F^(3/2) (zeros hidden)")
    ax.loglog(s2, bounds.softmax_uniform_bound(ex["n"], ex["sigmas"], ex["k"]), "k--",
              label="2 n sigma^2 log k")
    ax.loglog(s2, bounds.tsallis_uniform_bound(ex["n"], ex["sigmas"], ex["k"], 1.5), "k:",
              label="(8/3) n sigma^2 (1 - 1/sqrt k)")
    ax.set_xlabel("sigma^2")
    ax.set_title(f"Value gaps and their ceilings ({ex['dataset']}, one run)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _trajectories(plt, curves, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for method, share in curves["follow"].items():
        axes[0].semilogx(curves["beta_tildes"], share, "o-", label=method)
    axes[0].set_xlabel("beta~ (relative to the median margin)")
    axes[0].set_ylabel("% of runs following Lloyd's path")
    axes[0].legend()
    axes[1].semilogx(curves["c_values"], curves["edge"], "o-")
    axes[1].axvline(1.0, color="k", ls="--", lw=1)
    axes[1].set_xlabel("c = sigma / sigma*")
    axes[1].set_title("Thm 25 at the edge of its hypothesis")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _paths(plt, paths, path):
    fig, axes = plt.subplots(1, len(paths), figsize=(4 * len(paths), 4), squeeze=False)
    for ax, p in zip(axes[0], paths, strict=True):
        ax.scatter(p["X"][:, 0], p["X"][:, 1], s=4, c="lightgrey")
        for j in range(p["path"].shape[1]):
            ax.plot(p["path"][:, j, 0], p["path"][:, j, 1], "-", lw=1)
            ax.plot(p["path"][-1, j, 0], p["path"][-1, j, 1], "o", ms=5, color="k")
        ax.plot(p["lloyd_centers"][:, 0], p["lloyd_centers"][:, 1], "*", ms=12, color="red")
        ax.set_title(f"{p['dataset']}: J = {p['J_annealed']:.2f} (Lloyd {p['J_lloyd']:.2f})",
                     fontsize=9)
        ax.set_aspect("equal")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_all(out, data):
    """Write the figures for which ``data`` holds results; returns their file names."""
    plt = _pyplot()
    written = {}
    if "rates" in data:
        _rates(plt, data["rates"], np.asarray(data["betas"]), out / "rate_collapse.png")
        written["7.3"] = ["rate_collapse.png"]
        if "alpha" in data:
            _identification(plt, data["rates"], np.asarray(data["betas"]), data["alpha"],
                            out / "identification.png")
            written["7.3"].append("identification.png")
    if "values" in data:
        _values(plt, data["values"], out / "value_gaps.png")
        written["7.5"] = ["value_gaps.png"]
    if "trajectories" in data:
        _trajectories(plt, data["trajectories"], out / "trajectories.png")
        written["7.7"] = ["trajectories.png"]
    if data.get("paths"):
        _paths(plt, data["paths"], out / "annealing_paths.png")
        written["7.8"] = ["annealing_paths.png"]
    if data.get("gradients"):
        from .gradients import plot_gradients

        plot_gradients(plt, data["gradients"], out / "gradients.png")
        written["8.2"] = ["gradients.png"]
    return written
