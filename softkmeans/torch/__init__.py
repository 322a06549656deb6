"""Differentiable K-Means terms for PyTorch (the optional extra ``softkmeans[torch]``).

- :func:`kmeans_loss` (``F_sigma``) and :func:`entmax_kmeans_loss` (``F^(alpha)``):
  relaxed K-Means objectives whose gradients are responsibility-weighted forces
  and do not vanish at low temperature; :func:`expected_distortion` and
  :func:`hard_kmeans_loss` for comparison.
- :func:`responsibilities`, :func:`entmax`, :func:`tied_sigma`, :func:`critical_ratio`.
- :class:`KMeansTerm`: a module holding the centroids and the temperature, with the
  closed-form centroid update.
- :class:`SoftVectorQuantizer`: a vector-quantization layer whose codebook follows
  hard, softmax or entmax responsibilities, with K-Means initialization, a cosine
  codebook, dead-code expiry, heads, projections, masks and decoding from indices.

Importing :mod:`softkmeans` does not import torch; this subpackage does.
"""

from ._functional import (
    critical_ratio,
    entmax,
    entmax_kmeans_loss,
    expected_distortion,
    hard_kmeans_loss,
    kmeans_loss,
    responsibilities,
    tied_sigma,
)
from ._modules import KMeansTerm, SoftVectorQuantizer, VQOutput, code_usage

__all__ = [
    "kmeans_loss",
    "entmax_kmeans_loss",
    "expected_distortion",
    "hard_kmeans_loss",
    "responsibilities",
    "entmax",
    "tied_sigma",
    "critical_ratio",
    "KMeansTerm",
    "SoftVectorQuantizer",
    "VQOutput",
    "code_usage",
]
