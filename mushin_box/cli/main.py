# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and presentation only.

Each subcommand lives in its own module ``mushin_box.cli.<name>`` exposing
``HELP: str``, ``add_arguments(parser)`` and ``run(args) -> int``; the module is imported
only to build its parser (cheap: no torch/Lightning at import) and to run it.
Exit codes: 0 success, 1 a negative result (e.g. ``diff`` found differences), 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "UsageError", "main"]

# order shown in --help
COMMANDS = (
    "build",
    "launch",
    "status",
    "ls",
    "logs",
    "wait",
    "cancel",
    "show",
    "report",
    "smoke",
    "diff",
    "reproduce",
)


class UsageError(Exception):
    """Bad input from the command line: printed without a traceback, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    from mushin_box._core.version import __version__

    parser = argparse.ArgumentParser(
        prog="mushin-box",
        description="Reproducible multi-node hydra-zen + Lightning experiments on SLURM.",
    )
    parser.add_argument("--version", action="version", version=f"mushin-box {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"mushin_box.cli.{name}")
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # positional overrides may come after options (`launch exp.py --gpus 2 lr=0.1`), which
    # argparse leaves unparsed: a command with `overrides` takes them, in order
    if extra:
        if not hasattr(args, "overrides") or any(a.startswith("-") for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._module.run(args))
    except UsageError as exc:
        print(f"mushin-box {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader went away (`status --json | head`): what it read stands, and Python
        # must not print a traceback while flushing stdout at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
