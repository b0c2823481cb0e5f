# SPDX-License-Identifier: MIT
"""One ``Workflow.run`` under its sweep's lock: open the directory, launch the cells, finish.

Each step hands the next what it read, so that a resume reads each sidecar once: the status
records read on opening feed :func:`~mushin_box._sweep.prefilter.prefilter`; the cells it
reused are not read again (the lock keeps other runs out); completed cells unchanged since
the sweep's index (:mod:`~mushin_box._sweepdir.settled`) are read from it.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from hydra_zen import launch

from mushin_box._core.gcpause import gc_paused
from mushin_box._core.jobskip import skipping
from mushin_box._core.layout import ABORT_FILE, JOBS_FILE
from mushin_box._core.secrets import SecretVault
from mushin_box._core.sidecars import canonical_dumps, start_removing_orphans
from mushin_box._slurm.jobs import is_live, is_unknown, job_states, marked_jobs, name_job_ids
from mushin_box._slurm.submitted import carry_jobs, job_ids, read_submission
from mushin_box._sweep.cells import CellPlan, CellRunner
from mushin_box._sweep.compose import hydra_state_kept
from mushin_box._sweep.jobconfig import job_configs
from mushin_box._sweep.prefilter import SWEEPER_TARGET, own_sweeper, prefilter
from mushin_box._sweepdir import manifest
from mushin_box._sweepdir.board import grid_runs
from mushin_box._sweepdir.liveness import still_running_message
from mushin_box._sweepdir.progress import CellProgress
from mushin_box._sweepdir.settled import CellIndex, read_index, refresh_index


@gc_paused()  # a bulk read: see _core/gcpause.py
def open_sweep(
    root: Path, grid: Mapping[str, list[Any]], plan: CellPlan, launcher: str | None = None
) -> tuple[manifest.Records, CellIndex, Any]:
    """Under the sweep's lock, before any cell starts: warn of a changed grid (on resume),
    record abandoned cells, refuse cells still running or queued (``SweepBusyError``),
    clear the abort file and write the new manifest; return the status records, the index
    and the manifest."""
    previous = manifest.read_sweep_manifest(root)
    if plan.resume and previous is not None:
        _report_grid_change(previous, grid)
    slurm = launcher == "mushin_slurm" or (previous or {}).get("launcher") == "mushin_slurm"
    _refuse_live_submission(root, grid, slurm)  # first: queued jobs have no status file yet
    # only a resume reuses cells: a fresh run of the sweep reads each status
    index = read_index(root) if plan.resume else CellIndex()
    records = list(manifest.cell_records(root, index.records()))  # each status file read once
    manifest.reconcile_abandoned(records)
    # only this run's cells: the sweep's others may still run (and only a running cell
    # can be: no id of 10,000 finished cells is computed)
    running = [(d, r) for d, r in records if r.get("status") == "running"]
    ids = manifest.grid_ids(grid) if running else set()
    busy = manifest.live_cells([(d, r) for d, r in running if manifest.combo_id(r["combo"]) in ids])
    if busy:
        raise manifest.SweepBusyError(still_running_message(busy))
    (root / ABORT_FILE).unlink(missing_ok=True)
    written = manifest.write_manifest(root, grid=grid, run_id=plan.run_id, records=records)
    return records, index, written


def _refuse_live_submission(root: Path, grid: Mapping[str, list[Any]], slurm: bool) -> None:
    """Refuse while a job of the latest submission that may run a cell of ``grid`` is queued
    or running (it has no status file yet), or the scheduler cannot say. A live job that
    runs none of them is marked ``carried``: the next submission's record keeps it."""
    submission = read_submission(root)
    jobs = job_ids(submission)
    if slurm or submission.get("cluster") == "slurm":
        _refuse_unrecorded(root, jobs)
    states = job_states(jobs) if jobs else {}
    live = [j for j in jobs if is_live(states.get(j, ""))]
    unknown = [j for j in jobs if is_unknown(states.get(j))]
    if not live and not unknown:
        return
    if not unknown:  # which live jobs may run a cell of grid, by their overrides
        runs = grid_runs(grid)
        entries = [e for e in submission.get("jobs", ()) if isinstance(e, dict)]
        overrides = {str(e.get("job_id")): e.get("overrides") for e in entries}
        mine = [j for j in live if j not in overrides or runs(overrides[j])]
        if not mine:  # every live job runs a cell this run leaves alone
            carry_jobs(root, submission, live)
            return
        live = mine
    where = shlex.quote(str(root))
    fix = f"follow it with `mushin-box wait {where}` or stop it with `mushin-box cancel {where}`"
    if live:
        named = name_job_ids((f"{j} ({states[j]})" for j in live), sep=", ")
        raise manifest.SweepBusyError(
            f"this sweep is still live: SLURM job(s) {named} of its last submission "
            f"({submission.get('submitted')}) are queued or running; {fix}, "
            "then run again"
        )
    named = name_job_ids(unknown, sep=", ")
    raise manifest.SweepBusyError(
        f"the scheduler did not answer (squeue failed: check SLURM_CONF and that the "
        f"controller is up), so whether SLURM job(s) {named} of this sweep still run is "
        f"unknown; run again once it answers, or {fix}"
    )


def _refuse_unrecorded(root: Path, recorded: list[str]) -> None:
    """Refuse while a live job carries the sweep's mark but no record names it (a submission
    killed between ``sbatch`` and its record): ``cancel`` acts only on recorded jobs, so the
    fix names ``scancel``. A queue that does not answer adds nothing here."""
    known = set(recorded)
    strays = [
        j for j, state in (marked_jobs(root) or {}).items() if j not in known and is_live(state)
    ]
    if not strays:
        return
    arrays = " ".join(sorted({j.partition("_")[0] for j in strays}))
    raise manifest.SweepBusyError(
        f"SLURM job(s) {name_job_ids(strays, sep=', ')} carry this sweep's mark but no "
        f"record of it names them (a submission stopped before it wrote {JOBS_FILE}): they "
        f"would run its cells a second time; stop them with `scancel {arrays}`, or let "
        "them end, then run again"
    )


@attrs.frozen
class Launched:
    """What a launch left: its error, the cells recorded as ended without a word, the status
    records after it (None: unreadable), and the reused cells' metrics."""

    error: BaseException | None
    ended: list[str]
    records: list[Any] | None
    metrics: Mapping[Path, Any] = attrs.field(factory=dict)


def launch_cells(
    runner: CellRunner,
    config: Any,
    grid: Mapping[str, list[Any]],
    overrides: list[str],
    vault: SecretVault,
    *,
    launcher: str | None,
    launcher_config: Mapping[str, Any] | None,
    progress: bool,
    first: Any = None,
) -> Launched:
    """Open the sweep, run every cell (``hydra_zen.launch`` of ``runner``), then record the
    cells whose job ended without a word, rebuild the manifest and the index."""
    plan = runner.plan
    root = Path(plan.working_dir)
    records, index, opened = open_sweep(root, grid, plan, launcher)
    watcher = None
    if progress:  # every launcher: the bar reads only the cells' status files
        total = math.prod(len(values) for values in grid.values())
        watcher = CellProgress(root, total=total, run_id=plan.run_id).start()
    tidied = start_removing_orphans(root)  # left by writers killed mid-write
    error: BaseException | None = None
    done = None
    try:
        with vault.exported(), hydra_state_kept(), gc_paused():
            done = prefilter(  # completed cells are decided before Hydra launches anything
                config,
                overrides,
                plan,
                launcher=launcher,
                launcher_config=launcher_config,
                first=first,
                records=records,
                indexed=index.metrics(),
            )
        if own_sweeper(overrides):  # only the jobs left, each composed once
            overrides = [*overrides, f"hydra.sweeper._target_={SWEEPER_TARGET}"]
        with vault.exported(), hydra_state_kept(), skipping(done.reused, job_configs):
            if not done.nothing_to_launch:
                launch(
                    config,
                    runner,
                    overrides=overrides,
                    multirun=True,
                    version_base="1.3",
                    # a pickled hydra-zen dataclass (submitit) leaves its list/dict defaults
                    # broken for the next launch in this process: a DictConfig
                    to_dictconfig=launcher not in (None, "basic"),
                    config_name="mushin_workflow",
                    job_name="mushin_workflow",
                )
    except BaseException as exc:  # recorded by the cell; re-raised by the caller
        error = exc
    finally:
        tidied()
        if watcher is not None:
            watcher.stop()
        metrics = done.metrics if done is not None else {}
        untouched = {d.name: r for d, r in records if d in metrics}  # reused: nothing ran
        # nothing launched: the manifest open_sweep wrote from `records` still holds
        written = records if done is not None and done.nothing_to_launch else None
        # records the cells whose job ended without a word; never hides `error`
        ended, after = manifest.finish_launch(root, error, untouched, written, opened)
        if error is None and after is not None:
            with contextlib.suppress(OSError):  # a cache: unwritten, the cells' files are read
                refresh_index(root, after, index)
    return Launched(error, ended, after, metrics)


def _report_grid_change(previous: Mapping[str, Any], grid: Mapping[str, list[Any]]) -> None:
    """Warn when a resumed sweep's grid differs from the manifest's."""
    old = previous.get("grid", {})
    if list(old) != list(grid):
        warnings.warn(
            f"resume: the swept parameters changed from {list(old)} to {list(grid)}; cells "
            "are matched by their swept values, so no earlier cell is reused",
            stacklevel=4,
        )
        return
    with contextlib.suppress(TypeError, ValueError):  # the same values, typed as combo_id
        if canonical_dumps(old) == canonical_dumps({k: list(v) for k, v in grid.items()}):
            return  # the common resume: no id of 10,000 cells to compute
    old_ids, new_ids = manifest.grid_ids(old), manifest.grid_ids(grid)
    added, removed = len(new_ids - old_ids), len(old_ids - new_ids)
    if added or removed:
        warnings.warn(
            f"resume: the grid changed ({added} new cell(s), {removed} cell(s) no longer in it); "
            "cells in both are reused if their fingerprints match",
            stacklevel=4,
        )
