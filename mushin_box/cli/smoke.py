# SPDX-License-Identifier: MIT
"""``mushin-box smoke``: the CI smoke run (presentation only; logic in ``_container.smoke``)."""

from __future__ import annotations

import argparse

from mushin_box.cli.main import number

HELP = (
    "A tiny 2-rank CPU fit of an experiment inside the image, through the same rank wrapper "
    "as SLURM ranks (the CI smoke run)."
)
EXAMPLES = ("mushin-box smoke examples/exp.py --image image.sif",)
EXITS = {0: "the smoke run passed", 1: "it failed"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "experiment",
        nargs="?",
        help="exp.py[:Config] or module:attr naming a hydra-zen config with trainer/module"
        "/datamodule nodes (default: mushin-box's tiny model)",
    )
    parser.add_argument("--image", required=True, help="the .sif built by `mushin-box build`")
    parser.add_argument("--out", help="output directory (default: a temp dir)")
    parser.add_argument("--python", default="python", help="the image's python command")
    parser.add_argument(
        "--timeout",
        type=number(minimum=0, inclusive=False, maximum=7 * 86400, unit="seconds"),
        default=600.0,
        help="seconds (default 600)",
    )


def run(args: argparse.Namespace) -> int:
    from mushin_box._container.smoke import run_smoke

    result = run_smoke(
        args.image,
        experiment=args.experiment,
        out_dir=args.out,  # None: a temporary directory, made only once the checks pass
        python=args.python,
        timeout_s=args.timeout,
    )
    print(f"[mushin-box smoke] {'PASS' if result.ok else 'FAIL'}: {result.message}")
    return 0 if result.ok else 1
