"""
===========================================================
Codebook rules of a vector-quantized autoencoder (PyTorch)
===========================================================

A small VQ autoencoder on scikit-learn's digits: the encoder maps each image to
4 latent vectors of dimension 8, each quantized to the nearest of 512 codes by
:class:`softkmeans.torch.SoftVectorQuantizer` (straight-through estimator,
commitment loss), and the decoder reconstructs the image. Every codebook starts
from K-Means on the latents of the untrained encoder
(:meth:`~softkmeans.torch.SoftVectorQuantizer.init_codebook`). Only the codebook
rule changes: hard assignments with the moving-average (closed-form) update, the
same with dead-code resets, softmax and entmax-1.5 responsibilities with the same
update, and softmax with a gradient step on ``F_sigma``.

The bars give the number of codes used on held-out images, their perplexity and
the reconstruction error. As the encoder moves away from the latents the codebook
was fitted to, hard updates leave more than half of the codes unused and softmax
updates keep more of them in use; on this small problem the dead-code reset still
uses the most codes at the lowest error: a reminder that the effect depends on the
setting.

Needs PyTorch (``pip install "softkmeans[torch]"``); about 15 s on one CPU thread.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

try:
    import torch
except ImportError:  # the gallery still builds without PyTorch
    torch = None

EPOCHS = 15
# sphinx_gallery_start_ignore
# The tests run every example at a small size.
import os  # noqa: E402

if os.environ.get("SOFTKMEANS_EXAMPLE_SMALL") == "1":
    EPOCHS = 1
# sphinx_gallery_end_ignore
CODES, VECTORS, DIM = 512, 4, 8
RULES = {"hard, EMA": ("hard", "ema", None), "hard + reset, EMA": ("hard", "ema", 100),
         "softmax, EMA": ("softmax", "ema", None), "entmax-1.5, EMA": ("entmax", "ema", None),
         "softmax, gradient": ("softmax", "gradient", None)}


def autoencoder():
    """Encoder and decoder, with the same initial weights for every rule."""
    torch.manual_seed(0)
    nn = torch.nn
    encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, VECTORS * DIM))
    decoder = nn.Sequential(nn.Linear(VECTORS * DIM, 128), nn.ReLU(), nn.Linear(128, 64))
    return encoder, decoder


def kmeans_codebook(X_train):
    """K-Means codes of the untrained encoder's latents: every code starts in use."""
    from softkmeans.torch import SoftVectorQuantizer

    with torch.no_grad():
        latents = autoencoder()[0](X_train).reshape(-1, DIM)
        return SoftVectorQuantizer(CODES, DIM).init_codebook(latents, random_state=0).codebook


def train(rule, X_train, X_test, codebook):
    """Train one VQ autoencoder from ``codebook``; (codes used, perplexity, test MSE)."""
    from softkmeans.torch import SoftVectorQuantizer, code_usage

    assignment, update, reset = rule
    encoder, decoder = autoencoder()
    vq = SoftVectorQuantizer(CODES, DIM, assignment=assignment, update=update,
                             reset_every=reset).set_codebook(codebook)
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters(),
                                  *vq.parameters()], 2e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(EPOCHS):
        for idx in torch.randperm(len(X_train), generator=gen).split(64):
            out = vq(encoder(X_train[idx]).reshape(-1, VECTORS, DIM))
            recon = decoder(out.quantized.reshape(-1, VECTORS * DIM))
            loss = ((recon - X_train[idx]) ** 2).mean() + out.loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    vq.eval()
    with torch.no_grad():
        out = vq(encoder(X_test).reshape(-1, VECTORS, DIM))
        mse = float(((decoder(out.quantized.reshape(-1, VECTORS * DIM)) - X_test) ** 2).mean())
    perplexity, used = code_usage(out.codes, CODES)
    return used, perplexity, mse


def main():
    if torch is None:
        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "This example needs PyTorch", ha="center")
        return fig
    X = torch.tensor(load_digits().data / 16.0, dtype=torch.float32)
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(0))
    X_train, X_test = X[order[:1400]], X[order[1400:]]
    codebook = kmeans_codebook(X_train)
    results = {name: train(rule, X_train, X_test, codebook) for name, rule in RULES.items()}
    for name, (used, perplexity, mse) in results.items():
        print(f"{name:>18}: {used:3d} codes used, perplexity {perplexity:6.1f}, "
              f"MSE {mse:.4f}")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    names = list(results)
    for ax, column, title in zip(axes, range(3), ("codes used (of 512)", "perplexity",
                                                  "test reconstruction MSE"), strict=True):
        ax.barh(np.arange(len(names)), [results[n][column] for n in names], color="tab:blue")
        ax.set_yticks(np.arange(len(names)), names if column == 0 else [])
        ax.invert_yaxis()
        ax.set_title(title)
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
