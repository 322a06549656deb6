"""softkmeans: K-Means as the zero-temperature limit of soft (softmax) and sparse
(entmax) assignment layers, as scikit-learn estimators (arXiv 2603.04625)."""

from ._annealed import AnnealedKMeans
from ._entmax import EntmaxKMeans
from ._soft import SoftKMeans

__all__ = ["SoftKMeans", "EntmaxKMeans", "AnnealedKMeans"]
__version__ = "0.1.0.dev0"
