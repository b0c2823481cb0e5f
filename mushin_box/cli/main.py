# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line: the parser of every command, the flags several share
(one spelling, one check per value), and its exit codes.

Exit codes mean one thing in every command, so that a script can tell an answer from a
failure: 0 done (the same; every cell completed), 1 negative (cells failed, the runs
differ), 2 bad input or unwritable output, 3 cells still run, 130 Ctrl-C, 141 a closed pipe.
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
from mushin_box._slurm.grammar import parse_slurm_memory, parse_slurm_time
from mushin_box.cli.output import OutputError, redacted_output, shown, silence

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
COMMANDS = tuple(
    "build launch resume status ls logs wait cancel show report smoke diff reproduce "
    "completion".split()
)


#: the commands that only read: nothing is left to finalise at exit (see :func:`main`)
READERS = frozenset({"status", "ls", "logs", "show", "report", "diff"})


class UsageError(MushinBoxError, ValueError):
    """Bad input from the command line, worded in its flags: one line on stderr, exit code 2."""


def suggest(word: str, choices: Sequence[str]) -> str:
    """``" (did you mean 'X'?)"`` for the closest of ``choices`` to ``word``, or ``""``.

    >>> suggest("--partion", ["--partition", "--account"]), suggest("--zzz", ["--nodes"])
    (" (did you mean '--partition'?)", '')
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" names the closest valid one."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        import re

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            message += suggest(found.group(1), re.findall(r"'([^']*)'", found.group(2)))
        return super().error(message)


class _HelpFormatter(argparse.HelpFormatter):
    """Keeps the epilog's lines as written: a re-wrapped command line is not one to copy."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(("examples:\n", "exit codes:\n")):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def in_flags(error: MushinBoxError, args: argparse.Namespace) -> str:
    """A kit error in the command's terms: each argument it names that the command has as
    a flag is spelled as that flag (``--name``, ``--name VALUE``), any other as Python.

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


def number(
    *, minimum: float, maximum: float | None = None, unit: str = "", inclusive: bool = True
) -> Callable[[str], float]:
    """An argparse ``type``: a finite float from ``minimum`` (excluded unless ``inclusive``)
    to ``maximum``. ``float()`` alone takes ``nan``, which passes no bound check (a
    ``--timeout nan`` never times out), and ``inf``, which overflows a sleep.

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


def add_switches(parser: argparse._ActionsContainer, switches: dict[str, str]) -> None:
    """Each ``{"--flag": help}`` of ``switches`` as a ``store_true`` flag."""
    for flag, meaning in switches.items():
        parser.add_argument(flag, action="store_true", help=meaning)


def add_tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    """``--atol`` and ``--rtol``: how far a metric may move and still be the same."""
    for flag, meaning in (
        ("--atol", "absolute tolerance of the metrics (default 0: exactly equal)"),
        ("--rtol", "relative tolerance of the metrics: |B-A| <= atol + rtol*|A| (default 0)"),
    ):  # type float: the comparison checks the value (finite, >= 0), as for the Python API
        parser.add_argument(flag, type=float, default=0.0, metavar="X", help=meaning)


def _slurm_type(parse: Callable[..., int]) -> Callable[[str], int]:
    """An argparse ``type`` of SLURM's grammar ``parse``."""

    def typed(text: str) -> int:
        try:
            return parse(text, what="")
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).strip()) from None

    return typed


def _integer(low: int, refusal: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low``, else ``refusal`` of the text given."""

    def typed(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(refusal.format(text))
        return value

    return typed


slurm_time = _slurm_type(parse_slurm_time)
slurm_memory = _slurm_type(parse_slurm_memory)
positive = _integer(1, "{!r} must be a positive integer")
non_negative = _integer(0, "{!r} must be an integer >= 0")
max_parallel = _integer(
    1,
    "{!r}: give the most cells that may run at once, a positive integer (e.g. --max-parallel 50)",
)


def add_scheduler_arguments(parser: argparse.ArgumentParser, title: str) -> None:
    """The SLURM job's flags (``launch``'s, and ``resume``'s, which win over the record)."""
    slurm = parser.add_argument_group(title)
    slurm.add_argument("--partition", help="SLURM partition")
    slurm.add_argument("--account", help="SLURM account")
    slurm.add_argument("--qos", help="SLURM quality of service")
    slurm.add_argument("--constraint", help="node features, e.g. a100")
    slurm.add_argument("--exclude", metavar="NODES", help="nodes not to run on")
    slurm.add_argument(
        "--job-name", help="the job's name in squeue (default: the experiment's name)"
    )
    slurm.add_argument(
        "--time",
        type=slurm_time,
        metavar="TIME",
        help="wall-time limit per job: minutes (90), H:MM:SS (2:00:00) or D-HH:MM:SS "
        "(default 60 minutes)",
    )
    slurm.add_argument(
        "--cpus-per-task", type=positive, metavar="N", help="CPUs per rank (default 1)"
    )
    slurm.add_argument(
        "--mem", type=slurm_memory, metavar="SIZE", help="memory per node: 64G, 500M, ..."
    )
    slurm.add_argument("--mem-gb", type=positive, metavar="GB", help=argparse.SUPPRESS)
    slurm.add_argument(
        "--max-parallel",
        type=max_parallel,
        metavar="N",
        help="at most N cells of the sweep run at once (its job arrays' %%N; a sweep split "
        "into several arrays stays within N: docs/multi-node.md; default 256)",
    )
    slurm.add_argument(
        "--sbatch",
        action="append",
        metavar="KEY=VALUE",
        help="any other sbatch option, e.g. --sbatch mail-type=END (repeatable; KEY alone "
        "for a flag option)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line (``completion`` generates its scripts from it)."""
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
        exits = {**module.EXITS, **_COMMON_EXITS}  # then its examples, ending its --help
        epilog = "exit codes:\n" + "\n".join(f"  {c:<4}{exits[c]}" for c in sorted(exits))
        epilog += "\n\nexamples:\n" + "\n".join(f"  {line}" for line in module.EXAMPLES)
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=epilog,
            formatter_class=_HelpFormatter,
        )
        module.add_arguments(cmd)
        cmd.set_defaults(_module=module, _parser=cmd)
    parser.set_defaults(_parser=parser)  # no command: main prints its help (a command: its own)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line parsed as ``main`` parses it (argparse's exit 2 on bad input)."""
    args, extra = build_parser().parse_known_args(argv)
    # overrides after options (`launch exp.py --gpus 2 lr=0.1`) are left unparsed by
    # argparse: a command with `overrides` takes them; an unknown flag is named by the
    # subcommand's parser, with the closest of its flags
    if extra:
        flags = [a for a in extra if a.startswith("-")]
        if flags or not hasattr(args, "overrides"):
            parser = args._parser
            known = [o for o in parser._option_string_actions if o.startswith("--")]
            named = [f"{f}{suggest(f.split('=', 1)[0], known)}" for f in flags] or extra
            parser.error(f"unrecognized arguments: {' '.join(named)}")
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the command line); its exit code. Run as the
    program, a reading command ends with ``gc.freeze()``: the last collection at exit would
    walk every record read and free nothing (docs/performance.md)."""
    out, err = sys.stdout, sys.stderr
    command, failed = "mushin-box", None
    with redacted_output(sys.argv[1:] if argv is None else argv):
        try:
            args = parse_args(argv)
            if args.command is None:
                args._parser.print_help(sys.stderr)
                return EXIT_USAGE
            command = f"mushin-box {args.command}"
            try:
                code = int(args._module.run(args))
            except MushinBoxError as exc:  # the kit refused: one line, in this command's flags
                if isinstance(exc, OutputError) or args.debug:
                    raise
                print(f"{command}: error: {shown(in_flags(exc, args))}", file=sys.stderr)
                code = EXIT_USAGE
            sys.stdout.flush()  # a full disk says so here, not in Python's flush at exit
        except OutputError as exc:
            failed, code = exc, EXIT_CLOSED_PIPE if exc.closed_pipe else EXIT_USAGE
    if failed is not None:  # a failed stream is silenced: Python flushes it again at exit
        silence(out if failed.stream == "stdout" else err)
        if not (failed.closed_pipe or failed.stream == "stderr"):
            problem = failed.error.strerror or str(failed.error)
            with contextlib.suppress(OSError):
                print(
                    f"{command}: error: cannot write the output ({problem}); what was "
                    "printed is incomplete: write it where there is room, e.g. > FILE on "
                    "another disk",
                    file=err,
                    flush=True,
                )
    if argv is None and command.removeprefix("mushin-box ") in READERS:
        import gc

        gc.freeze()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
