# SPDX-License-Identifier: MIT
"""One sweep cell = one Hydra job: the picklable task runner and its sidecars.

The runner is what Hydra (or submitit, in another process or on another node) calls for
each job. It decides reuse/skip/run from what is on disk, runs the task, and records the
outcome in the cell directory. It only reads what the driver shipped inside it
(:class:`CellPlan`) and what is on disk: nothing reaches back to the driver process.

Design note: ``CellRunner.__call__`` is a short list of steps. It gathers the facts
(``_look``), hands them to the pure :func:`mushin_box._sweep.decide.decide` (``_decide``),
and acts: a reused cell returns its metrics, a skipped one is recorded (``_skip``), a run
counts its attempt and records the start (``_start``), then runs the task and records the
outcome (``_run``). The task is called through ``zen_with_resume``, so ``mushin_resume`` is
filled by the same function as for a task wrapped with ``resumable``, and the attempt is
counted by the same counter (``.mushin/attempt.json``); the status's ``attempt`` is a copy.

After the task, the metrics are written, then the "completed" status, then the provenance is
completed: a process killed in between has its cell run again, so that window is kept short.
Such a rerun continues from a finished fit that logs nothing; metrics it no longer returns
keep their values from the previous attempt (:func:`_carry_over`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import inspect
import os
import re
import socket
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.jobdir import mushin_dir
from mushin_box._core.layout import (
    ABORT_FILE,
    ERROR_FILE,
    METRICS_FILE,
    PROVENANCE_FILE,
    STALE_CHECKPOINTS_DIR,
    STATUS_FILE,
)
from mushin_box._core.redact import redact_exception, redact_secret_values
from mushin_box._core.sidecars import (
    SidecarWarning,
    canonical_dumps,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from mushin_box._sweep.decide import Decision, decide
from mushin_box._train.resume import next_attempt, set_aside_checkpoints, zen_with_resume
from mushin_box._train.seeding import global_rank_from_env

__all__ = [
    "CellPlan",
    "CellRunner",
    "cell_key",
    "code_fingerprint",
    "config_fingerprint",
    "is_multi_rank",
]

SCHEMA = 1

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_ADD_PREFIX = re.compile(r"(^|,)\+{1,2}")


def cell_key(override_dirname: str) -> str:
    """Directory name of a cell from Hydra's ``override_dirname`` of its swept overrides.

    Readable where it can be (``lr=0.1,seed=2``); characters that are unsafe in paths
    are replaced and a short hash of the exact text keeps distinct cells distinct.
    Registered as the OmegaConf resolver ``mushin_cell`` (see ``hydra.sweep.subdir``).

    Examples
    --------
    >>> cell_key("lr=0.1,seed=2")
    'lr=0.1,seed=2'
    >>> cell_key("name='a b'")
    'name=_a_b_-ab4dba41'
    """
    if not override_dirname:
        return "cell"
    # Hydra keeps the '+'/'++' of added keys in override_dirname; the key is what matters
    readable = _ADD_PREFIX.sub(r"\1", override_dirname)
    safe = _UNSAFE.sub("_", readable)
    if safe == readable and len(safe) <= 96 and not safe.startswith("."):
        return safe
    digest = hashlib.sha256(override_dirname.encode("utf-8")).hexdigest()[:8]
    return f"{safe[:80]}-{digest}"


def _current_cell_key() -> str:
    # read through HydraConfig rather than interpolating ${hydra.job.override_dirname}:
    # an interpolation would resolve `${` inside swept string values a second time
    from hydra.core.hydra_config import HydraConfig

    return cell_key(str(HydraConfig.get().job.override_dirname))


def _register_resolver() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("mushin_cell"):
        OmegaConf.register_new_resolver("mushin_cell", _current_cell_key)


_register_resolver()


def is_multi_rank(environ: Mapping[str, str] | None = None) -> bool:
    """Is this process one of several ranks launched for one cell (SLURM tasks, torchrun)?"""
    env = os.environ if environ is None else environ
    for name in ("SLURM_NTASKS", "WORLD_SIZE"):
        try:
            if int(env.get(name, "1")) > 1:
                return True
        except ValueError:
            continue
    return False


def code_fingerprint(task: Callable[..., Any]) -> str:
    """sha256 of the task's source (its module and name when the source is unavailable)."""
    fn = inspect.unwrap(task)
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _plain_config(cfg: Any) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    except Exception:  # an interpolation that only resolves later: hash it unresolved
        return OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)


def config_fingerprint(cfg: Any) -> str:
    """sha256 of the canonical JSON of the job's resolved config, secrets redacted (a new
    token is not a new experiment, and no hash of a secret is written down)."""
    from mushin_box._core.redact import redact

    plain = redact(_plain_config(cfg))
    try:
        data = canonical_dumps(plain)
    except (TypeError, ValueError):
        from omegaconf import OmegaConf

        data = OmegaConf.to_yaml(cfg).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def slurm_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """This process's SLURM job as squeue/scancel name it: ``<array job>_<task>`` for an
    array task (its plain SLURM_JOB_ID of task 0 is the whole array's id), else the id."""
    env = os.environ if environ is None else environ
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return env.get("SLURM_JOB_ID")


def _plain_value(value: Any) -> Any:
    """A config value (possibly a ListConfig/DictConfig) as plain python."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _plain_metric(value: Any, name: str) -> Any:
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if hasattr(value, "tolist"):  # torch tensors, numpy arrays and scalars
        if hasattr(value, "detach"):
            value = value.detach().cpu()
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_plain_metric(v, name) for v in value]
    raise TypeError(
        f"metric {name!r} has type {type(value).__name__}; a task must return a mapping of "
        "metric names to numbers, strings or (nested) lists of numbers"
    )


def metrics_from_return(value: Any) -> dict[str, Any]:
    """The task's return value as the metrics sidecar's content."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"the task returned {type(value).__name__}; return a dict of metrics "
            "(e.g. {'loss': 0.1}) or None"
        )
    return {str(k): _plain_metric(v, str(k)) for k, v in value.items()}


def _carry_over(
    cell_dir: Path, metrics: dict[str, Any], continues: bool
) -> tuple[dict[str, Any], list[str]]:
    """``metrics`` plus the previous attempt's values of the names it lacks, and those names.

    Design note: an attempt that continues the cell (same fingerprints) and returns fewer
    metrics than are on disk is most likely a fit resumed with nothing left to train,
    which logs nothing (``MetricsCallback.final_metrics`` is the task-side fix). Its
    result must not replace good metrics of the same experiment with fewer: the missing
    names keep their values, with a warning, and the status lists them
    (``metrics_carried_over``). An attempt that starts afresh carries nothing: an earlier
    run's metrics were set aside at its start (:func:`_set_aside_metrics`).
    """
    if not continues:
        return metrics, []
    previous = read_json(cell_dir / METRICS_FILE, default={})
    missing = sorted(k for k in previous if k not in metrics) if isinstance(previous, dict) else []
    if not missing:
        return metrics, []
    warnings.warn(
        f"cell {cell_dir.name}: this attempt returned no {', '.join(missing)}; keeping the "
        f"previous attempt's values from {METRICS_FILE} (a fit resumed with nothing left to "
        "train logs nothing: return MetricsCallback.final_metrics(trainer))",
        stacklevel=4,
    )
    return {**metrics, **{k: previous[k] for k in missing}}, missing


def _set_aside_metrics(cell_dir: Path, tag: str) -> None:
    """Move an earlier run's metrics beside its set-aside checkpoints (a fresh start)."""
    path = cell_dir / METRICS_FILE
    if path.is_file():
        target = mushin_dir(cell_dir) / STALE_CHECKPOINTS_DIR / tag / METRICS_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)


@attrs.frozen
class CellPlan:
    """What the driver decided for the whole sweep; shipped (pickled) with the runner."""

    working_dir: str
    swept: tuple[str, ...]
    on_error: str = "raise"
    resume: bool = False
    deadline: float | None = None  # absolute time.time(); one budget for every process
    code_fingerprint: str = ""
    run_id: str = ""


@attrs.frozen
class _Cell:
    """What the runner knows of one cell before it decides (gathered by ``_look``)."""

    directory: Path
    root: Path  # the sweep's working directory
    fingerprints: dict[str, str]
    previous: dict[str, Any]  # its status record from an earlier attempt, else {}
    base: dict[str, Any]  # combo, cell and fingerprints: the start of every status record


def _provenance_readable(cell_dir: Path) -> bool:
    """Is the cell's provenance record whole? If not, warn: the cell runs again, which is
    the only way to rebuild a record that tells the truth about the run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SidecarWarning)  # one warning, said below
        record = read_json(cell_dir / PROVENANCE_FILE)
    if isinstance(record, dict) and {"reproducibility", "run"} <= set(record):
        return True
    warnings.warn(
        f"cell {cell_dir.name}: its {PROVENANCE_FILE} is unreadable; running it again to "
        "rebuild it instead of reusing it",
        stacklevel=5,  # at the caller of run (through Hydra): like the fingerprint warning
    )
    return False


def _restart_count() -> int:
    """SLURM's restart count of this job: above 0, the job was requeued."""
    return int(os.environ.get("SLURM_RESTART_COUNT") or 0)


class CellRunner:
    """The Hydra task function of a sweep: run one cell and record it (see module doc)."""

    def __init__(
        self,
        task: Callable[..., Any],
        plan: CellPlan,
        *,
        pre_call: Callable[[Any], Any] | None = None,
    ) -> None:
        self.task = task
        self.plan = plan
        self.pre_call = pre_call

    # -- helpers -------------------------------------------------------------------------
    def _status(self, cell_dir: Path, **fields: Any) -> dict[str, Any]:
        """Write the cell's status record (rank 0 only) and return it."""
        record = {"schema": SCHEMA, "run_id": self.plan.run_id, **fields}
        if global_rank_from_env() == 0:  # one writer per cell; the other ranks only read
            write_json_atomic(cell_dir / STATUS_FILE, record)
        return record

    def __call__(self, cfg: Any) -> dict[str, Any] | None:
        """Run one cell: look at it, decide, then reuse, skip or run it (see module doc)."""
        cell = self._look(cfg)
        decision, reused = self._decide(cell)
        if decision.action == "reuse":
            return reused  # nothing runs, nothing is rewritten
        record = dict(cell.base)
        if decision.rerun_reason:
            record["rerun_reason"] = decision.rerun_reason
        if decision.action == "skip":
            self._skip(cell, record, decision.reason)
            return None
        running, t0 = self._start(cfg, cell, record, decision)
        return self._run(cfg, cell, running, t0, decision.continue_from_checkpoint)

    def _look(self, cfg: Any) -> _Cell:
        """Gather what the decision needs: the cell's directory, fingerprints, last status."""
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf

        cell_dir = Path(HydraConfig.get().runtime.output_dir)
        combo = {k: _plain_value(OmegaConf.select(cfg, k)) for k in self.plan.swept}
        fingerprints = {"config": config_fingerprint(cfg), "code": self.plan.code_fingerprint}
        image = os.environ.get("MUSHIN_SIF_SHA256")
        if image:  # ranks in an Apptainer image: a different image is a different cell
            fingerprints["image"] = image
        previous = read_json(cell_dir / STATUS_FILE, default={})
        if not isinstance(previous, dict):
            previous = {}
        base = {"combo": combo, "cell": cell_dir.name, "fingerprints": fingerprints}
        root = Path(self.plan.working_dir)
        return _Cell(cell_dir, root, fingerprints, previous, base)

    def _decide(self, cell: _Cell) -> tuple[Decision, dict[str, Any] | None]:
        """Decide reuse/skip/run (:func:`decide`), emit its warnings; a reuse reads metrics."""
        multi_rank = is_multi_rank()

        def judge(metrics_readable: bool) -> Decision:
            return decide(
                cell.previous,
                cell.fingerprints,
                cell=cell.directory.name,
                run_id=self.plan.run_id,
                resume=self.plan.resume,
                aborted=(cell.root / ABORT_FILE).exists(),
                deadline=self.plan.deadline,
                now=time.time(),
                multi_rank=multi_rank,
                restart_count=_restart_count() if multi_rank else 0,
                metrics_readable=metrics_readable,
            )

        decision, metrics = judge(True), None
        if decision.action == "reuse":
            metrics = read_json(cell.directory / METRICS_FILE)
            if not isinstance(metrics, dict) or not _provenance_readable(cell.directory):
                decision, metrics = judge(False), None  # unreadable: the cell runs again
        for message in decision.warnings:
            warnings.warn(message, stacklevel=3)  # at the caller of __call__
        return decision, metrics

    def _skip(self, cell: _Cell, record: dict[str, Any], reason: str) -> None:
        """Record the cell as skipped; its attempt count stays where it was."""
        attempt = cell.previous.get("attempt", 0)
        self._status(cell.directory, **record, status="skipped", reason=reason, attempt=attempt)

    def _start_key(self) -> str | None:
        """This start's identity, the same on every rank of a multi-rank cell (else None)."""
        if not is_multi_rank():
            return None
        restarts = [
            os.environ.get(name) or "0"
            for name in ("SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
        ]
        return ":".join([self.plan.run_id, slurm_job_id() or "-", *restarts])

    def _start(
        self, cfg: Any, cell: _Cell, record: dict[str, Any], decision: Decision
    ) -> tuple[dict[str, Any], float]:
        """Count the attempt, set stale checkpoints aside, record the start (status and
        provenance); return the running status record and the start on the monotonic clock."""
        known = int(cell.previous.get("attempt", 0))  # a status from before attempt.json
        attempt = next_attempt(cell.directory, start=self._start_key(), known=known)
        if not decision.continue_from_checkpoint and global_rank_from_env() == 0:
            # a fresh start: an earlier run's checkpoints (maybe of another config) must
            # not be picked up by this attempt or by a later resume; nor its metrics be
            # carried over into this run's (_carry_over)
            tag = self.plan.run_id[:12] or "earlier"
            set_aside_checkpoints(cell.directory, tag)
            _set_aside_metrics(cell.directory, tag)
        started = _now()
        t0 = time.monotonic()
        running = {
            **record,
            "attempt": attempt,
            "started": started,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "slurm_job_id": slurm_job_id(),
            "previous_fingerprints": decision.previous_fingerprints,
        }
        self._status(cell.directory, **running, status="running")
        if global_rank_from_env() == 0:
            self._write_provenance(cfg, cell.directory, cell.fingerprints)
        return running, t0

    def _run(
        self, cfg: Any, cell: _Cell, running: dict[str, Any], t0: float, continues: bool
    ) -> dict[str, Any] | None:
        """Run the task and record the outcome: its metrics and "completed", or the failure
        (and, under ``on_error="raise"``, the sweep's abort file before re-raising)."""
        cell_dir = cell.directory
        rank0 = global_rank_from_env() == 0
        ended, t_end = "", 0.0
        try:
            try:
                result = self._call_task(cfg, cell_dir, running["attempt"], continues)
            finally:  # the task's end: the status and the provenance both say this one
                ended, t_end = _now(), time.monotonic()
            metrics = metrics_from_return(result)
        except BaseException as exc:
            if rank0:
                self._record_seeds(cell_dir, ended, t_end)
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not recorded
                raise
            self._record_failure(cell_dir, running, exc, t_end - t0)
            if self.plan.on_error == "raise":
                self._abort(cell, exc)
                redact_exception(exc)  # it leaves the cell: its text is written elsewhere too
                raise
            return None
        # metrics, then the status, then the rest: a kill before the "completed" status runs
        # the cell again, so nothing else is written in between (_record_seeds took ~10 ms)
        carried: list[str] = []
        if rank0:
            metrics, carried = _carry_over(cell_dir, metrics, continues)
            write_json_atomic(cell_dir / METRICS_FILE, metrics)
        self._status(
            cell_dir,
            **running,
            status="completed",
            ended=ended,
            duration_s=round(t_end - t0, 3),
            **({"metrics_carried_over": carried} if carried else {}),
        )
        if rank0:
            self._record_seeds(cell_dir, ended, t_end)
        return metrics

    def _abort(self, cell: _Cell, exc: BaseException) -> None:
        """Write the sweep's abort file (rank 0), so that the cells not yet started skip."""
        if global_rank_from_env() == 0:  # the error may quote a secret, as in _record_failure
            record = {"cell": cell.directory.name, "error": redact_secret_values(repr(exc))}
            write_json_atomic(cell.root / ABORT_FILE, record)

    def _write_provenance(self, cfg: Any, cell_dir: Path, fingerprints: dict[str, str]) -> None:
        """Write the cell's provenance record (and its package list) as the task starts.

        ``run.started`` is the ``started`` of the status just written, so both files agree;
        :meth:`_record_seeds` completes the record when the task is done.
        """
        from omegaconf import OmegaConf

        from mushin_box._provenance.files import write_provenance
        from mushin_box._provenance.full import full_provenance, launcher_from_hydra
        from mushin_box._provenance.record import basic_provenance

        config = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
        seed_base = OmegaConf.select(cfg, "seed", default=None)
        status = read_json(cell_dir / STATUS_FILE, default={})
        started = status.get("started") if isinstance(status, dict) else None
        # the task's duration, measured on this process's monotonic clock (_record_seeds)
        self.__dict__.setdefault("_provenance_clocks", {})[str(cell_dir)] = time.monotonic()
        try:
            record = full_provenance(
                task=self.task,
                config=config,
                fingerprints=fingerprints,
                seed_base=seed_base,
                launcher=launcher_from_hydra(),
                started=started if isinstance(started, str) else None,
            )
        except ValueError as exc:  # a malformed launcher environment: keep the basic record
            warnings.warn(
                f"cell {cell_dir.name}: recording the basic provenance only ({exc})", stacklevel=2
            )
            record = basic_provenance(
                task=self.task, config=config, fingerprints=fingerprints, seed_base=seed_base
            )
        write_provenance(cell_dir, record)

    def _record_seeds(self, cell_dir: Path, ended: str, end: float) -> None:
        """Complete the cell's provenance once the task has returned or raised: the per-rank
        seeds its ranks recorded, ``run.ended``/``run.duration_s`` (the task's end: ``ended``,
        and ``end`` on the monotonic clock) and ``run.devices`` (the task has usually
        imported torch by now)."""
        from mushin_box._provenance.files import write_provenance
        from mushin_box._provenance.full import finish_record, record_with_seeds
        from mushin_box._train.seeding import seed_records

        t0 = self.__dict__.get("_provenance_clocks", {}).pop(str(cell_dir), None)
        duration = round(end - t0, 3) if t0 is not None else None
        try:
            record = read_json(cell_dir / PROVENANCE_FILE)
            if not isinstance(record, dict):
                return
            records = seed_records(cell_dir)
            if records:
                record = record_with_seeds(record, records)
            write_provenance(cell_dir, finish_record(record, ended=ended, duration_s=duration))
        except (OSError, ValueError, KeyError) as exc:  # never fail a cell over provenance
            warnings.warn(f"cell {cell_dir.name}: provenance not completed ({exc})", stacklevel=2)

    def _call_task(self, cfg: Any, cell_dir: Path, attempt: int, continues: bool) -> Any:
        """Call the task through zen, ``mushin_resume`` filled by ``call_with_resume``."""
        # resolve_pre_call=False: zen's in-place OmegaConf.resolve would turn an escaped
        # literal "\\${x}" in a swept string into an interpolation that the field access
        # then resolves a second time
        return zen_with_resume(
            self.task,
            directory=cell_dir,
            continues=continues,
            attempt=attempt,
            pre_call=self.pre_call,
            resolve_pre_call=False,
        )(cfg)

    def _record_failure(
        self, cell_dir: Path, running: dict[str, Any], exc: BaseException, duration: float
    ) -> None:
        """Record a failed attempt (rank 0): the redacted traceback and a "failed" status."""
        if global_rank_from_env() != 0:
            return
        # an exception may quote a secret (e.g. "invalid token ..."): the values of
        # secret-looking environment variables, sweep secrets included (whatever their
        # length), are replaced; the manifest's row copies this status's error
        text = redact_secret_values("".join(traceback.format_exception(exc)))
        write_text_atomic(cell_dir / ERROR_FILE, text)
        message = redact_secret_values(str(exc))
        self._status(
            cell_dir,
            **running,
            status="failed",
            ended=_now(),
            duration_s=round(duration, 3),
            error={"type": type(exc).__qualname__, "message": message[:2000], "file": ERROR_FILE},
        )
