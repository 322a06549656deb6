"""Command line: ``python -m softkmeans demo`` and ``python -m softkmeans reproduce``."""

import argparse
import sys

__all__ = ["main"]


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
    parser = argparse.ArgumentParser(prog="python -m softkmeans", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="fit the three estimators on iris and print a table")
    demo.add_argument("--random-state", type=int, default=0)
    commands.add_parser("reproduce", add_help=False,
                        help="reproduce the paper's experiments (see `reproduce --help`)")
    args, rest = parser.parse_known_args(argv)
    if args.command == "reproduce":
        from .experiments import main as reproduce

        return reproduce(rest)
    parser.parse_args(argv)
    from ._demo import run_demo

    run_demo(args.random_state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
