"""Runs of the four algorithms from a paired start, and their iterate-by-iterate partitions."""

import time

import numpy as np
from scipy.optimize import linear_sum_assignment

from .._core import bounds
from .._core.optimize import alternating, gradient_descent
from .._core.responsibilities import HARD, RelaxationSpec
from .._engines._array_kernels import block_responsibilities

__all__ = ["METHODS", "spec_for", "run_method", "iterate_states", "lloyd_path",
           "trajectory_constants", "padded", "matched_distance"]

#: Method key -> label in the tables.
METHODS = {"lloyd": "Lloyd", "softmax": "Alt. Softmax", "gradient": "GD on F_sigma",
           "entmax": "Alt. Entmax"}


def spec_for(method, sigma):
    """The relaxation a method uses at temperature ``sigma``."""
    return {"lloyd": HARD, "softmax": RelaxationSpec("softmax", sigma),
            "gradient": RelaxationSpec("softmax", sigma),
            "entmax": RelaxationSpec("entmax", sigma, 1.5)}[method]


def run_method(ctx, method, centers, sigma, config):
    """Run ``method`` from ``centers``; returns (RunResult with iterates, seconds)."""
    algo = gradient_descent if method == "gradient" else alternating
    start = time.perf_counter()
    run = algo(ctx.engine, centers, spec_for(method, sigma), max_iter=config.max_iter,
               tol=config.tol, record_path="centers")
    return run, time.perf_counter() - start


def iterate_states(ctx, run, spec):
    """Hard labels, smallest mass under ``spec``, margin and ``max_ij ||x_i - mu_j||``
    of every iterate."""
    labels, min_mass, margin, radius = [], [], [], []
    for centers in run.stages[0].centers:
        D = ctx.engine.sq_distances(centers)
        block = block_responsibilities(D, spec)
        labels.append(block.labels)
        min_mass.append(block.resp.sum(axis=0).min())
        margin.append(block.margins.min())
        radius.append(np.sqrt(D.max()))
    return {"labels": np.array(labels), "min_mass": np.array(min_mass),
            "margin": np.array(margin), "radius": np.array(radius)}


def lloyd_path(ctx, m):
    """Iterates, labels and ``delta``, ``rho``, ``R`` of Thm 25 along Lloyd's path from ``m``.

    As in the theorem (and :func:`softkmeans.diagnostics.fixed_point_constants`),
    ``delta`` and ``rho`` are the smallest margin and balance of the iterates
    before the last, ``R`` the largest spread of all. Cached on the context.
    """
    cache = ctx.extra.setdefault("lloyd_paths", {})
    if m not in cache:
        run = ctx.lloyd[m]
        states = iterate_states(ctx, run, HARD)
        head = slice(0, max(len(states["labels"]) - 1, 1))
        cache[m] = {"centers": np.array(run.stages[0].centers), "labels": states["labels"],
                    "delta": float(states["margin"][head].min()),
                    "rho": float(states["min_mass"][head].min() / ctx.n),
                    "R": float(states["radius"].max())}
    return cache[m]


def trajectory_constants(ctx, lp, sigma):
    """:func:`softkmeans._core.bounds.fixed_point_constants` along Lloyd's path ``lp``."""
    return bounds.fixed_point_constants(lp["delta"], lp["R"], lp["rho"], ctx.k, sigma)


def padded(seq, length):
    """``seq`` extended to ``length`` by repeating its last element."""
    seq = np.asarray(seq)
    if len(seq) >= length:
        return seq
    return np.concatenate([seq, np.repeat(seq[-1:], length - len(seq), axis=0)])


def matched_distance(a, b):
    """Permutation-invariant discrepancy ``min_pi max_j ||a_j - b_pi(j)||``.

    The permutation minimizes the sum of squared distances (Hungarian method).
    """
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    return float(np.sqrt(cost[rows, cols].max()))
