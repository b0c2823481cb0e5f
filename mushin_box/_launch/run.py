# SPDX-License-Identifier: MIT
"""Running a launch plan: ``Workflow.run`` with the plan's launcher and overrides.

What stops a launch before any cell ran becomes a one-line ``LaunchError``, and the
directories made for nothing are removed; a cell's own error propagates unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.envstate import environ_set
from mushin_box._core.layout import STATUS_FILE
from mushin_box._launch.loading import as_workflow
from mushin_box._launch.plan import LaunchError, LaunchPlan, hydra_error_line
from mushin_box._launch.record import recorded
from mushin_box._slurm.probe import sbatch_refused
from mushin_box._sweepdir.manifest import read_sweep_manifest
from mushin_box._sweepdir.progress import QuietTerminal


def run_launch(
    target: Any,
    plan: LaunchPlan,
    *,
    resume: bool = False,
    on_error: str = "raise",
    progress: bool = True,
    reuse_stale_code: bool = False,
    wait: bool = True,
    cancel_on_interrupt: bool = False,
    source: str | None = None,
    record: Mapping[str, Any] | None = None,
) -> Any:
    """``Workflow.run`` of the plan, keeping ``record`` for ``resume``; a
    :class:`LaunchError` when nothing ran (bad arguments, an override, sbatch refused)."""
    from hydra.errors import ConfigCompositionException

    workflow = as_workflow(target, source)
    roots = {Path(d).resolve() for d in (plan.working_dir, workflow.working_dir) if d}
    before = {root: _manifest_run_id(root) for root in roots}
    created = None
    if plan.working_dir:  # what mkdir(parents=True) creates: its outermost missing part
        wanted = Path(plan.working_dir).resolve()
        missing = [p for p in (wanted, *wanted.parents) if not p.exists()]
        created = missing[-1] if missing else None
    # the ranks (sbatch exports this environment) import the experiment from its directory
    paths = [p for p in (plan.pythonpath, os.environ.get("PYTHONPATH")) if p]
    pythonpath = environ_set({"PYTHONPATH": os.pathsep.join(paths)} if plan.pythonpath else {})
    launcher_config = dict(plan.launcher_config) if plan.launcher_config else None
    if cancel_on_interrupt and launcher_config is not None:
        launcher_config["cancel_on_interrupt"] = True
    record_root = Path(plan.working_dir or workflow.working_dir or ".").resolve()
    run_id = before.get(record_root)
    started = lambda: _manifest_run_id(record_root) != run_id  # noqa: E731
    if record is not None:  # which launcher ran it: `ls` shows it
        record = {**record, "launcher": plan.launcher or "basic"}
    # without the bar (which leaves them out itself), Lightning's notices are left out too
    quiet = contextlib.nullcontext() if progress else QuietTerminal()
    with pythonpath, quiet, recorded(record_root, record if plan.working_dir else None, started):
        try:
            return workflow.run(
                working_dir=plan.working_dir,
                launcher=plan.launcher,
                launcher_config=launcher_config,
                overrides=list(plan.overrides),
                resume=resume,
                on_error=on_error,  # type: ignore[arg-type]
                progress=progress,
                reuse_stale_code=reuse_stale_code,
                wait=wait,
            )
        except ConfigCompositionException as exc:  # an override Hydra cannot apply: no task ran
            refusal = hydra_error_line(exc, plan.overrides, workflow.config)
        except RuntimeError as exc:
            refusal = sbatch_refusal(exc)  # None: not sbatch's refusal
            if refusal is None:
                raise
        except (TypeError, ValueError) as exc:
            # raised before the sweep started (no new manifest: bad arguments, nothing ran) is a
            # usage error; after, it is a cell's own error (on_error='raise'): re-raised as is
            root = workflow.working_dir
            if root is not None:
                root = Path(root).resolve()
                run_id = _manifest_run_id(root)
                if run_id is not None and run_id != before.get(root):
                    raise
            refusal = str(exc)
        _remove_unless_cells(created)  # nothing ran: what this launch made is nobody's
        raise LaunchError(refusal) from None


def sbatch_refusal(exc: BaseException) -> str | None:
    """One line for a job sbatch refused to queue, with the options to check; else None."""
    refused = sbatch_refused(exc)
    if refused is None:
        return None
    if refused.no_cluster:
        return (
            f"sbatch refused the job: {refused.said}; no SLURM cluster is reachable from here: "
            "set SLURM_CONF to the cluster's slurm.conf (or start its controller), or run "
            "here with --local"
        )
    return (
        f"sbatch refused the job: {refused.said}; check --partition, --account and the other "
        "SLURM options (`sinfo` lists the partitions, `sacctmgr show associations "
        "user=$USER` your accounts), or run here with --local"
    )


def _remove_unless_cells(created: Path | None) -> None:
    """Remove ``created``, made by this launch for a sweep that never started, unless a
    cell wrote its status there (an earlier batch of the same sweep ran: keep it)."""
    if created is not None and created.is_dir() and next(created.rglob(STATUS_FILE), None) is None:
        shutil.rmtree(created, ignore_errors=True)


def _manifest_run_id(root: Path) -> str | None:
    """The ``run_id`` of the sweep manifest in ``root`` (a new one: the cells start), or None."""
    manifest = read_sweep_manifest(root)
    run_id = manifest.get("run_id") if manifest is not None else None
    return str(run_id) if run_id is not None else None
