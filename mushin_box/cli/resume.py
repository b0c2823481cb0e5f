# SPDX-License-Identifier: MIT
"""``mushin-box resume DIR [CELL...]``: run a sweep again as it was launched: ``launch``'s
own run, with ``--resume`` and the recorded experiment, overrides, flags and profile (from
the directory the launch ran in, where its profiles and relative paths are).

Before the launch imports anything, the code is vouched for: the record's experiment must
be the file the cells ran, and every file the run would import must be the user's own
(:func:`~mushin_box._reproduce.trust.check_sources`, reading without running; changed code
is no refusal, its cells run again).
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import warnings
from pathlib import Path

from mushin_box.cli import launch
from mushin_box.cli.main import UsageError, add_scheduler_arguments, add_switches, parse_args
from mushin_box.cli.tables import resolve_sweep

HELP = (
    "run a sweep again as it was launched (experiment, overrides, flags, profile): completed "
    "cells are reused, stopped ones continue from their checkpoints; name CELLs to resume "
    "only those"
)
EXAMPLES = (
    "mushin-box resume multirun/2026-01-31_12-00-00",
    "mushin-box resume multirun/2026-01-31_12-00-00 --dry-run   # what each cell would do",
    "mushin-box resume multirun/2026-01-31_12-00-00 module.lr=0.1 --detach   # one cell",
    "mushin-box resume multirun/2026-01-31_12-00-00 --time 4:00:00 --account proj42",
    "mushin-box resume multirun/2026-01-31_12-00-00 --set trainer.max_epochs=900   # train on",
)
EXITS = launch.EXITS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the sweep directory")
    parser.add_argument(
        "cells",
        metavar="CELL",
        nargs="*",
        help="cell directory names, or the values of a cell that never started as `cancel` "
        "prints them (default: every cell that did not complete)",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change an override of the recorded launch (repeatable); a changed override "
        "runs every cell again from the start, except a Trainer's max_epochs, max_steps or "
        "max_time alone: each cell then trains on from its checkpoint",
    )
    add_switches(
        parser,
        {
            "--restart": "allow a change that starts a stopped cell again from scratch, setting "
            "its checkpoint aside",
            "--dry-run": "show what each cell would do (reuse, continue from checkpoint, restart) "
            "and the GPU-hours of only the cells that run; submit nothing",
            "--json": "with --dry-run: print it as JSON",
            "--detach": "SLURM: submit and exit 0",
            "--no-progress": "no progress bar",
            "--cancel-on-interrupt": "SLURM: Ctrl-C cancels the jobs",
        },
    )
    add_scheduler_arguments(parser, "SLURM job (these flags win over the recorded launch's)")


#: the exit status of a process a SIGTERM ended (128 + its number)
_SIGTERM_EXIT = 128 + signal.SIGTERM
#: resume's own flags that pass to the launch as they are
_PASSED = ("dry_run", "json", "detach", "no_progress", "cancel_on_interrupt")


def run(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from mushin_box._launch.options import SCHEDULER_FLAGS
    from mushin_box._launch.resume import (
        grid_kept,
        launch_argv,
        narrow_overrides,
        plan_cells,
        read_resume_record,
        resume_settings,
    )
    from mushin_box._reproduce import checks, trust

    if args.json and not args.dry_run:
        raise UsageError("--json prints the dry run's review: add --dry-run")
    if args.cells and args.set:
        raise UsageError(
            "--set changes the config of every cell, and CELLs resume only some: resume the "
            "whole sweep with --set, or name cells without it"
        )
    root = str(resolve_sweep(args.dir).resolve())
    try:
        record, ran = read_resume_record(root)
        if ran is not None:  # reproduce's check of what the run would import, unimported;
            original = checks.read_original(Path(root, ran[0]))  # a changed file reruns
            trust.check_sources(original, OmegaConf.create(original.config), allow_dirty=True)
        changes = {k: getattr(args, k, None) for k in SCHEDULER_FLAGS}
        overrides, flags, changed = resume_settings(record, changes, args.set or [])
        full = list(overrides)
        if args.cells:  # the engine's decision needs no code here: which cells run
            actions = plan_cells(root, args.cells, changed=changed, restart=True)
            if not any(a.runs for a in actions):
                named = {c.rstrip("/").rsplit("/", 1)[-1] for c in args.cells}
                done = ", ".join(a.name for a in actions if a.name in named)
                print(f"nothing to run: {done} completed (mushin-box status {root})")
                return 0
            overrides = narrow_overrides(overrides, actions)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc}") from None
    cwd = record["cwd"]
    if not Path(cwd).is_dir():
        raise UsageError(
            f"the launch ran in {cwd}, which is gone: its profiles and relative paths were "
            "there; recreate it, or resume with `mushin-box launch ... --resume`"
        )
    argv = ["launch", record["experiment"], *overrides, *launch_argv(flags)]
    argv += ["--working-dir", root, "--resume"]
    ns = parse_args([*argv, *(f"--{k.replace('_', '-')}" for k in _PASSED if getattr(args, k))])
    ns.cells, ns.changed, ns.restart = tuple(args.cells), changed, args.restart
    ns.record_overrides = full  # a resume of named cells records the whole sweep's launch
    # the launch's profiles and relative paths are found from where it ran
    with contextlib.chdir(cwd), grid_kept(root, bool(args.cells) and not args.dry_run):
        try:
            with warnings.catch_warnings():
                if args.cells:  # the narrowed grid is on purpose: not "the grid changed"
                    warnings.filterwarnings("ignore", message="resume: the grid changed")
                return launch.run(ns)
        except SystemExit as exc:  # a cell's SIGTERM ends the launch that runs it here
            if exc.code == _SIGTERM_EXIT:
                print(
                    f"mushin-box resume: stopped by SIGTERM (a `mushin-box cancel`, or the "
                    f"system); `mushin-box status {shlex.quote(root)}` shows what ran, and a "
                    "resume runs the rest",
                    file=sys.stderr,
                )
            raise
