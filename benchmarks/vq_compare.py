"""SoftVectorQuantizer beside vector-quantize-pytorch's VectorQuantize, on the CPU.

Each seed draws training batches and held-out vectors from a mixture of isotropic
Gaussians (means from a standard normal, standard deviation 0.5) and trains every contender
on the same batches: one training step is a forward and a backward pass of the layer
alone (its commitment loss), and the contenders alternate step by step in this
process, so that a slow moment of the machine falls on all of them. The table gives,
per contender, the median over the seeds of the median step time and of the median
ratio of its steps' times to the first contender's same steps (steady when the machine
is shared), and on the held-out vectors in evaluation mode the codes in use, their
perplexity and the reconstruction error ``mean ||x - q(x)||^2 / dim`` (ranges over
the seeds in brackets). The k-means initialization runs inside the first step, which the median
leaves out.

Needs ``vector-quantize-pytorch`` (a benchmark-only dependency, installed without
its torch requirement: ``pip install --no-deps vector-quantize-pytorch==1.32.0
einops einx frozendict loguru torch-einops-utils``); without it the script measures
this library's contenders only. Run from the repository root::

    python benchmarks/vq_compare.py --threads 1
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softkmeans.torch import SoftVectorQuantizer, code_usage  # noqa: E402

#: name: keyword arguments of SoftVectorQuantizer.
OURS = {
    "SoftVectorQuantizer hard-EMA": {"assignment": "hard"},
    "SoftVectorQuantizer softmax-EMA": {"assignment": "softmax"},
    "SoftVectorQuantizer entmax-EMA": {"assignment": "entmax"},
    "SoftVectorQuantizer softmax-EMA, k-means init": {"assignment": "softmax",
                                                      "kmeans_init": True},
    "SoftVectorQuantizer entmax-EMA, k-means init": {"assignment": "entmax",
                                                     "kmeans_init": True},
}


def mixture(seed, args):
    """Training batches, shape (steps, batch, dim), and held-out vectors of one seed."""
    gen = torch.Generator().manual_seed(seed)
    means = torch.randn(args.gaussians, args.dim, generator=gen)

    def draw(n):
        labels = torch.randint(args.gaussians, (n,), generator=gen)
        return means[labels] + 0.5 * torch.randn(n, args.dim, generator=gen)

    train = draw(args.steps * args.batch).reshape(args.steps, args.batch, args.dim)
    return train, draw(args.held_out)


class Contender:
    """A quantizer with a uniform step and evaluation: ``layer(x)`` gives
    ``(quantized, codes, loss)`` for ``x`` of shape ``(1, n, dim)``."""

    def __init__(self, layer):
        self.layer = layer
        self.times = []

    def step(self, batch):
        x = batch[None].clone().requires_grad_(True)
        start = time.perf_counter()
        _, _, loss = self.layer(x)
        loss.sum().backward()
        self.times.append(time.perf_counter() - start)

    @torch.no_grad()
    def evaluate(self, held_out, num_codes, reference):
        """Median step time (and ratio to ``reference``'s same steps), codes in use,
        perplexity and error on ``held_out``."""
        self.layer.eval()
        quantized, codes, _ = self.layer(held_out[None])
        perplexity, used = code_usage(codes, num_codes)
        error = float(((quantized[0] - held_out) ** 2).mean())
        ratios = [ours / ref for ours, ref in zip(self.times[1:], reference.times[1:],
                                                   strict=True)]
        return {"ms": 1e3 * statistics.median(self.times[1:]),
                "ratio": statistics.median(ratios), "used": used, "perplexity": perplexity,
                "mse": error}


def contenders(args):
    """name: Contender, VectorQuantize first when it is installed."""
    found = {}
    try:
        from vector_quantize_pytorch import VectorQuantize
    except ImportError:
        print("vector-quantize-pytorch is not installed: its row is left out")
    else:
        found["VectorQuantize (EMA defaults)"] = Contender(
            VectorQuantize(dim=args.dim, codebook_size=args.codes))
    for name, kwargs in OURS.items():
        found[name] = Contender(SoftVectorQuantizer(args.codes, args.dim, **kwargs))
    return found


def run_seed(seed, args):
    """Every contender trained on the seed's batches, alternating; name: results, with
    time ratios to the first contender."""
    train, held_out = mixture(seed, args)
    torch.manual_seed(seed)
    found = contenders(args)
    for batch in train:
        for contender in found.values():
            contender.step(batch)
    reference = next(iter(found.values()))
    return {name: c.evaluate(held_out, args.codes, reference) for name, c in found.items()}


def summary(values, fmt):
    """Median over the seeds, with the range when it is not a single value."""
    mid = fmt.format(statistics.median(values))
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return mid if low == high else f"{mid} [{low}-{high}]"


def table(results, args):
    """An RST table of the results of every seed, one row per contender."""
    header = ("contender", "ms / step", "time ratio", "codes used", "perplexity", "MSE")
    rows = []
    for name in results[0]:
        per_seed = [seed[name] for seed in results]
        rows.append((name, *(summary([r[key] for r in per_seed], fmt) for key, fmt in (
            ("ms", "{:.1f}"), ("ratio", "{:.2f}"), ("used", "{:.0f}"), ("perplexity", "{:.0f}"),
            ("mse", "{:.4f}")))))
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), rule]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
              for row in rows]
    return "\n".join(line.rstrip() for line in [*lines, rule])


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", type=int, default=512)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--gaussians", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--held-out", type=int, default=8192)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); {args.codes} codes "
          f"of dimension {args.dim}, {args.steps} batches of {args.batch} vectors from "
          f"{args.gaussians} Gaussians, {args.held_out} held out, {args.seeds} seeds")
    print(table([run_seed(seed, args) for seed in range(args.seeds)], args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
