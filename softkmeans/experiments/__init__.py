"""Reproduction of the experiments of Sec. 7 of the paper (arXiv 2603.04625).

``python -m softkmeans reproduce [--quick] [--out DIR]`` calls :func:`main`,
which calls :func:`run`. One module per experiment family:

- :mod:`~softkmeans.experiments.rates`: Sec. 7.3, rates and entmax identification;
- :mod:`~softkmeans.experiments.values`: Sec. 7.5, value gaps;
- :mod:`~softkmeans.experiments.dynamics`: Sec. 7.6, the four algorithms (Table 3);
- :mod:`~softkmeans.experiments.trajectories`: Sec. 7.7, agreement with Lloyd's path;
- :mod:`~softkmeans.experiments.annealing`: Sec. 7.8, deterministic annealing;
- :mod:`~softkmeans.experiments.gradients`: Sec. 8.2, gradients at low temperature
  (needs PyTorch; a line of the report says so when it is absent);
- :mod:`~softkmeans.experiments.deep`: Sec. 8.3, the K-Means term in an autoencoder,
  on scikit-learn's digits (needs PyTorch and the digits among the datasets);
- :mod:`~softkmeans.experiments.codebook`: Sec. 8.4, codebook rules of a VQ autoencoder,
  on the digits too;
- :mod:`~softkmeans.experiments.report` and :mod:`~softkmeans.experiments.figures`:
  the markdown report, per-run CSV records and PNG figures.

All methods of a dataset start from the same M k-means++ initializations.
"""

import argparse
import importlib.util
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

from ..datasets import DATASETS
from ._common import Config, prepare
from .annealing import annealing_paths, path_claims, run_annealing
from .codebook import run_codebook
from .deep import run_deep
from .dynamics import run_dynamics
from .figures import _pyplot, plot_all
from .gradients import run_gradients
from .rates import run_alpha_family, run_rates
from .report import write_records, write_report
from .trajectories import run_trajectories
from .values import run_values

__all__ = ["Config", "FAMILIES", "run", "main"]

#: Experiment families, in the order of the paper.
FAMILIES = ("rates", "values", "dynamics", "trajectories", "annealing", "gradients",
            "deep", "codebook")


def _run_families(contexts, config, families, progress):
    results, data = [], {"betas": config.betas}
    if "rates" in families:
        res, data["rates"] = run_rates(contexts, config, progress)
        alpha, data["alpha"] = run_alpha_family(contexts, config, progress)
        results += [res, alpha]
    if "values" in families:
        res, data["values"] = run_values(contexts, config, progress)
        results.append(res)
    if "dynamics" in families:
        results.append(run_dynamics(contexts, config, progress))
    if "trajectories" in families:
        res, data["trajectories"] = run_trajectories(contexts, config, progress)
        results.append(res)
    if "annealing" in families:
        res = run_annealing(contexts, config, progress)
        data["paths"] = annealing_paths(contexts, config)
        if data["paths"]:
            res.claims += path_claims(data["paths"])
        results.append(res)
    if "gradients" in families:
        res, curves = run_gradients(contexts, config, progress)
        if curves is not None:
            data["gradients"] = curves
        results.append(res)
    if "deep" in families:
        results.append(run_deep(contexts, config, progress))
    if "codebook" in families:
        results.append(run_codebook(contexts, config, progress))
    return results, data


def run(quick=False, out="softkmeans-reproduction", *, config=None, families=FAMILIES,
        progress=True, backend="numpy"):
    """Run the reproduction and write ``report.md``, figures and records to ``out``.

    The figures need matplotlib (``pip install "softkmeans[plot]"``); without
    it the report and the records are written without them, and a warning
    says so.

    Parameters
    ----------
    quick : bool, default=False
        Use :meth:`Config.quick` (minutes) instead of :meth:`Config.full` (the
        paper's sizes: M = 200, T = 150). Ignored when ``config`` is given.
    out : str or path, default="softkmeans-reproduction"
        Output folder (created).
    config : Config, default=None
        Explicit sizes.
    families : sequence of str, default=FAMILIES
        Which experiment families to run.
    progress : bool, default=True
        Print a plain-text progress bar on stderr.
    backend : str, default="numpy"
        Engine used for every pass.

    Returns
    -------
    pathlib.Path
        The report's path.

    Examples
    --------
    >>> from softkmeans.experiments import Config, run
    >>> cfg = Config.quick(n_init=2, datasets=("separation_8",))
    >>> path = run(out=tmp_dir, config=cfg, families=("values",),
    ...            progress=False)  # doctest: +SKIP
    """
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"Unknown families {sorted(unknown)}; expected some of {FAMILIES}.")
    if config is None:
        config = Config.quick() if quick else Config.full()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    problem = _matplotlib_problem()
    if problem:  # said before the run, which may take half an hour
        warnings.warn(f"matplotlib {problem}: the report will be written without its figures "
                      '(pip install "softkmeans[plot]" to draw them).', stacklevel=2)
    start = time.perf_counter()
    contexts = [prepare(name, config, backend) for name in config.datasets]
    results, data = _run_families(contexts, config, families, progress)
    write_records(results, out)
    for result in results:
        result.figures = []
    if not problem:
        for section, names in plot_all(out, data).items():
            next(r for r in results if r.section == section).figures += names
    return write_report(results, out, config, time.perf_counter() - start, config.mode)


def _matplotlib_problem():
    """Why matplotlib's pyplot cannot draw the figures (for a warning), or None."""
    if importlib.util.find_spec("matplotlib") is None:
        return "is not installed"
    try:
        _pyplot()
    except Exception as exc:  # noqa: BLE001 - a broken installation fails in many ways
        return f"could not be imported ({type(exc).__name__}: {exc})"
    return None


def main(argv=None):
    """Command line: ``[reproduce] [--quick] [--out DIR] [--n-init M] [--datasets ...]``.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments (``sys.argv[1:]`` when None); a leading ``"reproduce"`` is skipped.

    Returns
    -------
    int
        Exit status (0).
    """
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["reproduce"]:
        argv = argv[1:]
    parser = argparse.ArgumentParser(prog="python -m softkmeans reproduce",
                                     description="Reproduce Secs. 7 and 8 of arXiv 2603.04625.")
    parser.add_argument("--quick", action="store_true",
                        help="fewer initializations and temperatures (minutes)")
    parser.add_argument("--out", default="softkmeans-reproduction",
                        help="output folder (default: %(default)s)")
    parser.add_argument("--n-init", type=int, default=None, help="paired initializations M")
    parser.add_argument("--datasets", nargs="+", default=None, metavar="NAME",
                        help=f"subset of the datasets (default: all): {', '.join(DATASETS)}")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    config = Config.quick() if args.quick else Config.full()
    changes = {"seed": args.seed}
    if args.n_init is not None:
        changes["n_init"] = args.n_init
    if args.datasets is not None:
        changes["datasets"] = tuple(args.datasets)
    if not args.out.strip():
        parser.error("--out needs a folder name; use --out . for the current folder")
    try:
        config = replace(config, **changes)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=args.out).close()  # writable: checked before the long run
    except ValueError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"cannot write to the output folder {args.out!r}: {exc.strerror}")
    path = run(args.quick, args.out, config=config, families=args.families,
               progress=not args.no_progress)
    print(f"Report written to {path}")
    return 0
