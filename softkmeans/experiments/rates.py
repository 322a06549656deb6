"""Sec. 7.3: exponential concentration (softmax) and finite identification (entmax).

At each admissible reference configuration (a Lloyd fixed point) and each
``beta = Delta_min / (2 sigma^2)`` of the grid we measure the responsibility error
``E_r`` and the centroid-map error ``E_T = max_j ||T_sigma,j - T_Lloyd,j||`` (the
centroid updates of a softmax and of a hard pass, :func:`weighted_means`), and
check them against Lemma 17 and Thm 18 (:mod:`softkmeans._core.bounds`). Their
per-run slopes against beta are fitted over ``beta >= 2`` on the values above
the paper's declared tolerances (App. C), below which ``E_T`` is rounding.
"""

import numpy as np

from .._core import bounds
from .._core.optimize import weighted_means
from .._core.responsibilities import RelaxationSpec
from ._common import Progress, fit_slope, fmt, median_iqr, nanmedian
from .report import Claim, FamilyResult, Table

__all__ = ["map_errors", "reference_constants", "run_rates", "run_alpha_family"]


def map_errors(ctx, m, sigma):
    """``E_r`` and the per-cluster errors ``||T_sigma,j - T_Lloyd,j||`` of softmax at reference m.

    ``E_r = max_ij |r_ij - r^0_ij|`` is the largest ``sum_{l != j_i} r_il`` (the
    nearest column's error), a sum of positive terms.
    """
    spec = RelaxationSpec("softmax", sigma)
    centers = ctx.lloyd[m].centers
    resp = ctx.engine.responsibilities(centers, spec)
    resp[np.arange(ctx.n), ctx.lloyd[m].stats.labels] = 0.0
    soft_map = weighted_means(ctx.engine.estep(centers, spec), centers)
    return float(resp.sum(axis=1).max()), np.linalg.norm(soft_map - ctx.lloyd_means(m), axis=1)


def entmax_state(ctx, centers, sigma, alpha=1.5):
    """Entmax responsibilities at ``centers``: (one-hot rows mask, masses)."""
    resp = ctx.engine.responsibilities(centers, RelaxationSpec("entmax", sigma, alpha))
    return np.count_nonzero(resp, axis=1) == 1, resp.sum(axis=0)


def reference_constants(ctx, m):
    """``B_j`` (Thm 18: over every observation), ``rho`` and the tolerances of reference m."""
    B = np.sqrt(ctx.engine.max_sq_distances(ctx.lloyd_means(m)))  # unit weights: every row
    rho = float(ctx.lloyd[m].stats.masses.min() / ctx.n)
    # a row of responsibilities sums to 1: its rounding error is c k u
    tol_r = bounds.tol_relative(1, ctx.k, 1.0)
    tol_t = bounds.tol_centroid(ctx.n, ctx.k, float(np.sqrt(ctx.engine.x_sq.max())))
    return B, rho, tol_r, tol_t


def _run_one(ctx, m, betas):
    margin, k = ctx.margin_min[m], ctx.k
    B, rho, tol_r, tol_t = reference_constants(ctx, m)
    sigmas = bounds.sigma_for_beta(margin, betas)
    er, et, q, ratio = (np.empty(len(betas)) for _ in range(4))
    viol_t, informative, ident, empty = [], [], [], []
    for s, sigma in enumerate(sigmas):
        er[s], errors = map_errors(ctx, m, float(sigma))
        et[s] = errors.max()
        q[s] = bounds.q_factor(margin, sigma, k)
        limit = bounds.centroid_map_bound(B, rho, q[s])
        viol_t.append(bool(np.any(errors > limit + tol_t)))
        informative.append(bool(np.all(limit < B)))
        ratio[s] = np.min(limit[errors > 0] / errors[errors > 0]) if et[s] > 0 else np.nan
        onehot, masses = entmax_state(ctx, ctx.lloyd[m].centers, float(sigma))
        ident.append(bool(onehot.all()))
        empty.append(int(np.count_nonzero(masses <= 0)))
    fit_r = (betas >= 2) & (er > tol_r)
    fit_t = (betas >= 2) & (et > tol_t)
    informative = betas[np.array(informative)]
    at8 = int(np.argmin(np.abs(np.log(betas / 8.0))))
    return {
        "dataset": ctx.name, "run": int(m), "margin_min": margin, "rho": rho, "B": B.max(),
        "slope_Er": fit_slope(betas[fit_r], np.log(er[fit_r])),
        "slope_ET": fit_slope(betas[fit_t], np.log(et[fit_t])),
        "violations_Er": int(np.sum(er > q + tol_r)),
        "violations_ET": int(np.sum(viol_t)),
        "entmax_violations": int(np.sum(np.array(ident) != (betas >= 2))),
        "entmax_empty_below": int(np.sum(np.array(empty)[betas < 2])),
        "Er_bound_ratio_b8": float(q[at8] / er[at8]) if er[at8] > 0 else np.nan,
        "ET_bound_ratio_b8": float(ratio[at8]),
        "beta_informative": float(informative.min()) if informative.size else np.nan,
        "_Er": er, "_ET": et, "_ident": np.array(ident),
    }


def run_rates(contexts, config, progress=True):
    """Sec. 7.3 on every dataset: slopes, bound checks, entmax identification."""
    betas = np.asarray(config.betas)
    total = sum(ctx.admissible.sum() for ctx in contexts)
    bar = Progress(total, "7.3 rates", progress)
    records, curves, rows = [], {}, []
    for ctx in contexts:
        recs = []
        for m in ctx.admissible_runs():
            recs.append(_run_one(ctx, m, betas))
            bar.update(note=ctx.name)
        curves[ctx.name] = {
            "Er": np.median([r["_Er"] for r in recs], axis=0),
            "ET": np.median([r["_ET"] for r in recs], axis=0),
            "ident": np.mean([r["_ident"] for r in recs], axis=0),
        }
        rows.append([
            ctx.name, len(recs), fmt(np.median([r["margin_min"] for r in recs])),
            median_iqr([r["slope_Er"] for r in recs]), median_iqr([r["slope_ET"] for r in recs]),
            sum(r["violations_Er"] + r["violations_ET"] for r in recs),
            sum(r["entmax_violations"] for r in recs), sum(r["entmax_empty_below"] for r in recs),
            fmt(nanmedian([r["ET_bound_ratio_b8"] for r in recs])),
            fmt(nanmedian([r["beta_informative"] for r in recs])),
        ])
        records += [{k: v for k, v in r.items() if not k.startswith("_")} for r in recs]
    return _summarize(records, rows, curves, betas)


def _dataset_medians(records, key):
    names = dict.fromkeys(r["dataset"] for r in records)
    return {n: float(nanmedian([r[key] for r in records if r["dataset"] == n]))
            for n in names}


def _summarize(records, rows, curves, betas):
    med_r = _dataset_medians(records, "slope_Er")
    med_t = _dataset_medians(records, "slope_ET")
    lo_r, hi_r = min(med_r.values()), max(med_r.values())
    lo_t, hi_t = min(med_t.values()), max(med_t.values())
    bound_viol = sum(r["violations_Er"] + r["violations_ET"] for r in records)
    ent_viol = sum(r["entmax_violations"] for r in records)
    claims = [
        Claim("Median per-run slope of log E_r against beta, range over datasets",
              "[-1.017, -0.998]", f"[{lo_r:.3f}, {hi_r:.3f}]",
              bool(lo_r >= -1.05 and hi_r <= -0.95), "within 0.05 of -1"),
        Claim("Median per-run slope of log E_T against beta, range over datasets",
              "[-1.25, -0.98]", f"[{lo_t:.3f}, {hi_t:.3f}]",
              bool(lo_t >= -1.35 and hi_t <= -0.9), "steeper than -1 allowed"),
        Claim("Responsibility and centroid-map bounds (Lemma 17, Thm 18) hold in every record",
              "0 violations", f"{bound_viol} violations", bound_viol == 0),
        Claim("Entmax-1.5 one-hot at every grid point with beta >= 2 and none below",
              "0 violations", f"{ent_viol} violations", ent_viol == 0),
    ]
    table = Table(
        "Table 8 (map level): per-run slopes against beta, median [IQR]",
        ["Dataset", "Runs", "Delta_min", "Slope E_r", "Slope E_T", "Bound viol.",
         "Entmax viol.", "Empty entmax (beta<2)",
         "Thm 18 bound / error at beta~8 (tightest cluster)",
         "beta where Thm 18 bound < B_j"], rows)
    return FamilyResult(
        "7.3", "Rate analysis: exponential concentration and finite identification",
        f"Grid: {len(betas)} values of beta from {betas[0]:g} to {betas[-1]:g} (geometric).",
        [table], claims, [], {"rates": records}), curves


def _distinct_references(contexts):
    for ctx in contexts:
        seen = set()
        for m in ctx.admissible_runs():
            key = np.round(np.sort(ctx.lloyd[m].centers, axis=0), 8).tobytes()
            if key not in seen:
                seen.add(key)
                yield ctx, m


def run_alpha_family(contexts, config, progress=True):
    """Sharpness of sigma_id(alpha) at every distinct admissible reference configuration."""
    refs = list(_distinct_references(contexts))
    alphas, ratios = config.alphas, config.sigma_ratios
    bar = Progress(len(refs), "7.3 alpha family", progress)
    ident = np.zeros((len(alphas), len(ratios)))
    soft = np.zeros_like(ident)
    mismatch = empty = 0
    for ctx, m in refs:
        margins = ctx.lloyd[m].stats.margins
        for a, alpha in enumerate(alphas):
            sid = float(bounds.identification_sigma(ctx.margin_min[m], alpha))
            for c, ratio in enumerate(ratios):
                sigma = ratio * sid
                onehot, masses = entmax_state(ctx, ctx.lloyd[m].centers, sigma, alpha)
                predicted = margins >= bounds.unidentified_width(sigma, alpha)
                mismatch += int(np.count_nonzero(onehot != predicted))
                empty += int(np.count_nonzero(masses <= 0))
                ident[a, c] += onehot.all()
                soft[a, c] += 1.0 - onehot.mean()
        bar.update(note=ctx.name)
    ident /= max(len(refs), 1)
    soft /= max(len(refs), 1)
    below, above = np.asarray(ratios) < 1, np.asarray(ratios) > 1
    sharp = bool(np.all(ident[:, below] == 1) and np.all(ident[:, above] == 0))
    rows = [[f"{alpha:g}"] + [fmt(100 * v, 4) for v in ident[a]] for a, alpha in
            enumerate(alphas)]
    i1001 = list(ratios).index(1.001) if 1.001 in ratios else None
    i2 = list(ratios).index(2.0) if 2.0 in ratios else None
    claims = [
        Claim(f"sigma_id(alpha) sharp: identified at every ratio < 1, none > 1 "
              f"({len(refs)} distinct references)", "415 of 415, all alpha",
              f"{fmt(100 * ident[:, below].min(), 4)}% / {fmt(100 * ident[:, above].max(), 4)}%",
              sharp),
        Claim("Per observation: one-hot exactly when Delta_i >= 2 sigma^2 / (alpha - 1)",
              "0 mismatches", f"{mismatch} mismatches", mismatch == 0),
        Claim("No empty cluster at these temperatures", "0", str(empty), empty == 0),
    ]
    if i1001 is not None and i2 is not None:
        s1, s2 = 100 * soft[:, i1001].mean(), 100 * soft[:, i2].mean()
        claims.append(Claim("Soft observations at 1.001 / 2 sigma_id (mean over alpha)",
                            "0.2% / 2.2%", f"{s1:.2f}% / {s2:.2f}%", None,
                            "depends on the sample"))
    table = Table("Alpha family: % of reference configurations identified at sigma / sigma_id",
                  ["alpha"] + [f"{r:g}" for r in ratios], rows)
    return FamilyResult("7.3b", "Sharpness of the entmax-alpha identification threshold",
                        "", [table], claims), {"ident": ident, "ratios": ratios,
                                                "alphas": alphas}
