"""Command line: ``python -m softkmeans demo``, ``reproduce`` and ``compile``."""

import argparse
import functools
import os
import signal
import sys

__all__ = ["main"]

_DESCRIPTION = ("softkmeans: soft, sparse (entmax) and annealed K-Means (arXiv 2603.04625). "
                "Commands: demo, reproduce, compile; 'COMMAND --help' for each.")


def seed(text):
    """An ``argparse`` type: an integer seed that numpy's generators accept."""
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32); got {value}")
    return value


def _quiet_on_broken_pipe(main):
    """Make ``main`` end as command-line tools do when its reader goes away (``| head``).

    Python ignores SIGPIPE, so a write to a closed pipe raises
    BrokenPipeError, whose traceback ended the command. Standard output is
    flushed before ``main`` returns, so that the error is raised here rather
    than at the interpreter's exit; then it is pointed at ``os.devnull``
    (nothing more can reach the reader) and the exit status is
    ``128 + SIGPIPE`` (141), what a shell reports for a tool that SIGPIPE
    ended; 1 where there is no SIGPIPE.
    """

    @functools.wraps(main)
    def run(argv=None):
        try:
            try:
                return main(argv)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE if hasattr(signal, "SIGPIPE") else 1

    return run


@_quiet_on_broken_pipe
def main(argv=None):
    """Entry point of ``python -m softkmeans``.

    Parameters
    ----------
    argv : list of str, default=None
        Arguments; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        Exit status.
    """
    from . import __version__

    parser = argparse.ArgumentParser(prog="python -m softkmeans", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"softkmeans {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_help = ("show, in a few seconds, four cases where the estimators differ from "
                 "scikit-learn's KMeans (data drawn with fixed seeds; nothing to download)")
    demo = commands.add_parser("demo", help=demo_help, description=demo_help)
    demo.add_argument("--random-state", type=seed, default=0,
                      help="seed of the k-means++ starts (an integer in [0, 2**32))")
    commands.add_parser("reproduce", add_help=False,
                        help="reproduce the paper's experiments (see `reproduce --help`)")
    compile_help = ("compile the numba kernels into numba's on-disk cache (pip install does "
                    "it; for editable installs, or another user's or NUMBA_CACHE_DIR's cache)")
    commands.add_parser("compile", help=compile_help, description=compile_help)
    args, rest = parser.parse_known_args(argv)
    if args.command == "reproduce":
        from .experiments import main as reproduce

        return reproduce(rest)
    parser.parse_args(argv)
    if args.command == "compile":
        from ._engines import _numba_state

        state = _numba_state()
        if state != "ok":
            why = {"missing": "it is not installed",
                   "disabled": "the environment variable NUMBA_DISABLE_JIT turns it off"}[state]
            print(f"numba cannot compile the kernels here: {why}.", file=sys.stderr)
            return 1
        from ._engines._numba.compile import compile_kernels
        from ._jit import JIT_OPTIONS

        print("numba kernels (compiled, or loaded from the cache when up to date):")
        compile_kernels(file=sys.stdout)
        if not JIT_OPTIONS["cache"]:
            print("numba has no writable cache directory here: the kernels were compiled for "
                  "this process only (set NUMBA_CACHE_DIR to keep them).")
            return 1
        _print_cache_folder()
        return 0
    from ._demo import run_demo

    run_demo(args.random_state)
    return 0


def _print_cache_folder():
    """Say where numba put the kernels, and whether that is where NUMBA_CACHE_DIR asked."""
    import os

    import numba

    from ._engines._numba.kernels import dense_pass

    folder = getattr(getattr(dense_pass, "_cache", None), "cache_path", None)  # numba internals
    if folder is None:
        return
    folder = os.path.abspath(folder)  # relative where NUMBA_CACHE_DIR is
    print(f"numba's cache folder: {folder}")
    requested = numba.config.CACHE_DIR
    if requested and os.path.commonpath([os.path.abspath(requested), folder]) != os.path.abspath(
            requested):
        print(f"NUMBA_CACHE_DIR ({requested}) is not writable, so numba used the folder above: "
              "processes with the same NUMBA_CACHE_DIR find the kernels there too.")


if __name__ == "__main__":
    sys.exit(main())
