# SPDX-License-Identifier: MIT
"""``Workflow``: a hydra-zen task swept over a grid, one directory and sidecars per cell.

``Workflow.run`` is the driver: it checks the arguments, hides secrets, collects the grid,
builds the :class:`~mushin_box._sweep.cells.CellPlan`, launches the cells under the sweep's
lock (:func:`launch_cells`) and reports what went wrong. Each cell decides what it does
itself; the driver decides only for the whole sweep. Each step of a launch hands the next
what it read, so that a resume reads each sidecar once: the status records read on opening
feed :func:`~mushin_box._sweep.prefilter.prefilter`; the cells it reused are not read again
(the lock keeps other runs out); completed cells unchanged since the sweep's index
(:mod:`~mushin_box._sweepdir.settled`) are read from it.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import os
import shlex
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import attrs
from hydra_zen import hydra_list, launch, make_config, multirun

from mushin_box._core.errors import CellWarning
from mushin_box._core.gcpause import gc_paused
from mushin_box._core.jobskip import skipping
from mushin_box._core.layout import ABORT_FILE, ERROR_FILE, JOBS_FILE, default_sweep_dir
from mushin_box._core.overrideparse import override_keys
from mushin_box._core.overrides import format_override, format_sweep, format_value
from mushin_box._core.redact import check_secret_names
from mushin_box._core.secrets import SecretVault, sweep_error
from mushin_box._core.sidecars import canonical_dumps, start_removing_orphans
from mushin_box._core.targets import public
from mushin_box._provenance.patch import keep_patch
from mushin_box._provenance.record import experiment_state
from mushin_box._slurm.config import sbatch_options
from mushin_box._slurm.jobs import is_live, is_unknown, job_states, marked_jobs, name_job_ids
from mushin_box._slurm.submitted import carry_jobs, job_ids, read_submission
from mushin_box._sweep import validate
from mushin_box._sweep.cells import CellPlan, CellRunner
from mushin_box._sweep.compose import check_composes, check_required, hydra_state_kept
from mushin_box._sweep.decide import OUT_OF_TIME
from mushin_box._sweep.handle import SweepHandle
from mushin_box._sweep.jobconfig import job_configs
from mushin_box._sweep.prefilter import SWEEPER_TARGET, Prefiltered, own_sweeper, prefilter
from mushin_box._sweep.usercode import code_identity
from mushin_box._sweepdir import manifest
from mushin_box._sweepdir.board import grid_runs
from mushin_box._sweepdir.liveness import still_running_message
from mushin_box._sweepdir.progress import CellProgress
from mushin_box._sweepdir.settled import CellIndex, read_index, refresh_index
from mushin_box._train.resume import RESUME_PARAM

if TYPE_CHECKING:  # pragma: no cover - xarray loads with the results, not with the Workflow
    import xarray as xr

_MULTI_RANK_KEYS = ("tasks_per_node", "nodes", "ntasks_per_node", "nproc_per_node")


def _config_from_signature(task: Callable[..., Any]) -> Any:
    params = [
        p
        for p in inspect.signature(task).parameters.values()
        if p.name != RESUME_PARAM and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    return make_config(*[p.name for p in params if p.name not in defaults], **defaults)


#: launchers whose jobs run on without the driver (``wait=False``)
_DETACHABLE = ("mushin_slurm", "mushin_local")


def _deadline(
    max_total_seconds: float | None, launcher_config: Mapping[str, Any] | None
) -> float | None:
    """The sweep's ``time.time()`` deadline; None for none, or (with a warning) multi-rank."""
    if max_total_seconds is None:
        return None
    values = [(launcher_config or {}).get(key) for key in _MULTI_RANK_KEYS]
    if math.prod(v for v in values if isinstance(v, int) and not isinstance(v, bool)) > 1:
        warnings.warn(
            "max_total_seconds is disabled for multi-rank launches (each rank would keep "
            "its own deadline and a rank that stopped alone would hang the others); use "
            "the scheduler's timeout_min in launcher_config instead",
            stacklevel=3,
        )
        return None
    return time.time() + float(max_total_seconds)


def _hydra_overrides(
    root: Path,
    swept: Sequence[str],
    task_args: Sequence[str],
    launcher: str | None,
    launcher_config: Mapping[str, Any] | None,
) -> list[str]:
    """Hydra's overrides: the sweep directory, cells named by their swept values only, and
    the launcher with its settings."""
    constant_keys = [k for k in override_keys(task_args) if k not in swept]
    hydra_overrides = [
        format_override("hydra.sweep.dir", str(root)),
        "hydra.sweep.subdir='${mushin_cell:}'",
        "hydra.job.config.override_dirname.exclude_keys=" + format_value(constant_keys),
    ]
    if launcher is not None:
        hydra_overrides.append(f"hydra/launcher={launcher}")
        for key, value in (launcher_config or {}).items():
            override = format_override(f"hydra.launcher.{key}", value)
            # dict fields (additional_parameters) are struct nodes: only '++' sets keys
            hydra_overrides.append(f"++{override}" if isinstance(value, Mapping) else override)
    return hydra_overrides


@public
class Workflow:
    """A task function swept over a grid of config values.

    ``task``'s parameters are filled from the config by name (as ``hydra_zen.zen``
    does). A parameter named ``mushin_resume`` receives a
    :class:`mushin_box.ResumeContext` for its cell.

    Parameters
    ----------
    task : Callable[..., Mapping | None]
        Returns a dict of metrics (numbers or lists of numbers), or ``None``.
    config : hydra-zen/dataclass config (default: None)
        The task's config. ``None`` builds one from the task's signature (parameters
        without defaults must then be given to :meth:`run`).
    pre_call : Callable[[config], Any] | None (default: None)
        Called with each cell's config *before* the task's parameters are instantiated
        (``hydra_zen.zen``'s ``pre_call``): the place to seed, so that the model's initial
        weights are reproducible, e.g.
        ``pre_call=lambda cfg: seed_everything_per_rank(cfg.seed)`` (a named function
        for launchers that pickle).
    secrets : list[str] (default: ())
        More config keys whose values are secrets, beside the built-in words (``token``,
        ``password``, ``key``...) and the project's ``[tool.mushin-box] secret-names``. A
        name without a dot is a key at any depth, however spelled (``"my_field"`` also
        matches ``myField``), even one whose last word describes (``"session_id"``); a
        dotted name is a path from the config's root (``"db.dsn"``: that key and all under
        it, not ``cache.db.dsn``). Their values are kept out of every file like the others
        (see docs/workflow.md, "Secrets stay out of every file"); sweeping over one is
        refused.
    source : path (default: None)
        The experiment's file, whose git repository every cell records
        (``reproducibility.code.git``; ``reproduce`` checks it): default the task's own
        file. ``mushin-box launch`` passes the experiment file here.

    Examples
    --------
    >>> import tempfile
    >>> from mushin_box import Workflow, multirun
    >>> def task(lr: float, seed: int = 0):
    ...     return {"loss": lr * (seed + 1)}
    >>> ds = Workflow(task).run(working_dir=tempfile.mkdtemp(), progress=False,
    ...                         lr=multirun([0.1, 0.2]), seed=multirun([0, 1]))  # doctest: +SKIP
    >>> ds["loss"].sel(lr=0.2, seed=1).item()  # doctest: +SKIP
    0.4
    """

    def __init__(
        self,
        task: Callable[..., Any],
        config: Any = None,
        *,
        pre_call: Callable[[Any], Any] | None = None,
        secrets: Sequence[str] = (),
        source: str | os.PathLike[str] | None = None,
    ) -> None:
        if not callable(task):
            raise TypeError(f"task must be a function, got {type(task).__name__}")
        if pre_call is not None and not callable(pre_call):
            raise TypeError(f"pre_call must be a function of the config, got {pre_call!r}")
        self.task = task
        self.pre_call = pre_call
        self.secrets = check_secret_names(secrets, where="secrets")
        self.config = config if config is not None else _config_from_signature(task)
        self.source = source
        self.working_dir: Path | None = None

    @overload
    def run(
        self,
        *,
        working_dir: str | os.PathLike[str] | None = None,
        launcher: str | None = None,
        launcher_config: Mapping[str, Any] | None = None,
        overrides: Sequence[str] | None = None,
        resume: bool = False,
        on_error: Literal["raise", "nan"] = "raise",
        max_total_seconds: float | None = None,
        progress: bool = True,
        reuse_stale_code: bool = False,
        wait: Literal[True] = True,
        **sweep_params: Any,
    ) -> xr.Dataset: ...

    @overload
    def run(
        self,
        *,
        working_dir: str | os.PathLike[str] | None = None,
        launcher: str | None = None,
        launcher_config: Mapping[str, Any] | None = None,
        overrides: Sequence[str] | None = None,
        resume: bool = False,
        on_error: Literal["raise", "nan"] = "raise",
        max_total_seconds: float | None = None,
        progress: bool = True,
        reuse_stale_code: bool = False,
        wait: Literal[False],
        **sweep_params: Any,
    ) -> SweepHandle: ...

    @overload
    def run(
        self,
        *,
        working_dir: str | os.PathLike[str] | None = None,
        launcher: str | None = None,
        launcher_config: Mapping[str, Any] | None = None,
        overrides: Sequence[str] | None = None,
        resume: bool = False,
        on_error: Literal["raise", "nan"] = "raise",
        max_total_seconds: float | None = None,
        progress: bool = True,
        reuse_stale_code: bool = False,
        wait: bool,
        **sweep_params: Any,
    ) -> xr.Dataset | SweepHandle: ...

    def run(
        self,
        *,
        working_dir: str | os.PathLike[str] | None = None,
        launcher: str | None = None,
        launcher_config: Mapping[str, Any] | None = None,
        overrides: Sequence[str] | None = None,
        resume: bool = False,
        on_error: Literal["raise", "nan"] = "raise",
        max_total_seconds: float | None = None,
        progress: bool = True,
        reuse_stale_code: bool = False,
        wait: bool = True,
        **sweep_params: Any,
    ) -> xr.Dataset | SweepHandle:
        """Run every cell of the grid and return the results as an ``xarray.Dataset``
        (``wait=False``: a :class:`mushin_box.SweepHandle` at once).

        Parameters
        ----------
        working_dir : path (default: ``multirun/<timestamp>``)
            The sweep directory; each cell gets a stable sub-directory named after its
            swept values.
        launcher : str | None
            A Hydra launcher: ``"basic"`` (in-process, the default), ``"submitit_local"``,
            ``"submitit_slurm"``, or mushin-box's own.
        launcher_config : dict | None
            The launcher's settings (e.g. :func:`mushin_box.submitit_slurm_config`);
            requires ``launcher``.
        overrides : list[str] | None
            Raw Hydra overrides, passed through verbatim once their keys are checked (a
            plain ``key=`` must name a config field, a group or a task parameter;
            ``+key=`` adds one on purpose).
        resume : bool (default: False)
            Reuse completed cells whose config and code fingerprints match; run failed,
            timed-out, skipped, missing and abandoned cells again. Needs ``working_dir``.
            A cell still running in a process or SLURM job of an earlier run is never
            started a second time: the call is refused, naming it and how to stop it.
        on_error : "raise" | "nan" (default: "raise")
            ``"raise"``: record the failure, skip the cells not yet started, and re-raise
            the task's exception. ``"nan"``: record it, finish the other cells, NaN in
            the results.
        max_total_seconds : float | None
            One wall-clock budget for the whole call, in every process: cells not
            started when it runs out are recorded as ``skipped`` (run them with
            ``resume=True``). Disabled, with a warning, for multi-rank launches.
        progress : bool (default: True)
            Show a progress bar over cells, for every launcher (it reads only the
            cells' status files: SLURM is not polled for it).
        reuse_stale_code : bool (default: False)
            With ``resume=True``: reuse completed cells even though the code they ran
            changed since (their code fingerprint differs; the config must still match),
            with a warning; each such status records ``"reused_despite": ["code"]``.
        wait : bool (default: True)
            ``False``: submit the cells and return at once a
            :class:`mushin_box.SweepHandle` (``status()``, ``wait()``, ``cancel()``; rebuilt
            from ``working_dir`` alone anywhere) instead of the results. Needs a launcher
            whose jobs outlive this process: ``"mushin_slurm"`` or ``"mushin_local"``.
        **sweep_params
            ``name=multirun([...])`` sweeps; ``name=hydra_list([...])``, a scalar or a
            dict sets one value, the same in every cell (``x={"a": 1}``: the task gets
            ``x`` as that dict; no axis, not in the cells' names). A dict is never one value
            of a sweep: ``multirun([{...}, ...])`` is refused, since its cells could be
            neither named nor laid on an axis; sweep its keys (``x.a=multirun([...])``).
            Each name must be a config field, a config group or a name the
            task takes (any, with ``**kwargs``): anything else is refused, with a
            suggestion (:class:`mushin_box._sweep.validate.SweepKeys`).
        """
        # refused before anything is written
        if on_error not in ("raise", "nan"):
            raise ValueError(f"on_error must be 'raise' or 'nan', got {on_error!r}")
        if resume and working_dir is None:
            raise ValueError("resume=True needs the working_dir of the sweep to resume")
        if launcher_config is not None and launcher is None:
            raise ValueError(
                "launcher_config was given without launcher; name the launcher it configures, "
                "e.g. launcher='submitit_slurm'"
            )
        if not isinstance(cast(Any, launcher), str | None):  # from an untyped caller
            raise TypeError(f"launcher must be a launcher name (str), got {launcher!r}")
        if max_total_seconds is not None and not (max_total_seconds > 0):
            raise ValueError(f"max_total_seconds must be > 0, got {max_total_seconds!r}")
        if launcher == "mushin_slurm" and isinstance(launcher_config, Mapping):
            given = launcher_config.get("additional_parameters")  # the launcher's check, early
            sbatch_options("additional_parameters", given or {})
        if reuse_stale_code and not resume:
            raise ValueError("reuse_stale_code=True reuses completed cells: pass resume=True too")
        if not wait:
            if launcher not in _DETACHABLE:
                raise ValueError(
                    f"wait=False needs a launcher whose jobs outlive this process "
                    f"({' or '.join(map(repr, _DETACHABLE))}), got launcher={launcher!r}: "
                    "pass launcher='mushin_slurm' (with its launcher_config), or drop wait=False"
                )
            launcher_config = {**(launcher_config or {}), "detach": True}
            progress = False
        root = Path(working_dir if working_dir is not None else default_sweep_dir()).resolve()
        self.working_dir = root
        code = code_identity(self.task, config=self.config, extra=(self.pre_call,))
        vault = SecretVault(self.secrets)
        config, grid, task_args = self._hide_and_sweep(vault, sweep_params, overrides, launcher)
        plan = CellPlan(
            working_dir=str(root),
            swept=tuple(grid),
            on_error=on_error,
            resume=resume,
            deadline=_deadline(max_total_seconds, launcher_config),
            code_fingerprint=code.fingerprint,
            run_id=uuid.uuid4().hex,
            code_modules=code.modules,
            reuse_stale_code=reuse_stale_code,
            experiment=experiment_state(self.source, self.task, include=code.files),
        )
        hydra_args = _hydra_overrides(root, plan.swept, task_args, launcher, launcher_config)
        first = check_composes(config, hydra_args + task_args)  # a refusal writes nothing
        check_required(self.task, first)  # nor a value given nowhere: every cell would fail
        if root.is_dir() and not os.access(root, os.W_OK):
            return _read_only_results(root, grid, resume)
        root.mkdir(parents=True, exist_ok=True)
        with manifest.SweepLock(root):  # a refused lock writes no code patch
            plan = attrs.evolve(plan, experiment=keep_patch(root, plan.experiment, code.files))
            launched = launch_cells(
                CellRunner(self.task, plan, pre_call=self.pre_call),
                config,
                grid,
                hydra_args + task_args,
                vault,
                launcher=launcher,
                launcher_config=launcher_config,
                progress=progress,
                first=first,
            )
            error, ended = launched.error, launched.ended
            # re-raised unless on_error="nan" and it only ended cells now recorded as failed
            if error is not None and on_error == "nan" and ended and isinstance(error, Exception):
                warnings.warn(
                    f"cell(s) {', '.join(ended)} ended with their job "
                    f"({type(error).__name__}: {str(error)[:300]}); "
                    "recorded as failed/timeout (on_error='nan'); run again with resume=True",
                    stacklevel=2,
                )
            elif error is not None:
                raise error
        if not wait:
            return SweepHandle(root)
        # lazy: the results bring xarray, numpy and pandas, which only a finished sweep needs
        from mushin_box._results.experiment import load_sweep

        records = launched.records  # None: the launch could not read them
        records = records if records is not None else list(manifest.cell_records(root))
        said = launched.ended if launched.error is not None else ()
        _warn_unfinished(plan.run_id, records, said=said)
        return load_sweep(root, records, metrics=launched.metrics)

    def _hide_and_sweep(
        self,
        vault: SecretVault,
        sweep_params: Mapping[str, Any],
        overrides: Sequence[str] | None,
        launcher: str | None,
    ) -> tuple[Any, dict[str, list[Any]], list[str]]:
        """Hide secret values in the vault; return the config, the grid and the task's
        overrides (those from ``sweep_params``, then the user's raw ones)."""
        # secret values travel in the environment, never in a file (mushin_box._core.secrets)
        # (config defaults first: an override's value for the same path must win)
        config = vault.hide_in_config(self.config, plain=launcher not in (None, "basic"))
        keys = validate.SweepKeys(self.task, self.config)  # a name the task can't take is refused
        grid: dict[str, list[Any]] = {}
        out: list[str] = []
        for name, value in sweep_params.items():
            swept = list(cast("multirun[Any]", value)) if isinstance(value, multirun) else None
            if swept is not None and vault.hide(name, swept) != swept:
                raise sweep_error(name)  # said first: whatever the name, never swept
            # a task parameter the config leaves out, a Trainer argument left at its
            # default, a **kwargs name: new keys, which Hydra adds with '+'
            add = keys.needs_add(name)
            if swept is not None:
                if any(isinstance(v, Mapping) for v in swept):
                    raise TypeError(
                        f"{name}={value!r}: a dict cannot be one value of a sweep (its cells "
                        "could be neither named nor laid on a grid axis): sweep its keys "
                        f"instead, e.g. {name}.KEY=multirun([...]); a dict outside multirun "
                        f"({name}={{...}}) is one value for every cell"
                    )
                grid[name] = swept
                out.append(format_sweep(name, swept, add=add))
            elif isinstance(value, hydra_list):
                one = list(cast("hydra_list[Any]", value))
                out.append(format_override(name, vault.hide(name, one), add=add))
            elif isinstance(value, list | tuple):
                raise TypeError(
                    f"{name}={value!r}: wrap a sweep in multirun([...]) or a single list value "
                    "in hydra_list([...]) (both importable from mushin_box)"
                )
            else:
                out.append(format_override(name, vault.hide(name, value), add=add))
        raw = list(overrides or [])
        keys.check_raw(raw)
        user = vault.hide_in_overrides(raw, is_config_key=_is_config_key)
        grid.update(validate.user_sweeps(user))  # "x=1,2" in raw overrides is a grid axis too
        return config, grid, out + user


def _is_config_key(key: str) -> bool:
    return not validate.is_config_group(key)  # a config value, not a config group


def _read_only_results(root: Path, grid: Mapping[str, list[Any]], resume: bool) -> xr.Dataset:
    """A sweep on a read-only mount: its results when every cell of ``grid`` completed
    (fingerprints are not re-checked: no cell can start), else a PermissionError."""
    # lazy: the results bring xarray, numpy and pandas, which only a finished sweep needs
    from mushin_box._results.experiment import load_experiment

    cells = manifest.manifest_from_cells(root)["cells"]
    todo = [
        ",".join(f"{k}={v}" for k, v in zip(grid, combo, strict=True))
        for combo in itertools.product(*grid.values())
        if cells.get(manifest.combo_id(dict(zip(grid, combo, strict=True))), {}).get("status")
        != "completed"
    ]
    if not resume or todo:
        raise PermissionError(
            f"{root} is read-only: cannot run {', '.join(todo) or 'the sweep'}; run it where "
            "the sweep directory is writable, or read its results with load_experiment"
        )
    warnings.warn(
        f"{root} is read-only and every cell completed: nothing needs to run (the results "
        "are returned as recorded)",
        stacklevel=3,
    )
    return load_experiment(root)


def _warn_unfinished(
    run_id: str,
    records: Sequence[tuple[Path, dict[str, Any]]],
    said: Sequence[str] = (),
) -> None:
    """One ``CellWarning`` per cell of this run that failed or was skipped, and why: a
    notebook user sees warnings, not status files. Emitted by the driver from the sidecars,
    so that every launcher says the same, once; ``said``: cells named already."""
    for cell_dir, record in records:
        state, cell = record.get("status"), cell_dir.name
        if record.get("run_id") != run_id or cell in said:
            continue
        if state == "skipped":
            reason = record.get("reason")
            why = (
                "max_total_seconds ran out before it started"
                if reason == OUT_OF_TIME
                else f"skipped ({reason})"
            )
            message = f"cell {cell}: skipped: {why}; run again with resume=True to run it"
        elif state in ("failed", "timeout", "cancelled"):
            found = record.get("error")
            error: dict[str, Any] = cast(Any, found) if isinstance(found, dict) else {}
            text = str(error.get("message") or record.get("reason") or "").splitlines()
            detail = f"{error.get('type', state)}: {text[0][:300] if text else ''}"
            trace = f", traceback in {cell}/{ERROR_FILE}" if error.get("file") else ""
            message = (
                f"cell {cell}: {state} ({detail}); NaN in the results{trace}; run again "
                "with resume=True"
            )
        else:
            continue
        warnings.warn(message, CellWarning, stacklevel=3)


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
    ids = manifest.grid_ids(grid) if running else set[str]()
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
        entries: list[dict[str, Any]] = [
            e for e in submission.get("jobs", ()) if isinstance(e, dict)
        ]
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
    metrics: Mapping[Path, Any]


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
    done = Prefiltered()
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
        metrics = done.metrics
        untouched = {d.name: r for d, r in records if d in metrics}  # reused: nothing ran
        # nothing launched: the manifest open_sweep wrote from `records` still holds
        written = records if done.nothing_to_launch else None
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
