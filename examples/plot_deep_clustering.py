"""
===========================================================
Deep clustering with the K-Means term (PyTorch)
===========================================================

An autoencoder on scikit-learn's digits is pretrained by reconstruction, K-Means
is run on its 10-dimensional embedding, and the network is fine-tuned with
reconstruction ``+ 0.1 x`` the K-Means term of
:class:`softkmeans.torch.KMeansTerm` (DEC-style: same network, same initial
centroids). The centroids follow the closed-form update once per epoch.

- With the temperature **tied** to the scale of the representation
  (``sigma^2 = 0.1 x`` the mean squared distance to the nearest centroid), the
  ratio ``lambda_max(C_h) / sigma^2`` stays well above 1 and the clustering
  improves on K-Means on the pretrained embedding (ACC and NMI in the titles).
- With the temperature **fixed** at its initial value, the term contracts the
  representation until the ratio falls below 1: past the critical temperature
  every centroid goes to the mean and the clustering collapses.

Needs PyTorch (``pip install "softkmeans[torch]"``); runs in about ten seconds on
one CPU thread.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.datasets import load_digits
from sklearn.metrics import normalized_mutual_info_score

try:
    import torch
except ImportError:  # the gallery still builds without PyTorch
    torch = None

PRETRAIN, FINE_TUNE = 30, 30  # epochs
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    PRETRAIN, FINE_TUNE = 3, 3
# sphinx_gallery_end_ignore
GAMMA = 0.1


def accuracy(y, labels):
    """Clustering accuracy: the best one-to-one matching of clusters to classes."""
    table = np.zeros((labels.max() + 1, y.max() + 1))
    np.add.at(table, (labels, y), 1)
    rows, cols = linear_sum_assignment(-table)
    return table[rows, cols].sum() / len(y)


def autoencoder(X):
    """A 64-128-10 autoencoder pretrained by reconstruction."""
    torch.manual_seed(0)
    nn = torch.nn
    encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    decoder = nn.Sequential(nn.Linear(10, 128), nn.ReLU(), nn.Linear(128, 64))
    params = [*encoder.parameters(), *decoder.parameters()]
    optimizer = torch.optim.Adam(params, 1e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(PRETRAIN):
        for idx in torch.randperm(len(X), generator=gen).split(128):
            loss = ((decoder(encoder(X[idx])) - X[idx]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return encoder, decoder, params


def fine_tune(X, encoder, decoder, params, term):
    """Reconstruction + GAMMA x term; returns lambda_max / sigma^2 after every epoch."""
    optimizer = torch.optim.Adam(params, 1e-3)
    gen = torch.Generator().manual_seed(1)
    ratios = []
    for _ in range(FINE_TUNE):
        for idx in torch.randperm(len(X), generator=gen).split(128):
            h = encoder(X[idx])
            loss = ((decoder(h) - X[idx]) ** 2).mean() + GAMMA * term(h)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            H = encoder(X)
        term.update_centers(H)
        ratios.append(term.critical_ratio(H))
    return ratios, H


def main():
    if torch is None:
        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "This example needs PyTorch", ha="center")
        return fig
    from softkmeans.torch import KMeansTerm

    digits = load_digits()
    X, y = torch.tensor(digits.data / 16.0, dtype=torch.float32), digits.target
    encoder, decoder, params = autoencoder(X)
    start = [p.detach().clone() for p in params]
    with torch.no_grad():
        H0 = encoder(X)
    base = KMeansTerm(10, 10).init_centers(H0, n_init=10, random_state=0)
    labels = base.predict(H0).numpy()
    scores = {"AE + K-Means": (accuracy(y, labels), normalized_mutual_info_score(y, labels))}
    terms = {"tied temperature": KMeansTerm(10, 10),
             "fixed temperature": KMeansTerm(10, 10, sigma=float(base.sigma))}
    curves, embeddings = {}, {}
    for name, term in terms.items():
        with torch.no_grad():
            for p, s in zip(params, start, strict=True):
                p.copy_(s)
            term.centers.copy_(base.centers)
        curves[name], H = fine_tune(X, encoder, decoder, params, term)
        labels = term.predict(H).numpy()
        scores[name] = (accuracy(y, labels), normalized_mutual_info_score(y, labels))
        embeddings[name] = (H.numpy(), term.centers.numpy())
    for name, (acc, nmi) in scores.items():
        print(f"{name:>18}: ACC {acc:.3f}  NMI {nmi:.3f}")

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), constrained_layout=True)
    for name, ratios in curves.items():
        axes[0].semilogy(np.arange(1, len(ratios) + 1), ratios, "o-", ms=3, label=name)
    axes[0].axhline(1.0, color="k", ls="--", lw=1)
    axes[0].set_xlabel("fine-tuning epoch")
    axes[0].set_ylabel("lambda_max(C_h) / sigma^2")
    axes[0].set_title("below 1: past the critical temperature")
    axes[0].legend()
    for ax, (name, (H, centers)) in zip(axes[1:], embeddings.items(), strict=True):
        # the plane of the two leading principal axes of the embedding
        mean = H.mean(0)
        _, _, vt = np.linalg.svd(H - mean, full_matrices=False)
        P, C = (H - mean) @ vt[:2].T, (centers - mean) @ vt[:2].T
        ax.scatter(*P.T, c=y, s=3, cmap="tab10")
        ax.scatter(*C.T, c="k", marker="x", s=60)
        acc, nmi = scores[name]
        ax.set_title(f"{name}: ACC {acc:.2f}, NMI {nmi:.2f}\n"
                     f"(AE + K-Means: ACC {scores['AE + K-Means'][0]:.2f}, "
                     f"NMI {scores['AE + K-Means'][1]:.2f})", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    return fig


if __name__ == "__main__":
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)  # tiny layers: threads only add overhead
    try:
        main()
    finally:
        if threads is not None:
            torch.set_num_threads(threads)
    plt.show()
