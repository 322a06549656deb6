"""Soft memberships on text-like data: what ``sigma="auto"`` gives and a grid that does better.

A synthetic corpus stands in for a TF-IDF matrix (no download): ``n_docs`` documents over
``n_words`` words, each document drawn from one of ``k`` topics; a word's probability is a
Zipf background plus a boost on 150 words of the document's topic, the lengths are uniform
in [40, 200). scikit-learn's ``TfidfTransformer`` turns the counts into L2-normalised TF-IDF
rows (CSR). For ``sigma="auto"`` and for fixed temperatures on a grid of multiples of
``critical_sigma``, the script prints the mean largest responsibility, the share of rows
that are one-hot (within 1e-6), the share whose largest responsibility is below 0.9
(rows shared between clusters), the number of distinct labels, the ARI against the topics
and the inertia. Run from the repository root::

    python benchmarks/text_sigma.py            # about a minute
    python benchmarks/text_sigma.py --quick    # smaller corpus, for tests
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softkmeans import SoftKMeans  # noqa: E402
from softkmeans.diagnostics import critical_sigma  # noqa: E402
from softkmeans.exceptions import CriticalTemperatureWarning  # noqa: E402

RATIOS = (0.5, 0.7, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5)


def make_corpus(n_docs=4000, n_topics=20, n_words=6000, seed=0):
    """TF-IDF rows (CSR, L2-normalised) of a synthetic corpus, and each document's topic."""
    rng = np.random.default_rng(seed)
    background = 1.0 / np.arange(1, n_words + 1) ** 1.1
    topic_words = [rng.choice(n_words, 150, replace=False) for _ in range(n_topics)]
    topics = rng.integers(n_topics, size=n_docs)
    rows, cols, counts = [], [], []
    for i, topic in enumerate(topics):
        p = background.copy()
        p[topic_words[topic]] += 0.02
        drawn = rng.multinomial(rng.integers(40, 200), p / p.sum())
        words = np.flatnonzero(drawn)
        rows.append(np.full(len(words), i))
        cols.append(words)
        counts.append(drawn[words])
    C = sp.csr_matrix((np.concatenate(counts).astype(float),
                       (np.concatenate(rows), np.concatenate(cols))), shape=(n_docs, n_words))
    return TfidfTransformer().fit_transform(C), topics


def describe(model, X, topics):
    """The figures of one fit, as a dict."""
    top = model.predict_proba(X).max(axis=1)
    return {"sigma": model.sigma_, "mean_top": top.mean(), "one_hot": np.mean(top > 1 - 1e-6),
            "shared": np.mean(top < 0.9),
            "labels": len(np.unique(model.labels_)),
            "ari": adjusted_rand_score(topics, model.labels_), "inertia": model.inertia_}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a corpus of 600 x 1500, k = 5")
    args = parser.parse_args(argv)
    n_docs, k, n_words = (600, 5, 1500) if args.quick else (4000, 20, 6000)
    X, topics = make_corpus(n_docs, k, n_words)
    print(f"TF-IDF rows: {X.shape[0]} x {X.shape[1]}, {X.nnz} non-zeros, k = {k}")
    auto = SoftKMeans(k, random_state=0).fit(X)
    critical = critical_sigma(X)
    print(f"critical_sigma = {critical:.4f}\n")
    print(f"{'sigma':<22}{'mean top r':>11}{'one-hot':>9}{'top r < 0.9':>12}{'labels':>8}"
          f"{'ARI':>7}{'inertia':>10}")
    fits = [("auto", auto)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CriticalTemperatureWarning)  # on purpose near it
        warnings.simplefilter("ignore", ConvergenceWarning)  # merged centroids, counted below
        for ratio in RATIOS:
            fits.append((f"{ratio:.1f} x critical",
                         SoftKMeans(k, sigma=ratio * critical, random_state=0).fit(X)))
    rows = []
    for name, model in fits:
        row = describe(model, X, topics)
        rows.append(row)
        label = f"{name} ({row['sigma']:.4f})"
        print(f"{label:<22}{row['mean_top']:>11.3f}{row['one_hot']:>9.1%}{row['shared']:>12.1%}"
              f"{row['labels']:>8d}"
              f"{row['ari']:>7.3f}{row['inertia']:>10.1f}")
    return rows


if __name__ == "__main__":
    main()
