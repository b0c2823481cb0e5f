# SPDX-License-Identifier: MIT
"""A cell's provenance record: written as its task starts, completed when it ends.

The cell runner (:mod:`mushin_box._sweep.cells`) calls :func:`start_provenance` right after
the "running" status, and :func:`finish_provenance` once the task returned or raised (after
the outcome's status: a kill in between must not leave a finished cell unrecorded).

Every attempt rewrites the record, so the attempts before it (``run.attempts``: a requeue, a
torchrun restart, a resume with fewer GPUs) are read from the record it replaces, while this
attempt continues the same fit (:mod:`mushin_box._provenance.elastic`).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.layout import FINGERPRINTS_FILE, PROVENANCE_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json

__all__ = ["finish_provenance", "start_provenance"]

#: the start of each cell's task in this process, on the monotonic clock (its duration)
_CLOCKS: dict[str, float] = {}


def start_provenance(
    task: Callable[..., Any],
    cfg: Any,
    cell_dir: Path,
    fingerprints: dict[str, str],
    pre_call: Callable[..., Any] | None = None,
    experiment: Mapping[str, Any] | None = None,
    *,
    attempt: int | None = None,
    continues: bool = False,
) -> None:
    """Write the cell's provenance record (and its package list) as the task starts.

    ``run.started`` is the ``started`` of the status just written, so both files agree;
    :func:`finish_provenance` completes the record when the task is done. ``run.task``
    says where the task and ``pre_call`` are defined (``mushin-box reproduce`` imports them).
    ``run.attempts`` lists this ``attempt`` after those of the record it replaces, when it
    ``continues`` their fit.
    """
    from omegaconf import OmegaConf

    from mushin_box._provenance.files import write_provenance
    from mushin_box._provenance.full import full_provenance, launcher_from_hydra
    from mushin_box._provenance.record import basic_provenance

    config = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    seed_base = OmegaConf.select(cfg, "seed", default=None)
    status = read_json(cell_dir / STATUS_FILE, default={})
    started = status.get("started") if isinstance(status, dict) else None
    # the task's duration, measured on this process's monotonic clock (finish_provenance)
    _CLOCKS[str(cell_dir)] = time.monotonic()
    try:
        record = full_provenance(
            task=task,
            config=config,
            fingerprints=fingerprints,
            seed_base=seed_base,
            launcher=launcher_from_hydra(),
            started=started if isinstance(started, str) else None,
            pre_call=pre_call,
            experiment=experiment,
        )
    except ValueError as exc:  # a malformed launcher environment: keep the basic record
        warnings.warn(
            f"cell {cell_dir.name}: recording the basic provenance only ({exc})", stacklevel=2
        )
        record = basic_provenance(
            task=task,
            config=config,
            fingerprints=fingerprints,
            seed_base=seed_base,
            pre_call=pre_call,
            experiment=experiment,
        )
    write_provenance(cell_dir, _with_attempt(record, cell_dir, attempt, continues))


def _with_attempt(
    record: dict[str, Any], cell_dir: Path, attempt: int | None, continues: bool
) -> dict[str, Any]:
    """``record`` with ``run.attempts``: the earlier ones of this fit, then this one."""
    from mushin_box._provenance.elastic import attempt_entry, carried_attempts

    run = record.get("run")
    if not isinstance(run, dict):
        return record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a corrupt earlier record: its attempts are lost
        earlier = carried_attempts(read_json(cell_dir / PROVENANCE_FILE), continues=continues)
    topology, launcher = run.get("topology"), run.get("launcher")
    entry = attempt_entry(
        os.environ,
        attempt=attempt,
        world_size=topology.get("world_size") if isinstance(topology, dict) else None,
        started=run.get("started"),
        launcher=launcher.get("kind") if isinstance(launcher, dict) else None,
    )
    kept = [row for row in earlier if attempt is None or row.get("attempt") != attempt]
    # the fit starts on disk are the last attempt's: they date it even when it died before
    # a checkpoint kept its start (then the fit this attempt restores no longer lists it)
    record = {**record, "run": {**run, "attempts": [*kept, entry]}}
    return _with_fit_starts(record, cell_dir, changes=False)


def finish_provenance(
    cell_dir: Path, ended: str, end: float, *, attempt: int | None = None
) -> None:
    """Complete the cell's provenance once the task has returned or raised: the per-rank
    seeds its ranks recorded, ``run.ended``/``run.duration_s`` (the task's end: ``ended``,
    and ``end`` on the monotonic clock) and ``run.devices`` (the task has usually
    imported torch by now), and where each rank of this ``attempt`` ran
    (:mod:`mushin_box._provenance.ranks`)."""
    from mushin_box._provenance.files import write_provenance
    from mushin_box._provenance.full import finish_record, record_with_seeds
    from mushin_box._provenance.ranks import read_rank_runtimes, record_with_rank_runtime
    from mushin_box._train.seeding import seed_records

    t0 = _CLOCKS.pop(str(cell_dir), None)
    duration = round(end - t0, 3) if t0 is not None else None
    try:
        record = read_json(cell_dir / PROVENANCE_FILE)
        if not isinstance(record, dict):
            return
        records = seed_records(cell_dir)
        if records:
            record = record_with_seeds(record, records)
        runtimes = read_rank_runtimes(cell_dir, attempt=attempt)
        if runtimes:
            record = record_with_rank_runtime(record, runtimes)
        record = _with_fit_starts(record, cell_dir)
        write_provenance(cell_dir, finish_record(record, ended=ended, duration_s=duration))
    except (OSError, ValueError, KeyError) as exc:  # never fail a cell over provenance
        warnings.warn(f"cell {cell_dir.name}: provenance not completed ({exc})", stacklevel=2)


def _with_fit_starts(
    record: dict[str, Any], cell_dir: Path, *, changes: bool = True
) -> dict[str, Any]:
    """``record`` with each attempt's first epoch and (``changes``) ``run.world_changes``,
    from the fit starts ``MetricsCallback`` recorded (``fit_fingerprints.json``; none
    without it)."""
    from mushin_box._provenance.elastic import finished_run

    run = record.get("run")
    if not isinstance(run, dict):
        return record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user's file, not a sidecar: none is no loss
        prints = read_json(cell_dir / FINGERPRINTS_FILE)
    starts = prints.get("starts") if isinstance(prints, dict) else None
    done = finished_run(run, starts)
    if not changes:  # the starts of the fit this attempt has not restored yet
        done.pop("world_changes", None)
    return {**record, "run": done}
