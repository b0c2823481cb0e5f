# SPDX-License-Identifier: MIT
"""``launch --torchrun``'s plans: each cell's ranks as torchrun workers
(:mod:`mushin_box._slurm.torchrun`), here (``mushin_local``, one ``--standalone`` agent) or
on SLURM (``mushin_slurm``, one agent per node). :func:`~mushin_box._launch.plan.plan_launch`
checks everything else first, as for any launch, and builds the plan of these values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mushin_box._slurm.launcher import SubmititCellLauncher
from mushin_box._slurm.torchrun import check_torchrun_settings, torchrun_launcher_fields

#: a local torchrun cell runs until it ends (submitit's local jobs have a time limit)
_TORCHRUN_TIMEOUT_MIN = 7 * 24 * 60


def local_torchrun_config(gpus: int, max_restarts: int) -> dict[str, Any]:
    """The ``mushin_local`` config of one ``torchrun --standalone`` agent of ``gpus``
    workers per cell, checked by the launcher's rule (ValueError)."""
    config = {
        "torchrun": True,
        "nproc_per_node": gpus,
        "max_restarts": max_restarts,
        "timeout_min": _TORCHRUN_TIMEOUT_MIN,
        "poll_interval_s": 1.0,
    }
    check_torchrun_settings({**config, "tasks_per_node": 1})
    return config


def slurm_torchrun(
    config: Mapping[str, Any],
    overrides: Sequence[str],
    nodes: int,
    max_restarts: int,
    min_nodes: int | None,
) -> tuple[dict[str, Any], list[str]]:
    """The SLURM launcher config as one torchrun agent per node (checked: ValueError), and
    the overrides: under elastic membership the Trainer's ``num_nodes`` is the group
    torchrun formed (``GROUP_WORLD_SIZE``, else ``nodes``), so its world-size check holds.

    Examples
    --------
    >>> config = {"nodes": 2, "tasks_per_node": 2, "gpus_per_node": 2}
    >>> fields, out = slurm_torchrun(config, ["++trainer.num_nodes=2"], 2, 0, 1)
    >>> fields["min_nodes"], out
    (1, ["++trainer.num_nodes='${oc.decode:${oc.env:GROUP_WORLD_SIZE,2}}'"])
    """
    fields = torchrun_launcher_fields(config, max_restarts=max_restarts, min_nodes=min_nodes)
    SubmititCellLauncher("slurm", fields)
    out = list(overrides)
    if "min_nodes" in fields:
        out = [o for o in out if not o.startswith("++trainer.num_nodes=")]
        out.append(f"++trainer.num_nodes='${{oc.decode:${{oc.env:GROUP_WORLD_SIZE,{nodes}}}}}'")
    return fields, out
