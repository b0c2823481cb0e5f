# SPDX-License-Identifier: MIT
"""The ``mushin-box`` command line. Parsing and presentation only; no torch at start-up."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from mushin_box import __version__

    parser = argparse.ArgumentParser(
        prog="mushin-box",
        description="Reproducible multi-node hydra-zen + Lightning experiments on SLURM.",
    )
    parser.add_argument("--version", action="version", version=f"mushin-box {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return 0  # pragma: no cover - no subcommands yet


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
