# SPDX-License-Identifier: MIT
"""``mushin-box ls [ROOT]``: the sweeps under a directory, newest first, their cells counted
by state as ``status`` shows them. Presentation only: :mod:`mushin_box._sweepdir.board`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from mushin_box.cli.main import UsageError
from mushin_box.cli.output import JSON_HELP, print_json, shown
from mushin_box.cli.tables import duration

HELP = "list the sweeps under ROOT, newest first: launcher, cells by state, start, wall time"
EXAMPLES = ("mushin-box ls multirun --depth 2",)
EXITS = {0: "listed (also when there is no sweep)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "root", metavar="ROOT", nargs="?", default=".", help="where to look (default: .)"
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=4,
        metavar="N",
        help="how many directory levels down to look (default 4)",
    )
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def _row(sweep: Any, root: Path) -> dict[str, Any]:
    from mushin_box._sweepdir.manifest import recorded_launcher

    shown = os.path.relpath(sweep.root, root)
    if shown == ".":  # ROOT is itself the sweep: named as it was given
        shown = str(root)
    return {
        "sweep": shown,
        "path": str(sweep.root.resolve()),
        "launcher": sweep.launcher or recorded_launcher(sweep.root),
        "cells": len(sweep.cells),
        "counts": sweep.counts(),
        "started": sweep.started,
        "wall_s": sweep.wall_s(),
        "active": sweep.active,
    }


def run(args: argparse.Namespace) -> int:
    from mushin_box._sweepdir.board import find_sweeps, read_sweep

    root = Path(args.root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory; give a directory that holds sweeps")
    if args.depth < 0:
        raise UsageError(f"--depth {args.depth} is negative; give 0 or more")
    rows = []
    for path in find_sweeps(root, max_depth=args.depth):
        try:
            rows.append(_row(read_sweep(path), root))
        except (OSError, ValueError):  # vanished or unreadable while listing: not a sweep now
            continue
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no sweeps under {root} ({args.depth} levels down)", file=sys.stderr)
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table()
    table.add_column("sweep", overflow="fold")
    for name in ("launcher", "cells", "started", "wall"):
        table.add_column(name, no_wrap=name != "cells")
    for row in rows:
        counts = ", ".join(f"{n} {state}" for state, n in row["counts"].items())
        table.add_row(
            escape(shown(row["sweep"])),
            escape(row["launcher"] or "-"),
            escape(counts or "none"),
            escape((row["started"] or "-")[:16].replace("T", " ")),
            duration(row["wall_s"]),
        )
    Console(highlight=False).print(table)
    return 0
