# SPDX-License-Identifier: MIT
"""``mushin-box launch``: parsing and presentation (logic in ``mushin_box._sweep.launch``)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

HELP = (
    "Run an experiment on NODES x GPUS ranks: one SLURM task per GPU (through submitit, "
    "optionally every rank in an Apptainer image), or here on CPU ranks when there is no "
    "SLURM. Extra KEY=VALUE arguments are Hydra overrides (KEY=a,b sweeps)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "experiment",
        help="exp.py[:NAME] or package.module:NAME: a Workflow, or a hydra-zen config with "
        "trainer/module/datamodule nodes (default NAME: workflow, then Config)",
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides")
    parser.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs = ranks per node (default 1)")
    parser.add_argument(
        "--local", action="store_true", help="run here on CPU ranks even if SLURM is available"
    )
    parser.add_argument("--image", help="run every SLURM rank in this .sif (mushin-box build)")
    parser.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="SRC[:DST[:ro]]",
        help="bind into the image (repeatable)",
    )
    parser.add_argument(
        "--image-python",
        default="python",
        metavar="COMMAND",
        help="the Python command inside the image (default: python)",
    )
    parser.add_argument("--partition", help="SLURM partition")
    parser.add_argument("--account", help="SLURM account")
    parser.add_argument(
        "--time",
        type=int,
        default=60,
        metavar="MINUTES",
        help="wall-time limit per job (default 60)",
    )
    parser.add_argument("--cpus-per-task", type=int, default=1, help="CPUs per rank")
    parser.add_argument("--mem-gb", type=int, help="memory per node in GB")
    parser.add_argument("--working-dir", help="the sweep directory (default multirun/<time>)")
    parser.add_argument(
        "--resume", action="store_true", help="reuse completed cells of --working-dir"
    )
    parser.add_argument(
        "--on-error",
        choices=("raise", "nan"),
        default="nan",
        help="a failed cell stops the sweep (raise) or is recorded (nan, the default)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan as JSON; submit nothing"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def _summary(ds: Any) -> tuple[list[str], int]:
    """Lines (one per cell: swept values, status, scalar metrics) and the failed count."""
    import itertools

    dims = [d for d in ds["status"].dims]
    metrics = [
        n
        for n in ds.data_vars
        if n not in ("status", "cell_dir") and ds[n].dims == ds["status"].dims
    ]
    lines, failed = [], 0
    for combo in itertools.product(*(ds[d].values.tolist() for d in dims)):
        where = dict(zip(dims, combo, strict=True))
        status = str(ds["status"].sel(where).item())
        failed += status != "completed"
        values = [f"{m}={_format(ds[m].sel(where).item())}" for m in metrics]
        cell = str(ds["cell_dir"].sel(where).item())
        lines.append(f"  {status:<9} {cell}  {' '.join(values)}")
    return lines, failed


def run(args: argparse.Namespace) -> int:
    from mushin_box._container.preflight import PreflightError
    from mushin_box._sweep.launch import LaunchError, load_target, plan_launch, run_launch
    from mushin_box.cli.main import UsageError

    slurm: dict[str, Any] = {"timeout_min": args.time, "cpus_per_task": args.cpus_per_task}
    for key in ("partition", "account", "mem_gb"):
        if getattr(args, key) is not None:
            slurm[key] = getattr(args, key)
    # relative to where the command runs (submitit_slurm_config wants an absolute image)
    image = os.path.abspath(args.image) if args.image else None
    try:
        target, pythonpath = load_target(args.experiment)
        plan = plan_launch(
            target,
            nodes=args.nodes,
            gpus=args.gpus,
            overrides=args.overrides,
            local=True if args.local else None,
            image=image,
            binds=args.bind,
            slurm=slurm,
            image_python=args.image_python,
            working_dir=args.working_dir,
            pythonpath=pythonpath,
            preflight=not args.dry_run,
        )
    except (LaunchError, PreflightError) as exc:
        raise UsageError(str(exc)) from None
    if args.dry_run:
        from mushin_box._core.secrets import SecretVault

        shown = plan.to_dict()  # a copy: the plan itself keeps the real values
        try:  # secret values never reach stdout (often a file): their references instead
            shown["overrides"] = SecretVault().hide_in_overrides(list(plan.overrides))
        except ValueError as exc:  # a sweep over a secret-looking key
            raise UsageError(str(exc)) from None
        print(json.dumps(shown, indent=2, sort_keys=True, default=str))
        return 0
    where = (
        f"SLURM, {plan.nodes} node(s) x {plan.gpus} rank(s)"
        if plan.mode == "slurm"
        else (f"here, {plan.gpus} CPU rank(s)")
    )
    print(f"[mushin-box launch] {args.experiment} on {where}", file=sys.stderr, flush=True)
    try:
        ds = run_launch(
            target, plan, resume=args.resume, on_error=args.on_error, progress=not args.no_progress
        )
    except LaunchError as exc:  # Workflow.run refused its arguments: nothing ran
        raise UsageError(str(exc)) from None
    lines, failed = _summary(ds)
    print(f"[mushin-box launch] sweep: {ds.attrs.get('working_dir')}")
    print("\n".join(lines))
    if failed:
        print(f"[mushin-box launch] {failed} cell(s) did not complete", file=sys.stderr)
    return 1 if failed else 0
