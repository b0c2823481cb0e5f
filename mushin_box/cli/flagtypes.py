# SPDX-License-Identifier: MIT
"""The flags several commands share, and their types: one spelling, one check per value
(``resume`` takes ``launch``'s scheduler flags; ``diff`` and ``reproduce`` the tolerances).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from mushin_box._slurm.grammar import parse_slurm_memory, parse_slurm_time


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


def _integer(low: int, what: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low``, else ``'TEXT' must be {what}``."""

    def typed(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be {what}")
        return value

    return typed


slurm_time = _slurm_type(parse_slurm_time)
slurm_memory = _slurm_type(parse_slurm_memory)
positive = _integer(1, "a positive integer")
non_negative = _integer(0, "an integer >= 0")


def max_parallel(text: str) -> int:
    try:
        return positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give the most cells that may run at once, a positive integer "
            "(e.g. --max-parallel 50)"
        ) from None


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
        default=None,
        metavar="KEY=VALUE",
        help="any other sbatch option, e.g. --sbatch mail-type=END (repeatable; KEY alone "
        "for a flag option)",
    )
