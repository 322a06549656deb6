"""Sec. 8.3: the K-Means term inside an autoencoder, on scikit-learn's digits (needs PyTorch).

The paper's datasets (MNIST, Fashion-MNIST, USPS, CIFAR-10 and STL-10 features)
are not bundled and the package downloads nothing; the digits that ship with
scikit-learn (1,797 images of 8 x 8 pixels, 10 classes) stand in for them, with a
smaller autoencoder (64-128-10) and shorter training. The claim lines therefore compare the
direction and size of the effects of Table 4 and its text, not the accuracies.

For each seed an autoencoder is pretrained by reconstruction (Adam, 1e-3,
batch 128), K-Means (10 restarts) is run on its embeddings, and the network is
fine-tuned from that network and those centroids with reconstruction
``+ 0.1 x`` the K-Means term, whose centroids follow the closed-form update
once per epoch: ``F_sigma`` and ``F^(3/2)`` with the temperature tied to the
scale (``sigma^2 = 0.1 x`` the mean squared distance to the nearest centroid,
every batch), and ``F_sigma`` with the temperature fixed at its initial value.
"""

import importlib.util

import numpy as np

from ._common import Progress, fmt
from .report import Claim, FamilyResult, Table

__all__ = ["run_deep", "clustering_accuracy"]

GAMMA = 0.1
BATCH = 128


def _skipped(why):
    claim = Claim("Sec. 8.3 deep-clustering claims", "-", f"skipped: {why}", None)
    return FamilyResult("8.3", "End-to-end deep clustering (digits)", f"Skipped: {why}.", [],
                        [claim])


def clustering_accuracy(y, labels):
    """Best one-to-one matching of clusters to classes (Hungarian algorithm)."""
    from scipy.optimize import linear_sum_assignment

    y, labels = np.asarray(y), np.asarray(labels)
    table = np.zeros((labels.max() + 1, y.max() + 1))
    np.add.at(table, (labels, y), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / len(y))


def distinct_centroids(centers, scale, rel=0.05):
    """Number of groups of centroids closer than ``rel x scale`` (merged clusters count once)."""
    c = np.asarray(centers, dtype=float)
    close = np.linalg.norm(c[:, None] - c[None], axis=-1) < rel * scale
    seen, groups = np.zeros(len(c), dtype=bool), 0
    for j in range(len(c)):
        if seen[j]:
            continue
        groups += 1
        stack = [j]
        while stack:
            i = stack.pop()
            if not seen[i]:
                seen[i] = True
                stack += list(np.flatnonzero(close[i] & ~seen))
    return groups


def _autoencoder(torch, X, seed, epochs):
    torch.manual_seed(seed)
    nn = torch.nn
    encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    decoder = nn.Sequential(nn.Linear(10, 128), nn.ReLU(), nn.Linear(128, 64))
    params = [*encoder.parameters(), *decoder.parameters()]
    optimizer = torch.optim.Adam(params, 1e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(BATCH):
            loss = ((decoder(encoder(X[idx])) - X[idx]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return encoder, decoder, params


def _fine_tune(torch, X, y, net, term, seed, epochs):
    from sklearn.metrics import normalized_mutual_info_score

    encoder, decoder, params = net
    optimizer = torch.optim.Adam(params, 1e-3)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        H = encoder(X)
    var0 = float(H.var(0, unbiased=False).sum())
    ratios = []
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(BATCH):
            h = encoder(X[idx])
            loss = ((decoder(h) - X[idx]) ** 2).mean() + GAMMA * term(h)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            H = encoder(X)
        term.update_centers(H)
        ratios.append(term.critical_ratio(H))
    labels = term.predict(H).numpy()
    spread = float(H.var(0, unbiased=False).sum()) ** 0.5
    return {"acc": clustering_accuracy(y, labels),
            "nmi": float(normalized_mutual_info_score(y, labels)),
            "ratio_min": min(ratios), "ratio_last": ratios[-1],
            "clusters": distinct_centroids(term.centers.numpy(), spread),
            "variance": float(H.var(0, unbiased=False).sum()) / var0}


def _run_seed(torch, X, y, seed, pretrain, epochs):
    from sklearn.metrics import normalized_mutual_info_score

    from ..torch import KMeansTerm

    net = _autoencoder(torch, X, seed, pretrain)
    start = [p.detach().clone() for p in net[2]]
    with torch.no_grad():
        H = net[0](X)
    base = KMeansTerm(10, 10).init_centers(H, n_init=10, random_state=seed)
    centers, sigma = base.centers.clone(), float(base.sigma)
    labels = base.predict(H).numpy()
    rows = [{"method": "AE + K-Means", "acc": clustering_accuracy(y, labels),
             "nmi": float(normalized_mutual_info_score(y, labels)),
             "ratio_min": base.critical_ratio(H), "ratio_last": base.critical_ratio(H),
             "clusters": 10, "variance": 1.0}]
    for method, term in [("F_sigma", KMeansTerm(10, 10)),
                         ("F^(3/2)", KMeansTerm(10, 10, alpha=1.5)),
                         ("F_sigma, fixed sigma", KMeansTerm(10, 10, sigma=sigma))]:
        with torch.no_grad():
            for p, s in zip(net[2], start, strict=True):
                p.copy_(s)
            term.centers.copy_(centers)
        rows.append({"method": method, **_fine_tune(torch, X, y, net, term, seed, epochs)})
    return [{"seed": seed, **row} for row in rows]


def _claims(records):
    def of(method, key):
        return np.array([r[key] for r in records if r["method"] == method])

    fixed_last, fixed_clusters = of("F_sigma, fixed sigma", "ratio_last"), of(
        "F_sigma, fixed sigma", "clusters")
    fixed_nmi = of("F_sigma, fixed sigma", "nmi")
    tied_min = np.concatenate([of("F_sigma", "ratio_min"), of("F^(3/2)", "ratio_min")])
    tied_clusters = np.concatenate([of("F_sigma", "clusters"), of("F^(3/2)", "clusters")])
    variance = np.concatenate([of("F_sigma", "variance"), of("F^(3/2)", "variance")])
    acc = {m: of(m, "acc").mean() for m in ("AE + K-Means", "F_sigma", "F^(3/2)")}
    n = len(fixed_last)
    return [
        Claim("Fixed temperature: lambda_max(C_Z) / sigma^2 falls below 1 in every run",
              "every run, to about 0.01", f"{int((fixed_last < 1).sum())} of {n} runs, to "
              f"{fmt(fixed_last.min())}-{fmt(fixed_last.max())}", bool(np.all(fixed_last < 1))),
        Claim("Fixed temperature: the clustering collapses to one or two clusters",
              "1 or 2 clusters, NMI <= 0.04", f"{int(fixed_clusters.max())} distinct centroids "
              f"at most, NMI <= {fmt(fixed_nmi.max())}",
              bool(fixed_clusters.max() <= 2 and fixed_nmi.max() <= 0.1),
              "centroids within 5% of the spread merged"),
        Claim("Tied temperature (F_sigma, F^(3/2)): the ratio stays above 1 and no run "
              "collapses", "above 2.3, no collapse", f"above {fmt(tied_min.min())}, "
              f"{int(tied_clusters.min())} distinct centroids at least",
              bool(tied_min.min() > 1 and tied_clusters.min() >= 9)),
        Claim("A K-Means term contracts the representation: total variance after / before "
              "fine-tuning (tied F_sigma and F^(3/2))", "0.009 to 0.46",
              f"{fmt(variance.min())} to {fmt(variance.max())}", bool(variance.max() < 1)),
        Claim("Accuracy of the reduced objectives against K-Means on the pretrained "
              "embedding (mean over seeds)", "MNIST 0.830 / 0.831 vs 0.783; below it on "
              "3 of 5 datasets", f"digits {acc['F_sigma']:.3f} / {acc['F^(3/2)']:.3f} vs "
              f"{acc['AE + K-Means']:.3f}", None, "other data and network"),
    ]


def run_deep(contexts, config, progress=True):
    """Sec. 8.3 on digits, when ``config.datasets`` includes them and torch is installed."""
    if importlib.util.find_spec("torch") is None:
        return _skipped('PyTorch is not installed (pip install "softkmeans[torch]")')
    if "digits" not in config.datasets:
        return _skipped("it runs on the digits dataset, which this run leaves out")
    import torch
    from sklearn.datasets import load_digits

    full = config.mode == "full"
    seeds, pretrain, epochs = (5, 50, 30) if full else (2, 15, 20)
    digits = load_digits()
    X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    bar = Progress(seeds, "8.3 deep clustering", progress)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small layers: one thread, no oversubscription
    records = []
    try:
        for seed in range(seeds):
            records += _run_seed(torch, X, digits.target, config.seed + seed, pretrain, epochs)
            bar.update()
    finally:
        torch.set_num_threads(threads)
    methods = list(dict.fromkeys(r["method"] for r in records))
    rows = []
    for m in methods:
        rs = [r for r in records if r["method"] == m]
        rows.append([m] + [f"{np.mean([r[k] for r in rs]):.3f} +- {np.std([r[k] for r in rs]):.3f}"
                           for k in ("acc", "nmi")] + [
            fmt(min(r["ratio_min"] for r in rs)), fmt(max(r["ratio_last"] for r in rs)),
            str(min(r["clusters"] for r in rs)), fmt(float(np.median([r["variance"]
                                                                       for r in rs])))])
    table = Table(f"Table 4 on digits ({seeds} seeds, pretraining {pretrain} epochs, "
                  f"fine-tuning {epochs})", ["Method", "ACC", "NMI",
                                             "min lambda_max/sigma^2", "last (max)",
                                             "distinct centroids (min)", "Var."], rows)
    summary = ("The paper trains on MNIST, Fashion-MNIST, USPS, CIFAR-10 and STL-10, which the "
               "package neither bundles nor downloads. This family runs on the digits that "
               "ship with scikit-learn (1,797 images of 8 x 8 pixels) with a 64-128-10 "
               "autoencoder and needs PyTorch; the claims compare the direction and size of "
               "the effects, not the accuracies.")
    return FamilyResult("8.3", "End-to-end deep clustering (digits)", summary, [table],
                        _claims(records), [], {"deep": records})
