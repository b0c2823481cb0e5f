# SPDX-License-Identifier: MIT
"""``mushin-box launch``: parsing and presentation (logic in ``mushin_box._launch.plan``).

Order matters for speed: the flags, the profile and where the launch runs (the SLURM
probe) are settled before the experiment is imported, so a contradiction such as
``--nodes 2 --local`` is refused in a fraction of a second, not after torch has loaded.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
import warnings
from typing import Any

from mushin_box._core.errors import CellWarning
from mushin_box._core.layout import default_sweep_dir
from mushin_box._slurm.jobs import name_job_ids
from mushin_box._slurm.submitted import read_submission
from mushin_box.cli.main import (
    UsageError,
    add_scheduler_arguments,
    add_switches,
    non_negative,
    positive,
)
from mushin_box.cli.output import print_json
from mushin_box.cli.tables import end_report

HELP = (
    "Run an experiment on NODES x GPUS ranks: one SLURM task per GPU (through submitit, "
    "optionally every rank in an Apptainer image), or here on CPU ranks when no SLURM "
    "cluster answers. Extra KEY=VALUE arguments are Hydra overrides (lr=0.1,0.01 sweeps)."
)
EXAMPLES = (
    "mushin-box launch examples/exp.py --gpus 2 --local module.lr=0.01,0.1",
    "mushin-box launch examples/exp.py --nodes 2 --gpus 4 --profile gpu --dry-run",
    "mushin-box launch examples/exp.py --gpus 2 --local --print-config module.lr=0.01,0.1",
    "mushin-box launch examples/exp.py --nodes 2 --gpus 4 --partition gpu --time 2:00:00 "
    "--mem 64G trainer.accelerator=gpu",
    "mushin-box launch examples/exp.py --nodes 2 --gpus 4 --image /shared/train.sif --detach",
)
EXITS = {
    0: "every cell completed (--detach, --dry-run: submitted, reviewed)",
    1: "a cell failed, timed out, was cancelled or skipped",
    130: "interrupted (Ctrl-C)",
}


def _nodes(text: str) -> tuple[int, int]:
    """``--nodes N`` or ``MIN:MAX`` (torchrun's elastic membership) as (MIN, MAX)."""
    from mushin_box._slurm.torchrun import parse_nnodes

    if ":" not in text:
        return positive(text), positive(text)
    try:
        return parse_nnodes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "experiment",
        help="exp.py[:NAME] or package.module:NAME: a Workflow, or a hydra-zen config with "
        "trainer/module/datamodule nodes (default NAME: workflow, then Config)",
    )
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides")
    parser.add_argument(
        "--nodes",
        type=_nodes,
        default=(1, 1),
        metavar="N|MIN:MAX",
        help="nodes (default 1); MIN:MAX with --torchrun: elastic membership",
    )
    parser.add_argument(
        "--gpus", type=positive, default=1, help="GPUs = ranks per node (default 1)"
    )
    add_switches(
        parser.add_mutually_exclusive_group(),
        {
            "--local": "run here on CPU ranks even if SLURM is reachable",
            "--slurm": "submit to SLURM without asking the controller first (default: SLURM "
            "only when `scontrol ping` answers within 5 s)",
        },
    )
    add_switches(
        parser,
        {
            "--torchrun": "run each cell's ranks as torchrun workers: here one `torchrun "
            "--standalone` agent of GPUS workers (CPU ranks with gloo where there is no GPU); "
            "on SLURM one task per node holding its GPUs, whose torchrun agent starts GPUS "
            "workers (c10d rendezvous on the job's first node; see docs/elastic.md)"
        },
    )
    parser.add_argument(
        "--max-restarts",
        type=non_negative,
        metavar="K",
        help="with --torchrun: restart the workers up to K times when one dies; they "
        "continue from the cell's last.ckpt (default 0)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="launch settings from [tool.mushin-box.profiles.NAME] in pyproject.toml (or "
        "[profiles.NAME] in mushin-box.toml); default: the profile named default, if any",
    )
    parser.add_argument("--image", help="run every SLURM rank in this .sif (mushin-box build)")
    parser.add_argument(
        "--bind",
        action="append",
        metavar="SRC[:DST[:ro]]",
        help="bind into the image (repeatable; added to the profile's)",
    )
    parser.add_argument(
        "--image-python",
        metavar="COMMAND",
        help="the Python command inside the image (default: python)",
    )
    add_scheduler_arguments(parser, "SLURM job (flags win over the profile)")
    parser.add_argument("--working-dir", help="the sweep directory (default multirun/<time>)")
    add_switches(
        parser,
        {
            "--resume": "reuse completed cells of --working-dir",
            "--reuse-stale-code": "with --resume: reuse completed cells even though their code "
            "changed since",
        },
    )
    parser.add_argument(
        "--on-error",
        choices=("raise", "nan"),
        default="nan",
        help="a failed cell stops the sweep (raise) or is recorded (nan, the default)",
    )
    add_switches(
        parser,
        {
            "--dry-run": "review the launch (cells, GPU-hours, sbatch script, rank env file, "
            "warnings; the image's pre-flight runs); submit nothing. Exit 2 where the launch "
            "would fail",
            "--json": "with --dry-run: print it as JSON (strict: a number that is not finite is "
            'the string "nan", "inf" or "-inf")',
            "--verbose": "with --dry-run: show the whole sbatch script, the requeue trap that the "
            "review folds to one line included",
            "--print-config": "print the config the first cell's task would receive, as YAML "
            "(overrides applied, secrets as ${oc.env:...} references, unresolved); submit and "
            "write nothing",
            "--no-progress": "no progress bar",
            "--detach": "SLURM: submit, print the sweep directory and job ids, and exit 0; follow "
            "with `mushin-box status/logs/wait DIR`, stop with `mushin-box cancel DIR`",
            "--cancel-on-interrupt": "SLURM: Ctrl-C cancels the jobs (default: they keep "
            "running, and the launch says how to reattach and how to cancel)",
        },
    )


def _check_flags(args: argparse.Namespace) -> None:
    if args.print_config:
        flags = ("--dry-run", "--json", "--detach", "--cancel-on-interrupt")
        given = [f for f in flags if getattr(args, f[2:].replace("-", "_"))]
        if given:
            raise UsageError(
                f"--print-config only prints the first cell's config, it reviews and runs "
                f"nothing: drop {given[0]} (or --print-config)"
            )
    if args.min_nodes != args.nodes and not args.torchrun:
        raise UsageError(
            f"--nodes {args.min_nodes}:{args.nodes} is torchrun's elastic membership: add "
            f"--torchrun, or give one node count (--nodes {args.nodes})"
        )
    if args.max_restarts is not None and not args.torchrun:
        raise UsageError("--max-restarts sets torchrun's restarts: add --torchrun")
    if args.json and not args.dry_run:
        raise UsageError("--json prints the dry run's review: add --dry-run")
    if args.verbose and not args.dry_run:
        raise UsageError("--verbose shows the whole dry run: add --dry-run")
    if args.reuse_stale_code and not args.resume:
        raise UsageError("--reuse-stale-code reuses completed cells: add --resume")
    if args.resume and args.working_dir is None:
        raise UsageError("--resume needs --working-dir, the sweep directory to resume")


def run(args: argparse.Namespace) -> int:
    from mushin_box._launch.options import check_where, experiment_name, resolve_options

    started = time.monotonic()
    args.min_nodes, args.nodes = args.nodes  # --nodes N or MIN:MAX
    _check_flags(args)
    # flags, profile and place, before the experiment (and torch) is imported; the image
    # relative to where the command runs (submitit_slurm_config wants an absolute one)
    image = os.path.abspath(args.image) if args.image else None
    name = experiment_name(args.experiment)
    opts = resolve_options({**vars(args), "image": image}, args.profile, default_name=name)
    # where: --local, --slurm, or the SLURM probe's answer
    local, why = args.local, "--local" if args.local else "--slurm"
    if args.slurm and shutil.which("sbatch") is None:
        raise UsageError("--slurm: there is no sbatch on PATH; load SLURM's client, or run here")
    if not (args.local or args.slurm):
        from mushin_box._slurm.probe import probe_slurm

        probe = probe_slurm()
        local, why = not probe.reachable, probe.reason
        if local:
            why = f"no SLURM cluster reachable: {probe.reason}; --slurm to submit anyway"
    if args.detach and local and not args.local:  # the probe's answer, not --local's
        raise UsageError(
            f"--detach submits to SLURM, and no SLURM controller answered ({why}); "
            "check that the controller is up and SLURM_CONF names its config, or drop "
            "--detach to run here"
        )
    check_where(
        opts,
        local=local,
        why=why,
        nodes=args.nodes,
        image_flag=args.image is not None,
        detach=args.detach,
    )
    if args.working_dir is None:
        # chosen here rather than by Workflow.run, so that it is printed before anything runs
        # (and shown by --dry-run); the same default: multirun/<timestamp>
        args.working_dir = str(default_sweep_dir())
    args.working_dir = os.path.abspath(args.working_dir)

    from mushin_box._container.preflight import PreflightError
    from mushin_box._launch.loading import experiment_file, load_target
    from mushin_box._launch.plan import plan_launch
    from mushin_box._launch.resume import resume_actions, review_resume
    from mushin_box._launch.review import ask_cluster, count_cells, review_plan

    preflight_error: str | None = None
    target, pythonpath = load_target(args.experiment)
    kwargs: dict[str, Any] = dict(
        nodes=args.nodes,
        gpus=args.gpus,
        overrides=args.overrides,
        local=local,
        where=why,
        slurm=opts.slurm,
        working_dir=args.working_dir,
        pythonpath=pythonpath,
    )
    if args.torchrun:
        kwargs.update(torchrun=True, max_restarts=args.max_restarts or 0, min_nodes=args.min_nodes)
    if not local:
        kwargs.update(image=opts.image, binds=opts.binds, image_python=opts.image_python)
    if args.print_config:  # the config only: the image's pre-flight is the dry run's
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        from mushin_box._launch.plan import config_of, hydra_error_line
        from mushin_box._launch.printconfig import first_cell_config

        plan = plan_launch(target, **kwargs, preflight=False)
        try:
            text = first_cell_config(target, plan.overrides)
        except Exception as exc:  # what Hydra refuses, as the dry run reports it
            hydra = isinstance(exc, HydraException | OmegaConfBaseException)
            if isinstance(exc, ValueError) and not hydra:  # a sweep over a secret
                raise UsageError(str(exc)) from None
            raise UsageError(hydra_error_line(exc, plan.overrides, config_of(target))) from None
        cells, _ = count_cells(plan.overrides)
        where = "on SLURM" if plan.mode == "slurm" else "here"
        print(
            f"[mushin-box launch] the first of {cells if cells is not None else '?'} cell(s), "
            f"as its task would receive it {where} ({plan.where}); nothing submitted",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.write(text)
        return 0
    try:
        plan = plan_launch(target, **kwargs)
    except PreflightError as exc:
        if not args.dry_run:
            raise
        preflight_error = str(exc)  # the review shows the rest of the plan, then this
        plan = plan_launch(target, **kwargs, preflight=False)
    answer = ask_cluster(plan, count_cells(plan.overrides)[0])  # before anything is written
    refused: str | None = answer["refusal"] if answer else None
    # what a resume does per cell; `mushin-box resume` sets cells, changed and restart
    actions = None
    if args.resume:
        actions = resume_actions(
            args.working_dir,
            target,
            experiment_file(args.experiment),
            args.overrides,
            cells=getattr(args, "cells", ()),
            changed=getattr(args, "changed", None),
            restart=getattr(args, "restart", True),
        )
    if not args.dry_run:
        if refused:
            raise UsageError(refused)
        return _launch(args, target, plan)
    review = review_plan(plan, target, errors=[e for e in (preflight_error, refused) if e])
    review["experiment"] = args.experiment
    if answer is not None:  # a passed check and a skipped one must not look the same
        review["cluster_check"] = {"accepted": answer["accepted"], "said": answer["said"]}
    if actions is not None:
        review_resume(review, plan, actions)
    review["seconds"] = round(time.monotonic() - started, 2)
    if args.json:
        print_json(review)
    else:
        print(format_review(review, verbose=args.verbose))
    for error in review["errors"]:
        print(f"mushin-box launch: error: {error}", file=sys.stderr)
    return 2 if review["errors"] else 0


def format_review(review: dict[str, Any], *, verbose: bool = False) -> str:
    """The dry run's review as text (``--json`` prints the same data as JSON)."""
    from mushin_box._launch.review import fold_requeue_trap

    slurm = review["mode"] == "slurm"
    lines = [f"mushin-box launch {review['experiment']}: dry run, nothing submitted"]

    def row(name: str, value: Any) -> None:
        lines.append(f"  {name:<12}{value}")

    if slurm:
        row("runs on", f"SLURM ({review['where']})")
        ranks = f"{review['nodes']} node(s) x {review['gpus']} GPU(s) = {review['ranks']}"
        agents = (review.get("launcher_config") or {}).get("torchrun")
        each = "one torchrun agent per node" if agents else "one task per GPU"
        row("ranks", f"{ranks} ranks per cell, {each}")
    else:
        row("runs here", f"{review['gpus']} CPU rank(s) ({review['where']})")
    row("sweep dir", review["working_dir"])
    axes = ", ".join(f"{k}: {n}" for k, n in review["sweep"].items())
    cells = review["cells"] if review["cells"] is not None else "? (an interval sweep)"
    row("cells", f"{cells}{f' ({axes})' if axes else ''}")
    if slurm:
        hours = review["gpu_hours"]
        shown = "?" if hours is None else f"{hours:g}"
        row("GPU-hours", f"at most {shown} = {review['gpu_hours_formula']}")
        if review.get("arrays"):
            row("arrays", review["arrays"])
        check = review.get("cluster_check")
        if check is not None:
            verdict = {True: "accepted", False: "refused"}.get(check["accepted"], "not asked")
            row("cluster", f"sbatch --test-only: {verdict}: {check['said']}")
        config = review["launcher_config"]
        sources = review["sources"]
        skip = ("python", "setup", "srun_args", "nodes", "tasks_per_node", "gpus_per_node")
        lines.append("  settings")
        for key in sorted(k for k in config if k not in skip):
            sbatch = key == "additional_parameters"  # a line per sbatch option
            for option, value in config[key].items() if sbatch else [(key, config[key])]:
                src = sources.get(f"{key}.{option}" if sbatch else key, "")
                said = f"sbatch --{option}={value}" if sbatch else f"{key} = {value}"
                lines.append(f"    {said}" + (f"   ({src})" if src else ""))
        for key in ("image", "binds", "image_python"):
            if key in sources:
                lines.append(f"    {key}   ({sources[key]})")
    shown = [shlex.quote(o) if any(c.isspace() for c in o) else o for o in review["overrides"]]
    row("overrides", " ".join(shown) or "none")
    if "resume" in review:
        row("resume", f"{review['cells_to_run']} of {len(review['resume'])} cell(s) run")
        width = max((len(c["cell"]) for c in review["resume"]), default=0)
        for c in review["resume"]:
            what = {"continue": "continue from checkpoint", "live": "left alone (live)"}
            action = what.get(c["action"], c["action"])
            lines.append(f"    {c['cell']:<{width}}  {c['state']:<9}  {action}: {c['why']}")
    lines += [f"  warning: {warning}" for warning in review["warnings"]]
    if slurm and review.get("cells_to_run") == 0:  # a finished sweep's resume
        lines.append("  nothing to submit: no cell runs, so there is no sbatch script")
    elif slurm:
        lines.append("")
        what = "script of each cell's job" if (review["cells"] or 0) <= 1 else "job array"
        what += " (the first)" if review.get("arrays") else ""
        lines.append(f"--- the sbatch {what} (what submitit will submit)")
        script = review["sbatch"].rstrip()
        lines.append(script if verbose else fold_requeue_trap(script))
        env = review.get("env_file")
        if env is not None:
            lines += ["", f"--- the env file every rank reads: {env['path']}", env["text"].rstrip()]
    lines += ["", f"(reviewed in {review['seconds']:g} s)"]
    return "\n".join(lines)


def _launch(args: argparse.Namespace, target: Any, plan: Any) -> int:
    from mushin_box._launch.loading import dirty_tree, experiment_file
    from mushin_box._launch.record import FLAG_TYPES, launch_record
    from mushin_box._launch.run import run_launch

    where = (
        f"SLURM, {plan.nodes} node(s) x {plan.gpus} rank(s) ({plan.where})"
        if plan.mode == "slurm"
        else f"here, {plan.gpus} torchrun worker(s) ({plan.where})"
        if plan.torchrun
        else f"here, {plan.gpus} CPU rank(s) ({plan.where})"
    )
    print(f"[mushin-box launch] {args.experiment} on {where}", file=sys.stderr, flush=True)
    root = args.working_dir
    print(f"[mushin-box launch] sweep: {root}", flush=True)
    source = experiment_file(args.experiment)
    dirty = dirty_tree(source, target)
    if dirty:
        print(f"[mushin-box launch] {dirty}", file=sys.stderr, flush=True)
    before = read_submission(root)  # to tell a new submission from it
    # what `mushin-box resume DIR` replays (a resume of some cells: the whole sweep's launch)
    overrides = getattr(args, "record_overrides", None) or args.overrides
    flags = {k: getattr(args, k, None) for k in FLAG_TYPES}
    record = launch_record(args.experiment, overrides, flags, cwd=os.getcwd())
    try:
        with warnings.catch_warnings():  # the summary names each cell that did not complete
            warnings.filterwarnings("ignore", category=CellWarning)
            ds = run_launch(
                target,
                plan,
                resume=args.resume,
                on_error=args.on_error,
                progress=not args.no_progress,
                reuse_stale_code=args.reuse_stale_code,
                wait=not args.detach,
                cancel_on_interrupt=args.cancel_on_interrupt,
                source=source,
                record=record,
            )
    except KeyboardInterrupt:
        if plan.mode != "slurm" or args.cancel_on_interrupt:
            print("[mushin-box launch] interrupted; the sweep's jobs were stopped", file=sys.stderr)
            return 130
        print(
            f"[mushin-box launch] detached: the SLURM jobs keep running. Follow them with "
            f"`mushin-box wait {shlex.quote(root)}` (or status/logs), stop them with "
            f"`mushin-box cancel {shlex.quote(root)}`",
            file=sys.stderr,
        )
        return 130
    if args.detach:
        return _detached(ds, before)
    from mushin_box._sweepdir.board import read_sweep

    root = str(ds.attrs.get("working_dir"))
    return end_report(read_sweep(root), _resume_command(root))


def _detached(handle: Any, before: dict[str, Any]) -> int:
    """The sweep, its jobs and how to follow and stop them; or that nothing was submitted
    (every cell reused: the jobs file is an earlier submission's)."""
    root = shlex.quote(str(handle.working_dir))
    if read_submission(handle.working_dir) == before:
        print(f"[mushin-box launch] nothing submitted: no cell of {root} needed to run")
        print(f"  see: mushin-box status {root}")
        return 0
    jobs = handle.job_ids
    named = ": " + " ".join(jobs)
    if len(jobs) > 10:  # a big sweep: its arrays (what squeue and scancel take), not each cell
        arrays = list(dict.fromkeys(j.split("_")[0] for j in jobs))
        named = f" in {len(arrays)} array(s): {name_job_ids(arrays)}"
    print(f"[mushin-box launch] submitted {len(jobs)} job(s){named}")
    print(f"  follow: mushin-box status {root}   |  mushin-box logs {root} CELL -f")
    print(f"  wait:   mushin-box wait {root}")
    print(f"  stop:   mushin-box cancel {root}")
    return 0


def _resume_command(root: str) -> str:
    """How to resume the sweep: ``mushin-box resume DIR`` replays the recorded launch (a
    secret override's value is not recorded: it is given again, from the environment)."""
    from mushin_box._core.redact import command_line_secrets

    command = f"mushin-box resume {shlex.quote(root)}"
    secret = [a for a in sys.argv[1:] if "=" in a and command_line_secrets([a])]
    if secret:
        key = secret[0].split("=", 1)[0]
        env = key.lstrip("+~").rsplit(".", 1)[-1].upper().replace("-", "_")
        reference = shlex.quote(f"{key}=${{oc.env:{env}}}")
        command += (
            f" --set {reference}\n  (secret values are not recorded: set {env} in the "
            "environment and pass each as a reference, which also keeps it out of your shell "
            "history and the sweep's files)"
        )
    return command
