# SPDX-License-Identifier: MIT
"""Ask the cluster before submitting: would SLURM queue this launch's job, and can it ever start?

``sbatch --test-only`` answers for the very script the launcher would submit; a job larger
than its partition may be accepted and pend for ever, so ``sinfo``'s capacity is read too.
A check that cannot be asked never blocks a launch.
"""

from __future__ import annotations

from typing import Any

from mushin_box._slurm.arrays import first_array
from mushin_box._slurm.launcher import render_sbatch
from mushin_box._slurm.probe import PartitionCapacity, partition_capacity, sbatch_test_only

_FIX = (
    "check --partition, --nodes, --gpus, --time, --account and --qos (`sinfo` lists the "
    "partitions and their nodes, `sacctmgr show associations user=$USER` your accounts)"
)


def plan_script(
    plan: Any, cells: int | None, root: str = "/tmp/mushin-box-test-only"
) -> tuple[str, str | None]:
    """The sbatch script a SLURM plan submits (a job array when it has several cells: the
    first of its arrays), and a line saying how the sweep is split when the cluster's
    MaxArraySize splits it (None: one job or one array). ``root``: the sweep directory
    shown when the plan has none."""
    config = dict(plan.launcher_config or {})
    root = plan.working_dir or root
    folder = str(config.pop("submitit_folder", f"{root}/.submitit/%j"))
    folder = folder.replace("${hydra.sweep.dir}", root)
    array, split = first_array(config, cells)
    return render_sbatch(config, folder, map_count=array), split


def never_starts(nodes: int, gpus: int, capacity: PartitionCapacity | None) -> str | None:
    """Why a job of ``nodes`` x ``gpus`` GPUs per node can never start on the partition
    ``capacity`` describes, or None.

    Examples
    --------
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
    """What SLURM says of a SLURM plan's job (None for a local plan): ``accepted``
    (``sbatch --test-only``'s answer, None when not asked), ``said`` (its words) and
    ``refusal`` (one line when SLURM would refuse it or it could never start, else None)."""
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
