# SPDX-License-Identifier: MIT
"""``mushin-box report DIR [--against OTHER] [-o FILE]``: a sweep as one self-contained
HTML page (:func:`mushin_box._results.report.render_report`), ``DIR/report.html`` by default.

``-o`` never writes over what a run produced: a path inside a cell directory or under a
sweep's, or an existing file that is not an earlier page, is refused before anything is
read or written, unless ``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import MANIFEST_FILE, STATUS_FILE
from mushin_box._core.sidecars import write_text_atomic
from mushin_box._results.series import SeriesFileError
from mushin_box.cli.main import UsageError, add_switches
from mushin_box.cli.tables import resolve_sweep

HELP = (
    "write one self-contained HTML page of a sweep: table, curves, errors, provenance, "
    "and a diff against another run"
)
EXAMPLES = (
    "mushin-box report multirun/2026-01-31_12-00-00 --best val_loss@min",
    "mushin-box report multirun/2026-01-31_12-00-00 --against multirun/2026-02-07_09-30-00 "
    "-o report.html",
)
EXITS = {0: "written"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        metavar="DIR",
        nargs="?",
        help="the sweep directory (default: the latest sweep under the current directory)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write the page (default: report.html in the sweep directory; '-' "
        "for stdout)",
    )
    parser.add_argument(
        "--against",
        metavar="OTHER",
        help="draw this other sweep's curves (dashed) on the same plots, and add the "
        "reproducibility diff against it",
    )
    parser.add_argument(
        "--best",
        metavar="METRIC",
        help="mark the cell with the lowest METRIC and draw it bold (METRIC:max: the "
        "highest; METRIC@min / METRIC@max: over the epochs of its series), as for `show`",
    )
    parser.add_argument("--sort", metavar="METRIC", help="order the cells, as for `show`")
    parser.add_argument(
        "--where",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="only these cells, as for `show` (with --against: in both sweeps, and in the diff)",
    )
    parser.add_argument(
        "--rows",
        metavar="N",
        type=_count,
        help="show at most N cells in the table (the best by --best, else the first); every "
        "cell is in a CSV file inside the page (default: 500)",
    )
    parser.add_argument(
        "--curves",
        metavar="N",
        type=_count,
        help="past N cells with series, draw the N best as lines and the others as one "
        "band from their lowest to highest value (default: 20)",
    )
    add_switches(
        parser,
        {
            "--force": "write -o FILE even inside a cell directory, or over a file that is not an "
            "earlier report",
            "--full-diff": "keep the diff's rows that differ between any two runs (times, pid, "
            "host)",
        },
    )


def _count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 1; give e.g. 50")
    return int(text)


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.report import render_report

    root = resolve_sweep(args.dir)
    if args.output is None:
        args.output = str(root / "report.html")
    if args.output != "-" and not args.force:
        _check_output(args.output)
    try:
        text = render_report(
            root,
            against=args.against,
            best=args.best,
            sort=args.sort,
            where=args.where,
            brief=not args.full_diff,
            **{k: v for k in ("rows", "curves") if (v := getattr(args, k)) is not None},
        )
    except SeriesFileError as exc:  # a corrupt series file: its reader names it
        raise UsageError(" ".join(exc.detail.split())) from None
    except MushinBoxError:  # said by main, in one place
        raise
    except ValueError as exc:  # a sidecar the page reads is corrupt: its reader names it
        raise UsageError(" ".join(str(exc).split())) from None
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    try:
        write_text_atomic(args.output, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output} ({exc}); choose another -o FILE") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _check_output(output: str) -> None:
    """Refuse ``-o`` inside what a run produced, or over a file that is not a report."""

    from mushin_box._results.markup import is_page

    path = os.path.abspath(output)
    parent = Path(os.path.realpath(os.path.dirname(path)))  # a symlinked directory: its target
    way_out = "write the report elsewhere (-o report.html), or pass --force"
    for directory in (parent, *parent.parents):
        if (directory / STATUS_FILE).is_file():
            raise UsageError(
                f"-o {output} is inside the cell directory {directory}, which holds what a "
                f"run produced; {way_out}"
            )
        if directory != parent and (directory / MANIFEST_FILE).is_file():
            raise UsageError(
                f"-o {output} is under the sweep directory {directory}, where its runs "
                f"write; {way_out}"
            )
    if not os.path.lexists(path):
        return
    try:
        with open(path, "rb") as file:
            head = file.read(4096) if os.path.isfile(path) and not os.path.islink(path) else b""
    except OSError:
        head = b""
    if not is_page(head):
        what = "is a directory" if os.path.isdir(path) else "is not a report mushin-box wrote"
        raise UsageError(
            f"-o {output} exists and {what}; choose another -o FILE, or pass --force to replace it"
        )
