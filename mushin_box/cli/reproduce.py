# SPDX-License-Identifier: MIT
"""``mushin-box reproduce CELL``: re-run a completed cell from its sidecars, then diff.

Presentation only; the work is :func:`mushin_box._reproduce.rerun.reproduce`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from mushin_box.cli.main import add_switches, add_tolerance_arguments
from mushin_box.cli.output import JSON_HELP, print_json

HELP = (
    "re-run a completed cell from its provenance (config, seed, code, image, topology) and "
    "diff it against the original; exit 0 when reproduced, 1 when something differs"
)
EXAMPLES = (
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --dry-run",
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --local --into rerun",
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --nodes 1 --gpus 1 "
    "--atol 1e-6",
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --image "
    "/shared/train.sif --json",
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --rebuild-image",
    "mushin-box reproduce multirun/2026-01-31_12-00-00/module.lr=0.1 --worktree",
)
EXITS = {
    0: "reproduced (--dry-run: reviewed)",
    1: "not reproduced: the re-run failed, or a field or metric differs, or the image's "
    "rebuild failed",
}
_MAX_VALUE = 60
#: the flags that pass to the re-run as they are
_PASSED = "into nodes gpus image local atol rtol allow_dirty dry_run rebuild_image worktree".split()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cell", metavar="CELL", help="a completed cell directory of a sweep")
    parser.add_argument(
        "--into",
        metavar="DIR",
        help="the new sweep directory of the re-run (default: multirun/<time>-reproduce)",
    )
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes (default: the recorded)")
    parser.add_argument(
        "--gpus", type=int, metavar="G", help="GPUs = ranks per node (default: the recorded)"
    )
    parser.add_argument(
        "--image", metavar="SIF", help="the image to run in; its sha256 must be the recorded one"
    )
    add_switches(
        parser,
        {
            "--rebuild-image": "rebuild the image from the recipe the cell's record holds (a "
            "native build, at the recorded commit) and run in it if its sha256 is the recorded one",
            "--local": "run here, whatever launcher the cell ran with",
        },
    )
    add_tolerance_arguments(parser)
    add_switches(
        parser,
        {
            "--worktree": "run the cell's own code (its commit, and the uncommitted code its sweep "
            "kept) from a git worktree in the re-run's sweep, leaving the tree here as it is",
            "--allow-dirty": "run although the code differs from the cell's (recorded in the "
            "re-run)",
            "--dry-run": "print what would run; run and write nothing",
            "--json": JSON_HELP,
        },
    )


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _print_plan(plan: Any) -> None:
    launch = plan.launch
    print(f"cell      {plan.cell}")
    print(f"into      {plan.into}")
    print(f"task      {plan.task}" + (f"  (pre_call {plan.pre_call})" if plan.pre_call else ""))
    swept = " ".join(f"{k}={_short(v)}" for k, v in plan.combo.items()) or "(none)"
    print(f"swept     {swept}   seed base {_short(plan.seed_base)}")
    rn, rg = plan.recorded_topology
    changed = "" if (rn, rg) == (plan.nodes, plan.gpus) else f"  (recorded {rn} x {rg})"
    print(f"topology  {plan.nodes} node(s) x {plan.gpus} rank(s){changed}")
    launcher = launch.get("launcher") or "basic (in-process)"
    print(f"launcher  {launch.get('mode')}: {launcher}  (recorded {plan.recorded_launcher})")
    image = plan.image
    if image.path is None:
        print("image     none (the cell ran in no image)")
    else:
        print(f"image     {image.path}  sha256 {image.sha256}  (matches the record)")
        binds = " ".join(f"--bind {b}" for b in image.binds) or "no --bind"
        print(f"          {binds}, --image-python {image.python}  (as recorded)")
    if plan.env_file is not None:
        print(f"env file  {plan.env_file['path']}  (every rank reads it; secrets redacted)")
        for line in plan.env_file["text"].splitlines():
            print(f"          {line}")
    code = plan.code
    if code.same:
        git = code.current.get("git") or {}
        at = f"commit {git.get('commit')}, " if git else ""
        print(f"code      same: {at}fingerprint {code.current.get('task_sha256')}")
        if plan.worktree:
            print(f"          (checked out in a git worktree at {plan.worktree})")
        for moved in code.moved:  # another checkout, the experiment's files unchanged
            print(f"          ({moved}; the files the experiment imports are the cell's)")
    else:
        print("code      DIFFERS (--allow-dirty: recorded):")
        for problem in code.problems:
            print(f"          - {problem}")
    if plan.secrets:
        print(f"env       reads {', '.join(plan.secrets)} (set; values not shown)")
    print(f"command   Workflow({plan.task}).run(", end="")
    parts = [f"working_dir={plan.into!r}", f"launcher={launch.get('launcher')!r}"]
    if launch.get("launcher_config"):
        parts.append(f"launcher_config={json.dumps(launch['launcher_config'], default=str)}")
    parts.append(f"overrides={list(launch.get('overrides') or [])!r}")
    parts += [f"{k}=multirun([{_short(v)}])" for k, v in plan.combo.items()]
    print(", ".join(parts) + ")")
    print("config:")
    from omegaconf import OmegaConf

    for line in OmegaConf.to_yaml(OmegaConf.create(dict(plan.config))).splitlines():
        print(f"  {line}")


def _print_result(result: Any) -> None:
    if result.rebuilt_image is not None:
        print(f"image     rebuilt at {result.rebuilt_image} (the recorded sha256)")
    print(f"re-run    {result.cell_dir}")
    if result.plan.worktree:
        print(f"code      the cell's, from a git worktree at {result.plan.worktree}")
    for moved in result.plan.code.moved:  # another checkout, the experiment's files unchanged
        print(f"code      the cell's ({moved}; the files the experiment imports are the cell's)")
    diff = result.diff
    if diff is not None:
        print(diff.verdict())  # the words `mushin-box diff` starts with, by the same rule
        breaks = diff.breaks
        print(f"Breaks reproducibility: {len(breaks) or 'nothing'}")
        for f in breaks:
            print(f"  {f.path}: {_short(f.a)} -> {_short(f.b)}")
        print(f"Expected to differ: {len(diff.expected)} field(s) (`mushin-box diff` lists them)")
        metrics = [m for c in diff.cells for m in c.metrics]
        if metrics:
            print(f"Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})")
            for m in metrics:
                mark = "match" if m.match else "DIFFER"
                print(f"  {m.name}: {_short(m.a)} -> {_short(m.b)}  {mark}")
    if result.error:
        print(result.error)
    if result.ok:
        print("reproduced")
    else:
        what = []
        if result.error:
            what.append("the re-run did not complete")
        if diff is not None and not diff.reproducible:
            what.append("the reproducibility parts differ")
        if diff is not None and not diff.metrics_match:
            what.append("metrics differ beyond --atol/--rtol")
        print("not reproduced: " + ("; ".join(what) or "no comparison"))


def run(args: argparse.Namespace) -> int:
    from mushin_box._image.native import BuildError
    from mushin_box._reproduce.rerun import reproduce

    # --json: stdout holds the JSON only (Hydra's launcher logs to stdout: sent to stderr)
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with quiet:
            result = reproduce(
                args.cell,
                progress=not args.json and sys.stderr.isatty(),
                **{k: getattr(args, k) for k in _PASSED},
            )
    except BuildError as exc:  # exit 1, as `mushin-box build`'s failed build
        print(f"mushin-box reproduce: error: the image's rebuild failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result.to_dict())
    elif args.dry_run:
        _print_plan(result.plan)
    else:
        _print_result(result)
    return 0 if args.dry_run or result.ok else 1
