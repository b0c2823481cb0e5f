# SPDX-License-Identifier: MIT
"""The dry run of ``mushin-box launch`` as a review: what would run, what it would cost,
and the mistakes that cost the most, as plain data (printed as text or JSON); and the
cluster asked before a launch writes anything: ``sbatch --test-only`` answers for the very
script the launcher would submit, ``sinfo``'s capacity for a job that would pend for ever.
A check that cannot be asked never blocks a launch. Errors are what the real launch would
refuse (the dry run exits 2 with them); warnings the costly mistakes it would not.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from mushin_box._container.rankwrap import env_file_written, fold_env_file
from mushin_box._core.overrideparse import is_hydra_key, parse_overrides
from mushin_box._core.redact import redact_text
from mushin_box._core.secrets import SecretVault
from mushin_box._launch.plan import config_of, hydra_error_line, select_key, task_of
from mushin_box._slurm.arrays import first_array
from mushin_box._slurm.launcher import render_sbatch
from mushin_box._slurm.probe import (
    PartitionCapacity,
    account_check,
    partition_capacity,
    sbatch_test_only,
)
from mushin_box._sweep.compose import MissingValueError, check_composes, check_required

#: node-local mount points: a compute node's /tmp is not the login node's
NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/scratch/local")


_FIX = (
    "check --partition, --nodes, --gpus, --time, --account and --qos (`sinfo` lists the "
    "partitions and their nodes, `sacctmgr show associations user=$USER` your accounts)"
)


def plan_script(
    plan: Any, cells: int | None, root: str = "/tmp/mushin-box-test-only"
) -> tuple[str, str | None]:
    """The sbatch script a SLURM plan submits (of several arrays, the first), and a line
    saying how MaxArraySize splits the sweep (None: one job or one array)."""
    config = dict(plan.launcher_config or {})
    root = plan.working_dir or root
    folder = str(config.pop("submitit_folder", f"{root}/.submitit/%j"))
    folder = folder.replace("${hydra.sweep.dir}", root)
    array, split = first_array(config, cells)
    return render_sbatch(config, folder, map_count=array), split


def never_starts(nodes: int, gpus: int, capacity: PartitionCapacity | None) -> str | None:
    """Why a job of ``nodes`` x ``gpus`` GPUs per node can never start on the partition
    ``capacity`` describes, or None.

    >>> debug = PartitionCapacity("debug", 2, 4)
    >>> never_starts(3, 1, debug)
    '--nodes 3, and partition debug has 2 node(s)'
    >>> never_starts(1, 8, debug)
    '--gpus 8 per node, and the nodes of partition debug have at most 4 GPU(s)'
    >>> never_starts(2, 4, debug) is None and never_starts(9, 9, None) is None
    True
    """
    if capacity is None:
        return None
    if nodes > capacity.nodes:
        return f"--nodes {nodes}, and partition {capacity.partition} has {capacity.nodes} node(s)"
    most = capacity.gpus_per_node
    if most is not None and gpus > most:
        return (
            f"--gpus {gpus} per node, and the nodes of partition {capacity.partition} have "
            f"at most {most} GPU(s)"
        )
    return None


def ask_cluster(plan: Any, cells: int | None) -> dict[str, Any] | None:
    """What SLURM says of a SLURM plan's job (None for a local plan): ``accepted`` (None:
    not asked), ``said``, and ``refusal`` (one line, or None)."""
    if plan.mode != "slurm" or not plan.launcher_config:
        return None
    config = dict(plan.launcher_config)
    partition = config.get("partition")
    capacity = partition_capacity(str(partition) if partition else None)
    gpus = int(config.get("gpus_per_node") or 0)
    never = never_starts(plan.nodes, gpus, capacity)
    ok, said = sbatch_test_only(plan_script(plan, cells)[0])
    refusal = None
    if ok is False:
        extra = f" ({never})" if never else ""
        refusal = f"sbatch refused the job: {said}{extra}; {_FIX}; nothing was submitted"
    elif never is not None:
        refusal = (
            f"the job can never start: {never} (sbatch would queue it and it would pend for "
            f"ever); {_FIX}; nothing was submitted"
        )
    return {"accepted": ok, "said": said, "refusal": refusal}


def count_cells(overrides: Sequence[str]) -> tuple[int | None, dict[str, int]]:
    """``(cells, values per swept key)``; cells is None when a sweep has no fixed length
    (``interval()``).

    >>> count_cells(["lr=0.1,0.2", "+seed=range(3)", "x=1", "hydra.launcher.qos=a"])
    (6, {'lr': 2, 'seed': 3})
    >>> count_cells(["hydration=1,2", "hydra.job.chdir=true,false"])
    (2, {'hydration': 2})
    """
    cells: int | None = 1
    axes: dict[str, int] = {}
    for o in parse_overrides(overrides):
        if not o.is_sweep_override() or is_hydra_key(o.key_or_group):
            continue
        try:
            n = len(list(o.sweep_string_iterator()))
        except (TypeError, ValueError):  # interval(): a range of floats, no count
            cells = None
            continue
        axes[o.key_or_group] = n
        cells = None if cells is None else cells * n
    return cells, axes


def node_local_root(path: str | None) -> str | None:
    """The node-local mount point ``path`` lies under, or None.

    >>> node_local_root("/tmp/runs"), node_local_root("/shared/runs")
    ('/tmp', None)
    """
    if not path:
        return None
    p = PurePosixPath(path)
    return next((root for root in NODE_LOCAL if p.is_relative_to(root)), None)


#: the first line of the requeue trap in a batch script (mushin_box._slurm.requeue)
_TRAP_START = "# mushin-box host-side requeue"
#: the line that opens the trap's last function; the trap ends at its closing brace
_TRAP_LAST = "srun() {"


def fold_requeue_trap(script: str) -> str:
    """``script`` with the host-side requeue trap folded to one line naming its policy and
    its length; a script without the trap as it is.

    >>> from mushin_box._slurm.requeue import requeue_setup_lines
    >>> trap = requeue_setup_lines(requeue_on=["preemption"], max_requeues=3,
    ...                            rank_signal="USR1", signal_delay_s=120, timeout_min=60)
    >>> script = chr(10).join(["#SBATCH --nodes=2", *trap, "srun python -m x"])
    >>> folded = fold_requeue_trap(script).splitlines()
    >>> folded[0], folded[-1], len(folded)
    ('#SBATCH --nodes=2', 'srun python -m x', 3)
    >>> folded[1]  # doctest: +ELLIPSIS
    '# [the requeue trap, ... lines, folded: requeue_on=preemption max_requeues=3; --verbose ...]'
    """
    lines = script.split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith(_TRAP_START))
        end = lines.index("}", lines.index(_TRAP_LAST, start))
    except (StopIteration, ValueError):
        return script
    policy = next((line for line in lines[start:end] if "__mushin_requeue_on=" in line), "")
    said = " ".join(w.removeprefix("__mushin_") for w in policy.split())
    folded = f"# [the requeue trap, {end - start + 1} lines, folded: {said}; --verbose shows it]"
    return "\n".join([*lines[:start], folded, *lines[end + 1 :]])


def env_file(config: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The env file a launcher config's setup lines write, secret-looking values redacted."""
    config = config or {}
    written = env_file_written(str(config.get("python") or ""), config.get("setup") or [])
    if written is None:
        return None
    path, text = written
    return {"path": path or "?", "text": redact_text(text)}


def review_plan(plan: Any, target: Any, *, errors: Sequence[str] = ()) -> dict[str, Any]:
    """The dry run's review of ``plan``; ``errors`` found before (a pre-flight's) first."""
    data = plan.to_dict()
    problems = list(errors)
    warnings: list[str] = []
    try:  # secret values never reach stdout (often a file): their references instead
        data["overrides"] = SecretVault().hide_in_overrides(list(plan.overrides))
    except ValueError as exc:  # a sweep over a secret-looking key
        problems.append(str(exc))
    config = config_of(target)
    try:  # what the launch composes first: an override Hydra refuses is refused here too
        composed = check_composes(config, list(plan.overrides))
    except Exception as exc:
        problems.append(hydra_error_line(exc, plan.overrides, config))
    else:  # and a value the task needs that is given nowhere, as the launch refuses it
        try:
            check_required(task_of(target), composed)
        except MissingValueError as exc:
            problems.append(str(exc))
    cells, axes = count_cells(plan.overrides)
    data.update(cells=cells, sweep=axes, ranks=plan.nodes * plan.gpus)
    launcher = dict(plan.launcher_config or {})
    if plan.mode == "slurm":
        minutes = int(launcher.get("timeout_min", 60))
        days, rest = divmod(minutes, 24 * 60)  # as SLURM writes it: [D-]H:MM:SS
        duration = f"{f'{days}-' if days else ''}{rest // 60}:{rest % 60:02d}:00"
        gpus = plan.nodes * plan.gpus
        data["gpu_hours"] = None if cells is None else round(cells * gpus * minutes / 60, 2)
        data["gpu_hours_formula"] = (
            f"{cells if cells is not None else '?'} cell(s) x {plan.nodes} node(s) x "
            f"{plan.gpus} GPU(s) x {duration}"
        )
        script, data["arrays"] = plan_script(plan, cells, "<sweep directory>")
        data["sbatch"] = fold_env_file(script)
        data["env_file"] = env_file(launcher)
        warnings += _slurm_warnings(plan, config, launcher)
    data["warnings"] = warnings
    data["errors"] = problems
    return data


def _slurm_warnings(plan: Any, config: Any, launcher: dict[str, Any]) -> list[str]:
    out: list[str] = []
    key = "trainer.accelerator"
    parsed = parse_overrides(plan.overrides)
    given = [o.value() for o in parsed if o.key_or_group == key and not o.is_delete()]
    accelerator = given[-1] if given else select_key(config, key)
    if isinstance(accelerator, str) and accelerator.lower() not in ("gpu", "cuda", "auto"):
        where = "an override" if given else "the experiment's config"
        out.append(
            f"trainer.accelerator is {accelerator!r} ({where}): each job holds "
            f"{plan.nodes * plan.gpus} GPU(s) and trains on the CPU; add "
            "trainer.accelerator=gpu"
        )
    if "account" not in launcher:
        accounts = account_check()
        if accounts.enforced and accounts.default is None:
            out.append(
                "no --account, and this cluster enforces accounts with no default one for "
                "you: sbatch will refuse the job; pass --account (`sacctmgr show associations "
                "user=$USER` lists yours) or put account in a profile"
            )
        elif accounts.enforced is None:
            out.append(
                "no --account, and the cluster's accounting could not be asked: if it needs "
                "one, pass --account or put it in a profile"
            )
    chosen = plan.sources.get("cpus_per_task", "default") != "default"  # a flag, a profile
    if int(launcher.get("cpus_per_task", 1)) == 1 and not chosen:
        out.append(
            "cpus_per_task=1: each rank gets one CPU for its data loading; set "
            "--cpus-per-task (e.g. 8) or cpus-per-task in a profile"
        )
    words = shlex.split(str(launcher.get("python") or ""))
    image = next((w for w in words if w.endswith(".sif")), None)
    for what, path in (("sweep directory", plan.working_dir), ("image", image)):
        root = node_local_root(path)
        if root is not None:
            out.append(
                f"the {what} {path} is on node-local storage ({root}): compute nodes do not "
                "share it with this host; use a shared filesystem"
            )
    return out
