# SPDX-License-Identifier: MIT
"""``mushin-box report DIR [--against OTHER] -o report.html``: a sweep as one HTML file.

Presentation only; the page is :func:`mushin_box._results.report.render_report`: the sweep
table, the curves (inline SVG), the errors, the provenance summary and, with ``--against``,
the reproducibility diff. It is self-contained: it loads nothing from the network, so it
can be mailed or opened offline. Exit codes: 0 written, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from mushin_box.cli.main import UsageError

__all__ = ["EXAMPLES", "HELP", "add_arguments", "run"]

HELP = (
    "write one self-contained HTML page of a sweep: table, curves, errors, provenance, "
    "and a diff against another run"
)
EXAMPLES = (
    "mushin-box report runs/a --best val_loss -o report.html",
    "mushin-box report runs/a --against runs/b -o report.html",
)


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
        default="report.html",
        help="where to write the page (default: report.html; '-' for stdout)",
    )
    parser.add_argument(
        "--against",
        metavar="OTHER",
        help="add the reproducibility diff against this other sweep",
    )
    parser.add_argument(
        "--best",
        metavar="METRIC",
        help="mark the cell with the lowest METRIC (METRIC:max: the highest)",
    )
    parser.add_argument("--sort", metavar="METRIC", help="order the cells, as for `show`")
    parser.add_argument(
        "--where",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="only these cells, as for `show`",
    )
    parser.add_argument(
        "--full-diff",
        action="store_true",
        help="keep the diff's rows that differ between any two runs (times, pid, host)",
    )


def run(args: argparse.Namespace) -> int:
    from mushin_box._results.diff import DiffInputError
    from mushin_box._results.report import render_report
    from mushin_box._results.table import ResultsError
    from mushin_box.cli.tables import resolve_sweep

    root = resolve_sweep(args.dir)
    try:
        text = render_report(
            root,
            against=args.against,
            best=args.best,
            sort=args.sort,
            where=args.where,
            brief=not args.full_diff,
        )
    except (ResultsError, DiffInputError) as exc:
        raise UsageError(str(exc)) from None
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    from mushin_box._core.sidecars import write_text_atomic

    try:
        write_text_atomic(args.output, text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output} ({exc}); choose another -o FILE") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
