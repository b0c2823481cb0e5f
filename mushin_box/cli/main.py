# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: parsing and presentation only.

Each subcommand lives in its own module ``mushin_box.cli.<name>`` exposing
``HELP: str``, ``EXAMPLES: tuple[str, ...]`` (whole command lines, each starting
``mushin-box <name>``: the ``examples:`` that end its ``--help``), ``EXITS: dict[int, str]``
(what its own exit codes mean, shown in its ``--help``), ``add_arguments(parser)`` and
``run(args) -> int``; the module is imported only to build its parser (cheap: no
torch/Lightning at import) and to run it.

Exit codes mean one thing in every command, so that a script can tell an answer from a
failure: :data:`EXIT_OK` 0 (done; the same; every cell completed), :data:`EXIT_NEGATIVE` 1
(a negative answer: cells failed, the runs differ, not reproduced), :data:`EXIT_USAGE` 2
(an error: bad input, or the output could not be written; one line on stderr),
:data:`EXIT_RUNNING` 3 (cells still run or wait), :data:`EXIT_INTERRUPTED` 130 (Ctrl-C) and
:data:`EXIT_CLOSED_PIPE` 141 (the reader of the output went away, as for a command that
SIGPIPE ended: ``| head``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from mushin_box._core.errors import MushinBoxError, python_argument
from mushin_box._core.version import __version__
from mushin_box.cli.output import OutputError, redacted_output, shown, silence

__all__ = [
    "COMMANDS",
    "EXIT_CLOSED_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "EXIT_RUNNING",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "examples_of",
    "main",
    "number",
    "parse_args",
    "suggest",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_RUNNING = 3
EXIT_INTERRUPTED = 130
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`
#: the codes every command may end with, whatever it does
_COMMON_EXITS = {
    EXIT_USAGE: "error: bad input, or the output could not be written (one line on stderr)",
    EXIT_CLOSED_PIPE: "the reader of the output went away (a closed pipe: `| head`)",
}

# order shown in --help
COMMANDS = (
    "build",
    "launch",
    "resume",
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


#: the commands that only read: their run ends with every file they wrote closed, and
#: nothing left that needs finalising (see :func:`main`)
READERS = frozenset({"status", "ls", "logs", "show", "report", "diff"})


class UsageError(MushinBoxError, ValueError):
    """Bad input from the command line, worded in its flags: one line on stderr, exit code 2."""


def suggest(word: str, choices: Sequence[str]) -> str:
    """``" (did you mean 'X'?)"`` for the closest of ``choices`` to ``word``, or ``""``.

    Examples
    --------
    >>> suggest("--partion", ["--partition", "--account"]), suggest("--zzz", ["--nodes"])
    (" (did you mean '--partition'?)", '')
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" (a mistyped subcommand or choice) names
    the closest valid one, as override typos do."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        import re

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            message += suggest(found.group(1), choices)
        return super().error(message)


def _unknown_flags(parser: argparse.ArgumentParser, flags: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" line, with the closest flag of ``parser`` for
    each unknown one (``--partion`` -> ``--partition``)."""
    known = [o for o in parser._option_string_actions if o.startswith("--")]
    named = [f"{f}{suggest(f.split('=', 1)[0], known)}" for f in flags]
    return f"unrecognized arguments: {' '.join(named)}"


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps the description; keeps the ``examples:`` epilog's lines as written (a command
    line re-wrapped would no longer be one to copy)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(("examples:\n", "exit codes:\n")):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def in_flags(error: MushinBoxError, args: argparse.Namespace) -> str:
    """A kit error in the command's terms: each argument it names (``error.arguments``) that
    the command passes on as a flag of the same name is spelled as that flag (``--name``
    for a switch, else ``--name VALUE``); any other keeps its Python spelling.

    Examples
    --------
    >>> error = MushinBoxError("pass {allow_dirty}, or {into}, or {resume}",
    ...                        arguments={"allow_dirty": True, "into": "DIR", "resume": True})
    >>> in_flags(error, argparse.Namespace(allow_dirty=False, into=None))
    'pass --allow-dirty, or --into DIR, or resume=True'
    """

    def spell(name: str, value: object) -> str:
        if not hasattr(args, name):
            return python_argument(name, value)
        flag = "--" + name.replace("_", "-")
        return flag if value is True else f"{flag} {value}"

    return error.worded(spell)


def examples_of(module: object) -> tuple[str, ...]:
    """A command module's ``EXAMPLES``: one command line each (its ``--help`` ends with them)."""
    return tuple(getattr(module, "EXAMPLES", ()))


def _epilog(module: object) -> str:
    """What ends a command's ``--help``: its exit codes, then its examples."""
    exits = {**getattr(module, "EXITS", {EXIT_OK: "done"}), **_COMMON_EXITS}
    text = "exit codes:\n" + "\n".join(f"  {c:<4}{exits[c]}" for c in sorted(exits))
    lines = examples_of(module)
    if lines:
        text += "\n\nexamples:\n" + "\n".join(f"  {line}" for line in lines)
    return text


def number(
    *, minimum: float, maximum: float | None = None, unit: str = "", inclusive: bool = True
) -> Callable[[str], float]:
    """An argparse ``type`` for a float flag: a finite number from ``minimum`` (excluded
    unless ``inclusive``) to ``maximum`` (default: any finite number), else exit 2 naming
    the range. ``float()`` alone takes ``nan``, which compares false with every bound (a
    ``--timeout nan`` never times out), ``inf`` and ``1e308``, which overflow a sleep.

    Examples
    --------
    >>> number(minimum=1, maximum=3600, unit="seconds")("2.5")
    2.5
    >>> number(minimum=0, maximum=3600, unit="seconds")("nan")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'nan' is not a number of seconds from 0 to 3600; give e.g. 10
    >>> number(minimum=0)("inf")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 'inf' is not a finite number from 0; give e.g. 0
    """
    import math

    what = f"a{'' if maximum is not None else ' finite'} number{f' of {unit}' if unit else ''}"
    what += f" {'from' if inclusive else 'above'} {minimum:g}"
    if maximum is not None:
        what += f" to {maximum:.0f}" if maximum >= 1e6 else f" to {maximum:g}"
    example = minimum if maximum is None else max(minimum, min(maximum, 10.0))

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low = minimum <= value if inclusive else minimum < value
        if not (math.isfinite(value) and low and (maximum is None or value <= maximum)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}; give e.g. {example:g}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line, every subcommand's arguments included (also
    what ``mushin-box completion`` generates its scripts from)."""
    parser = _Parser(
        prog="mushin-box",
        description="Reproducible multi-node hydra-zen + Lightning experiments on SLURM.",
    )
    parser.add_argument("--version", action="version", version=f"mushin-box {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="on an error, show its traceback, not one line"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"mushin_box.cli.{name}")
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=_epilog(module),
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
            if flags:
                own.error(_unknown_flags(own, flags))
            own.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The program: run the command ``argv`` (default: the command line), return its exit
    code.

    Design note: run as the program (``argv`` None), a reading command ends by freezing
    the garbage collector's objects (``gc.freeze``). Python's exit runs one last
    collection over every object still alive, which for ``status`` is every record it
    read (docs/performance.md has its cost): it would free nothing a process about to end
    needs, since such a command has closed every file it wrote.
    Called with ``argv`` (a test, a notebook), the caller's process goes on, and nothing
    is frozen."""
    out, err = sys.stdout, sys.stderr
    with redacted_output(sys.argv[1:] if argv is None else argv):
        code, failed, command = _main(argv)
    if failed is not None:
        _output_failed(failed, out, err)
    if argv is None and command in READERS:
        import gc

        gc.freeze()
    return code


def _main(argv: Sequence[str] | None) -> tuple[int, Any, str | None]:
    """(exit code, the :class:`~mushin_box.cli.output.OutputError` that ended it or None,
    the command's name)."""
    command = "mushin-box"
    name = None
    try:
        parser = build_parser()
        args = parse_args(argv, parser)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE, None, None
        name = args.command
        command = f"mushin-box {args.command}"
        try:
            code = int(args._module.run(args))
        except MushinBoxError as exc:  # the kit refused: one line, in this command's flags
            if isinstance(exc, OutputError) or args.debug:
                raise
            print(f"{command}: error: {shown(in_flags(exc, args))}", file=sys.stderr)
            code = EXIT_USAGE
        sys.stdout.flush()  # a full disk says so here, not in Python's flush at exit
        return code, None, name
    except OutputError as exc:
        exc.command = command
        return (EXIT_CLOSED_PIPE if exc.closed_pipe else EXIT_USAGE), exc, name


def _output_failed(failed: Any, out: Any, err: Any) -> None:
    """A write to stdout or stderr failed: silence that stream (Python flushes it again at
    exit) and, unless the reader only went away or stderr itself failed, say so on one
    line."""
    silence(out if failed.stream == "stdout" else err)
    if failed.closed_pipe or failed.stream == "stderr":
        return
    problem = failed.error.strerror or str(failed.error)
    with contextlib.suppress(OSError):
        print(
            f"{failed.command}: error: cannot write the output ({problem}); what was "
            "printed is incomplete: write it where there is room, e.g. > FILE on another disk",
            file=err,
            flush=True,
        )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
