# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and presentation only.

Each subcommand lives in its own module ``mushin_box.cli.<name>`` exposing
``HELP: str``, ``EXAMPLES: tuple[str, ...]`` (whole command lines, each starting
``mushin-box <name>``: the ``examples:`` that end its ``--help``), ``add_arguments(parser)``
and ``run(args) -> int``; the module is imported only to build its parser (cheap: no
torch/Lightning at import) and to run it.
Exit codes: 0 success, 1 a negative result (e.g. ``diff`` found differences), 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

__all__ = [
    "COMMANDS",
    "UsageError",
    "build_parser",
    "examples_of",
    "in_flags",
    "main",
    "parse_args",
]

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
    "completion",
)


class UsageError(Exception):
    """Bad input from the command line: printed without a traceback, exit code 2."""


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps the description; keeps the ``examples:`` epilog's lines as written (a command
    line re-wrapped would no longer be one to copy)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def in_flags(message: str, parameters: Sequence[str]) -> str:
    """A library error, worded in API terms, in the command's terms: each ``name=True``
    becomes ``--name`` and each ``name=VALUE`` becomes ``--name VALUE`` (``_`` as ``-``),
    for the ``parameters`` the command passes on as flags of the same name.

    Examples
    --------
    >>> in_flags("pass allow_dirty=True to run anyway, or into=DIR", ["allow_dirty", "into"])
    'pass --allow-dirty to run anyway, or --into DIR'
    """
    import re

    for name in parameters:
        flag = "--" + name.replace("_", "-")
        message = re.sub(rf"\b{name}=True\b", flag, message)
        message = re.sub(rf"\b{name}=", flag + " ", message)
    return message


def examples_of(module: object) -> tuple[str, ...]:
    """A command module's ``EXAMPLES``: one command line each (its ``--help`` ends with them)."""
    return tuple(getattr(module, "EXAMPLES", ()))


def _examples(module: object) -> str | None:
    lines = examples_of(module)
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) if lines else None


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, every subcommand's arguments included (also
    what ``mushin-box completion`` generates its scripts from)."""
    from mushin_box._core.version import __version__

    parser = argparse.ArgumentParser(
        prog="mushin-box",
        description="Reproducible multi-node hydra-zen + Lightning experiments on SLURM.",
    )
    parser.add_argument("--version", action="version", version=f"mushin-box {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"mushin_box.cli.{name}")
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=_examples(module),
            formatter_class=_HelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module, _parser=cmd)
    return parser


def parse_args(
    argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None
) -> argparse.Namespace:
    """The command line parsed as ``main`` parses it (argparse's exit 2 on bad input)."""
    parser = parser or build_parser()
    args, extra = parser.parse_known_args(argv)
    # positional overrides may come after options (`launch exp.py --gpus 2 lr=0.1`), which
    # argparse leaves unparsed: a command with `overrides` takes them, in order
    if extra:
        # named by the subcommand's parser (its usage line), and only the flags it lacks
        flags = [a for a in extra if a.startswith("-")]
        if flags or not hasattr(args, "overrides"):
            own = getattr(args, "_parser", parser)
            own.error(f"unrecognized arguments: {' '.join(flags or extra)}")
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(argv, parser)
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
