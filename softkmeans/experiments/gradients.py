"""Sec. 8.2: gradients of the K-Means terms at low temperature (needs PyTorch).

At every admissible reference configuration (a Lloyd fixed point) and the 13
temperatures ``beta = Delta_min / (2 sigma^2)`` from 1/4 to 64 of the paper, the
gradient with respect to every observation ``x_i`` of the hard distortion ``J``,
of ``F_sigma``, of ``F^(3/2)_sigma`` and of the expected distortion ``D_sigma``
(responsibilities differentiated through) is computed by the autograd functions
of :mod:`softkmeans.torch` in float64, with the Frobenius norm of the softmax
Jacobian ``diag(r_i) - r_i r_i^T``, evaluated without cancellation.

Per configuration and temperature the record keeps the largest value over the
observations (the observation with the smallest margin dominates) of the
Jacobian norm and of the relative deviations ``||grad_i L - grad_i J|| /
||grad_i J||``, the median over observations of ``||grad_i F|| / ||grad_i J||``,
and the number of observations with ``grad_i J != 0`` whose ``grad_i F`` or
``grad_i F^(3/2)`` vanishes. Summaries are medians over configurations.
"""

import importlib.util

import numpy as np

from .._core import bounds
from ._common import Progress, fmt
from .report import Claim, FamilyResult, Table

__all__ = ["BETAS", "run_gradients", "plot_gradients", "jacobian_norms"]

#: The paper's 13 temperatures of Sec. 8.2, geometric from beta = 1/4 to 64.
BETAS = tuple(np.geomspace(0.25, 64.0, 13))

_LOSSES = ("F", "F15", "D")


def _skipped(why):
    claim = Claim("Sec. 8.2 gradient claims", "-", f"skipped: {why}", None)
    return FamilyResult("8.2", "Gradients at low temperature", f"Skipped: {why}.", [], [claim])


def jacobian_norms(resp, labels):
    """``||diag(r_i) - r_i r_i^T||_F`` per row, without cancellation at saturation.

    ``||J||_F^2 = sum_j r_j^2 (1 - r_j)^2 + sum_j r_j^2 sum_{l != j} r_l^2``; at the
    nearest centroid ``1 - r_j`` and ``sum_{l != j} r_l^2`` are summed from the other
    entries instead of being subtracted from 1.
    """
    import torch

    rows = torch.arange(resp.shape[0])
    others = resp.clone()
    others[rows, labels] = 0.0
    one_minus = 1.0 - resp
    one_minus[rows, labels] = others.sum(1)
    sq = resp * resp
    sq_others = sq.sum(1, keepdim=True) - sq
    sq_others[rows, labels] = (others * others).sum(1)
    return (sq * one_minus * one_minus + sq * sq_others).sum(1).sqrt()


def _gradients(X, centers, sigma):
    import torch

    from .. import torch as skt

    grads = {}
    for name, loss in [("J", lambda x: skt.hard_kmeans_loss(x, centers, reduction="sum")),
                       ("F", lambda x: skt.kmeans_loss(x, centers, sigma, reduction="sum")),
                       ("F15", lambda x: skt.entmax_kmeans_loss(x, centers, sigma,
                                                                reduction="sum")),
                       ("D", lambda x: skt.expected_distortion(x, centers, sigma,
                                                               reduction="sum"))]:
        x = X.clone().requires_grad_(True)
        (grads[name],) = torch.autograd.grad(loss(x), x)
    return grads


def _run_one(ctx, m, betas):
    import torch

    from .. import torch as skt

    X = torch.as_tensor(ctx.X, dtype=torch.float64)
    centers = torch.as_tensor(ctx.lloyd[m].centers, dtype=torch.float64)
    labels = torch.as_tensor(ctx.lloyd[m].stats.labels, dtype=torch.long)
    sigmas = bounds.sigma_for_beta(ctx.margin_min[m], np.asarray(betas))
    rec = {"dataset": ctx.name, "run": int(m)}
    for s, sigma in enumerate(sigmas):
        sigma = float(sigma)
        grads = _gradients(X, centers, sigma)
        norm_j = grads["J"].norm(dim=1)
        moving = norm_j > 0
        resp = skt.responsibilities(X, centers, sigma)
        rec[f"jac_{s}"] = float(jacobian_norms(resp, labels).max())
        for name in _LOSSES:
            dev = (grads[name] - grads["J"]).norm(dim=1)[moving] / norm_j[moving]
            rec[f"dev{name}_{s}"] = float(dev.max()) if dev.numel() else 0.0
        for name in ("F", "F15"):
            rec[f"vanish{name}_{s}"] = int((grads[name].norm(dim=1)[moving] == 0).sum())
        ratio = grads["F"].norm(dim=1)[moving] / norm_j[moving]
        rec[f"ratio_{s}"] = float(ratio.median()) if ratio.numel() else float("nan")
    return rec


def _medians(records, key, n_betas):
    return np.array([np.median([r[f"{key}_{s}"] for r in records]) for s in range(n_betas)])


def _zero_from(betas, values):
    """Smallest grid beta from which every value is exactly 0 (nan if the last is not)."""
    nonzero = np.flatnonzero(values != 0)
    if nonzero.size == 0:
        return float(betas[0])
    return float(betas[nonzero[-1] + 1]) if nonzero[-1] + 1 < len(betas) else float("nan")


def _claims(betas, curves, vanishing, n_records):
    jac64 = curves["jac"][-1]
    zero_f, zero_f15 = _zero_from(betas, curves["devF"]), _zero_from(betas, curves["devF15"])
    above_two = float(betas[betas > 2].min())
    i40 = int(np.argmin(np.abs(betas - 40.0)))
    ratios = curves["ratio"]
    both = (curves["devF"] > 0) & (curves["devD"] > 0) & (betas >= 4)  # e^-beta < 0.02
    slow = curves["devD"][both] / curves["devF"][both] / betas[both]
    return [
        Claim("Frobenius norm of the softmax Jacobian at beta = 64 (largest over the "
              "observations, median over configurations)", "about 1e-28", fmt(jac64),
              bool(1e-29 <= jac64 <= 1e-27), "within a factor 10"),
        Claim("Deviation of grad F_sigma from grad J exactly 0 in floating point from",
              "beta ~ 40", f"beta = {fmt(zero_f)}",
              bool(np.isfinite(zero_f) and abs(np.searchsorted(betas, zero_f) - i40) <= 1),
              "within one grid point"),
        Claim("Deviation of grad F^(3/2) from grad J exactly 0 from the first grid point "
              "above beta = 2", f"beta ~ 2.5 ({fmt(above_two)})", f"beta = {fmt(zero_f15)}",
              bool(zero_f15 == above_two)),
        Claim("Observations with grad J != 0 and a vanishing grad F_sigma or grad F^(3/2)",
              "none", f"{vanishing} in {n_records} configurations x {len(betas)} "
              "temperatures", vanishing == 0),
        Claim("Median norm ratio grad F_sigma / grad J at every temperature", "1.000",
              f"{ratios.min():.3f} to {ratios.max():.3f}",
              bool(np.all(np.round(ratios, 3) == 1.0))),
        Claim("grad D_sigma converges more slowly than grad F_sigma, order beta e^-beta "
              "against e^-beta: their deviations' ratio divided by beta, beta >= 4",
              "of order 1",
              (f"{fmt(slow.min())} to {fmt(slow.max())} over beta = {fmt(betas[both][0])} "
               f"to {fmt(betas[both][-1])}") if slow.size else "-",
              bool(slow.size >= 2 and np.all((slow > 0.25) & (slow < 4))), "within 4x of 1"),
    ]


def run_gradients(contexts, config, progress=True):
    """Sec. 8.2 on every dataset; ``(FamilyResult, curves for the figure)``."""
    if importlib.util.find_spec("torch") is None:
        return _skipped('PyTorch is not installed (pip install "softkmeans[torch]")'), None
    import torch

    betas = np.asarray(BETAS)
    bar = Progress(sum(int(ctx.admissible.sum()) for ctx in contexts), "8.2 gradients",
                   progress)
    records, rows = [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small problems: one thread, no oversubscription
    try:
        for ctx in contexts:
            recs = []
            for m in ctx.admissible_runs():
                recs.append(_run_one(ctx, m, betas))
                bar.update(note=ctx.name)
            if recs:
                rows.append([ctx.name, len(recs)] + [
                    fmt(_zero_from(betas, _medians(recs, key, len(betas))))
                    for key in ("devF", "devF15", "devD")])
            records += recs
    finally:
        torch.set_num_threads(threads)
    if not records:
        return _skipped("no admissible reference configuration"), None
    curves = {key: _medians(records, key, len(betas))
              for key in ("jac", "devF", "devF15", "devD", "ratio")}
    vanishing = sum(r[f"vanish{name}_{s}"] for r in records for name in ("F", "F15")
                    for s in range(len(betas)))
    table = Table("Sec. 8.2: median over configurations of the largest deviation "
                  "||grad L - grad J|| / ||grad J|| over the observations, and of the largest "
                  "softmax Jacobian norm", ["beta", "Jacobian", "F_sigma", "F^(3/2)", "D_sigma",
                                            "median norm ratio F / J"],
                  [[fmt(b), fmt(curves["jac"][s]), fmt(curves["devF"][s]),
                    fmt(curves["devF15"][s]), fmt(curves["devD"][s]), f"{curves['ratio'][s]:.3f}"]
                   for s, b in enumerate(betas)])
    per_dataset = Table("Sec. 8.2 per dataset: first beta from which the median deviation is "
                        "exactly 0", ["Dataset", "Configurations", "F_sigma", "F^(3/2)",
                                      "D_sigma"], rows)
    summary = (f"{len(records)} admissible reference configurations; gradients by the autograd "
               "functions of softkmeans.torch in float64.")
    result = FamilyResult("8.2", "Gradients at low temperature", summary, [table, per_dataset],
                          _claims(betas, curves, vanishing, len(records)), [],
                          {"gradients": records})
    return result, {"betas": betas, **curves}


def plot_gradients(plt, curves, path):
    """Figure 13: the Jacobian vanishes, the reduced objectives' gradients converge to J's."""
    betas = curves["betas"]
    floor = 1e-35
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for key, label, style in [("jac", "softmax Jacobian ||diag(r) - r r^T||_F", "k-"),
                              ("devF", "grad F_sigma vs grad J", "o-"),
                              ("devF15", "grad F^(3/2) vs grad J", "s-"),
                              ("devD", "grad D_sigma vs grad J", "^-")]:
        ax.semilogy(betas, np.maximum(curves[key], floor), style, ms=4, label=label)
    ax.semilogy(betas, np.exp(-betas), "k:", lw=1, label="exp(-beta)")
    ax.semilogy(betas, betas * np.exp(-betas), "k--", lw=1, label="beta exp(-beta)")
    ax.set_ylim(floor / 3, 10)
    ax.set_xscale("log")
    ax.set_xlabel("beta = Delta_min / (2 sigma^2)")
    ax.set_title("Gradients at low temperature (exact zeros drawn at 1e-35)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
