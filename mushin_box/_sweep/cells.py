# SPDX-License-Identifier: MIT
"""One sweep cell = one Hydra job: the picklable task runner and its sidecars.

The runner is what Hydra (or submitit, in another process or node) calls for each job; it
reads only the :class:`CellPlan` shipped inside it and the disk. ``__call__`` gathers the
facts (``_look``), asks the pure :func:`mushin_box._sweep.decide.decide`, and acts: a reuse
returns the metrics, a skip is recorded, a run records its start, calls the task through
``zen_with_resume`` (``mushin_resume``, the attempt counter) and records the outcome: the
metrics, then "completed", then the provenance (a kill in between runs the cell again, so
that window is kept short).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, OmegaConf

from mushin_box._core import durable, layout, sidecars
from mushin_box._core.envstate import environ_restored
from mushin_box._core.jobdir import mushin_dir
from mushin_box._core.redact import redact, redact_text
from mushin_box._provenance.elastic import earlier_s, restart_count, restarts, spent
from mushin_box._provenance.full import TRAINER_LIMIT_KEYS, split_config
from mushin_box._provenance.ranks import restart_cause, write_rank_end, write_rank_runtime
from mushin_box._slurm.jobs import slurm_job_id
from mushin_box._slurm.torchrun import slurm_rank_logs
from mushin_box._sweep import cellfiles
from mushin_box._sweep.decide import LIMIT_FREE, SHAPE_FREE, Decision, decide
from mushin_box._sweepdir.liveness import owner_fields
from mushin_box._train import resume
from mushin_box._train.seeding import global_rank_from_env
from mushin_box._train.signals import Terminated, sigterm_raises

SCHEMA = 1

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_ADD_PREFIX = re.compile(r"(^|,)\+{1,2}")


def cell_key(override_dirname: str) -> str:
    """Directory name of a cell from Hydra's ``override_dirname`` of its swept overrides
    (the resolver ``mushin_cell``): readable where it can be; otherwise unsafe characters
    replaced and a short hash of the exact text, so that distinct cells stay distinct.

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


if not OmegaConf.has_resolver("mushin_cell"):  # the cell's directory name
    # read through HydraConfig rather than interpolating ${hydra.job.override_dirname}:
    # an interpolation would resolve `${` inside swept string values a second time
    OmegaConf.register_new_resolver(
        "mushin_cell", lambda: cell_key(str(HydraConfig.get().job.override_dirname))
    )


def is_multi_rank(environ: Mapping[str, str] | None = None) -> bool:
    """Is this process one of several ranks of one cell? Only a per-rank variable beside a
    world size above 1 says so: a driver under ``salloc -n 4`` is one process.

    >>> is_multi_rank({"SLURM_NTASKS": "4"})  # the driver, under salloc -n 4
    False
    >>> is_multi_rank({"SLURM_NTASKS": "4", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0"})
    True
    >>> is_multi_rank({"WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    True
    """
    env = os.environ if environ is None else environ

    def above_one(name: str) -> bool:
        try:
            return int(env.get(name) or "1") > 1
        except ValueError:
            return False

    if env.get("SLURM_PROCID") and env.get("SLURM_STEP_ID") and above_one("SLURM_NTASKS"):
        return True  # an srun task of a step with several
    ranked = ("RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", layout.GLOBAL_RANK_ENV)
    return above_one("WORLD_SIZE") and any(env.get(name) for name in ranked)


def cell_fingerprints(config: str, plan: CellPlan) -> dict[str, str]:
    """A cell's fingerprints; in an Apptainer image, another image is another cell."""
    image = os.environ.get("MUSHIN_SIF_SHA256")
    return {"config": config, "code": plan.code_fingerprint, **({"image": image} if image else {})}


def _plain_config(cfg: Any) -> Any:
    try:
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    except Exception:  # an interpolation that only resolves later: hash it unresolved
        return OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)


def config_fingerprint(cfg: Any, plain: Any = None) -> str:
    """sha256 of the canonical JSON of the job's resolved config, secrets redacted (a new
    token is not a new experiment, and no hash of a secret is written down)."""
    found = plain_fingerprint(_plain_config(cfg) if plain is None else plain)
    return found or hashlib.sha256(OmegaConf.to_yaml(cfg).encode("utf-8")).hexdigest()


def experiment_fingerprints(plain: Any) -> tuple[str | None, str | None, dict[str, Any]]:
    """The fingerprints of a plain config without its run-shape keys, and without those and
    its Trainers' limits, and the limits (:mod:`.decide`)."""
    shaped = split_config(plain)[0]
    kept, limits = split_config(shaped, (), TRAINER_LIMIT_KEYS)
    return plain_fingerprint(shaped), plain_fingerprint(kept), limits


def plain_fingerprint(plain: Any) -> str | None:
    """:func:`config_fingerprint` of a plain config; None without canonical JSON (NaN, bytes)."""
    return redacted_fingerprint(redact(plain))


def redacted_fingerprint(redacted: Any) -> str | None:
    """:func:`plain_fingerprint` of a config whose secrets are redacted already."""
    try:
        data = sidecars.canonical_dumps(redacted)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(data).hexdigest()


def _swept_value(cfg: Any, key: str, choices: Mapping[str, Any]) -> Any:
    """A cell's value of a swept key, as the grid holds it: a config group's option name
    (``model=small``, from Hydra's ``runtime.choices``), else the config's value."""
    group = key.replace(".", "/")
    if group in choices:
        return choices[group]
    value = OmegaConf.select(cfg, key)
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


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
    #: the modules the code fingerprint covers (name -> short sha256), for the warnings
    code_modules: Mapping[str, str] = attrs.field(factory=dict)
    #: reuse completed cells whose code fingerprint changed (recorded: ``reused_despite``)
    reuse_stale_code: bool = False
    #: the experiment's file and git state (a plan pickled before it: ``getattr``)
    experiment: Mapping[str, Any] | None = None


@attrs.frozen
class _Cell:
    """What the runner knows of one cell before it decides (gathered by ``_look``)."""

    directory: Path
    root: Path  # the sweep's working directory
    fingerprints: dict[str, str]
    previous: dict[str, Any]  # its status record from an earlier attempt, else {}
    base: dict[str, Any]  # combo, cell and fingerprints: the start of every status record


def _extension(cell: _Cell) -> dict[str, list[Any]]:
    """``{limit: [before, now]}`` of the training limits this attempt raises: ``extended``."""
    was, now = cell.previous.get("limits"), cell.base.get("limits") or {}
    was = was if isinstance(was, dict) else {}
    return {k: [was.get(k), now.get(k)] for k in sorted({*was, *now}) if was.get(k) != now.get(k)}


def _provenance_readable(cell_dir: Path) -> bool:
    """Is the cell's provenance record whole? If not, warn: only running the cell again
    rebuilds a record that tells the truth."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sidecars.SidecarWarning)  # one warning, said below
        record = sidecars.read_json(cell_dir / layout.PROVENANCE_FILE)
    if isinstance(record, dict) and {"reproducibility", "run"} <= set(record):
        return True
    warnings.warn(
        f"cell {cell_dir.name}: its {layout.PROVENANCE_FILE} is unreadable; running it again "
        "to rebuild it instead of reusing it",
        stacklevel=5,  # at the caller of run (through Hydra): like the fingerprint warning
    )
    return False


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
        self._cell_failed = False  # the last cell failed (recorded, under on_error="nan" too)

    def _status(self, cell_dir: Path, **fields: Any) -> dict[str, Any]:
        """Write the cell's status record (rank 0 only) and return it."""
        record = {"schema": SCHEMA, "run_id": self.plan.run_id, **fields}
        if global_rank_from_env() == 0:  # one writer per cell; the other ranks only read
            sidecars.write_json_atomic(cell_dir / layout.STATUS_FILE, record)
        return record

    def __call__(self, cfg: Any) -> dict[str, Any] | None:
        """Run one cell, then put back ``os.environ`` and end its local DDP job: a cell
        in the sweep's own process starts from the same environment as the first one."""
        self._cell_failed = False
        with environ_restored(), durable.deferred():  # the bookkeeping's fsyncs: at commits
            try:
                result = self._cell(cfg)
            finally:
                ddp = sys.modules.get("mushin_box._train.ddp")  # loaded: a cell used it
                if ddp is not None:
                    ddp.end_local_job()
        # a failed cell in a mushin torchrun worker, after the restore: the worker exits 1
        if self._cell_failed and layout.TORCHRUN_AGENT_ENV in os.environ:
            os.environ[layout.CELL_FAILED_ENV] = "1"
        return result

    def _cell(self, cfg: Any) -> dict[str, Any] | None:
        """Look at the cell, decide, then reuse, skip or run it (see module doc)."""
        cell = self._look(cfg)
        decision, reused = self._decide(cell)
        if decision.action == "reuse":
            if decision.reused_despite and global_rank_from_env() == 0:  # the status says so
                despite = {**cell.previous, "reused_despite": list(decision.reused_despite)}
                # its run id kept
                sidecars.write_json_atomic(cell.directory / layout.STATUS_FILE, despite)
            return reused  # nothing runs; only a reuse despite a change is written down
        if decision.continue_from_checkpoint:  # refused before anything is written
            resume.refuse_shortened(cell.directory, cell.base.get("limits") or {})
        record = dict(cell.base)
        if decision.rerun_reason:
            record["rerun_reason"] = decision.rerun_reason
        if decision.action == "skip":  # its attempt count stays where it was
            attempt = cell.previous.get("attempt", 0)
            reason = decision.reason
            self._status(cell.directory, **record, status="skipped", reason=reason, attempt=attempt)
            return None
        # from the "running" status on, SIGTERM ends the cell "cancelled" (signals.py)
        with sigterm_raises():
            try:
                failure = cellfiles.take_failure(cell.directory)  # Hydra's .hydra/*.yaml
                if failure is not None:
                    raise failure
                running, t0 = self._start(cfg, cell, record, decision)
            except OSError as exc:  # a full disk, a quota: the cell could not even start
                attempt = int(cell.previous.get("attempt", 0)) + 1
                running = {**record, "attempt": attempt, **owner_fields()}
                return self._failed(cell, running, exc, 0.0)
            return self._run(cfg, cell, running, t0, decision.continue_from_checkpoint)

    def _look(self, cfg: Any) -> _Cell:
        """Gather what the decision needs: the cell's directory, fingerprints, last status."""
        cell_dir = Path(HydraConfig.get().runtime.output_dir)
        choices = HydraConfig.get().runtime.choices
        combo = {k: _swept_value(cfg, k, choices) for k in self.plan.swept}
        plain = _plain_config(cfg)  # once: the three fingerprints below read it
        fingerprints = cell_fingerprints(config_fingerprint(cfg, plain), self.plan)
        previous = sidecars.read_json(cell_dir / layout.STATUS_FILE, default={})
        previous = previous if isinstance(previous, dict) else {}
        base = {"combo": combo, "cell": cell_dir.name, "fingerprints": fingerprints}
        base[SHAPE_FREE], base[LIMIT_FREE], limits = experiment_fingerprints(plain)
        if limits:
            base["limits"] = limits
        return _Cell(cell_dir, Path(self.plan.working_dir), fingerprints, previous, base)

    def _decide(self, cell: _Cell) -> tuple[Decision, dict[str, Any] | None]:
        """Decide reuse/skip/run (:func:`decide`), emit its warnings; a reuse reads metrics."""
        multi_rank = is_multi_rank()
        restarts, restarted_by = restart_count(os.environ)

        def judge(metrics_readable: bool) -> Decision:
            return decide(
                cell.previous,
                cell.fingerprints,
                cell=cell.directory.name,
                run_id=self.plan.run_id,
                resume=self.plan.resume,
                aborted=(cell.root / layout.ABORT_FILE).exists(),
                deadline=self.plan.deadline,
                now=time.time(),
                multi_rank=multi_rank,
                restart_count=restarts if multi_rank else 0,
                restarted_by=restarted_by,
                metrics_readable=metrics_readable,
                reuse_stale_code=self.plan.reuse_stale_code,
                code_modules=self.plan.code_modules,
                shape_free=cell.base.get(SHAPE_FREE),
                limit_free=cell.base.get(LIMIT_FREE),
            )

        decision, metrics = judge(True), None
        if decision.action == "reuse":
            metrics = sidecars.read_json(cell.directory / layout.METRICS_FILE)
            if not isinstance(metrics, dict) or not _provenance_readable(cell.directory):
                decision, metrics = judge(False), None  # unreadable: the cell runs again
        for message in decision.warnings:
            warnings.warn(message, stacklevel=3)  # at the caller of __call__
        return decision, metrics

    def _start(
        self, cfg: Any, cell: _Cell, record: dict[str, Any], decision: Decision
    ) -> tuple[dict[str, Any], float]:
        """Count the attempt, set stale checkpoints aside, record the start (status and
        provenance); return the running status record and the start on the monotonic clock."""
        start = None  # this start's identity, the same on every rank of a multi-rank cell
        if is_multi_rank():
            counts = [
                os.environ.get(name) or "0"
                for name in ("SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
            ]
            start = ":".join([self.plan.run_id, slurm_job_id() or "-", *counts])
        known = int(cell.previous.get("attempt", 0))  # a status from before attempt.json
        attempt = resume.next_attempt(cell.directory, start=start, known=known)
        if global_rank_from_env() == 0:
            # a fresh start must not pick up an earlier run's checkpoints or metrics; any
            # start empties the sidecar, which only this attempt's outcome fills again
            tag = self.plan.run_id[:12] or "earlier"
            if not decision.continue_from_checkpoint:
                resume.set_aside_checkpoints(cell.directory, tag)
            cellfiles.set_aside_metrics(cell.directory, tag, decision.continue_from_checkpoint)
        extended = _extension(cell) if decision.extends else None
        earlier = earlier_s(cell.previous, decision.continue_from_checkpoint, self.plan.run_id)
        started = sidecars.timestamp()
        t0 = time.monotonic()
        running = {
            **record,
            "attempt": attempt,
            "started": started,
            **({"earlier_s": earlier} if earlier else {}),
            **restarts(os.environ),
            **owner_fields(),  # who runs it: a later run must not start a second copy
            "logs": slurm_rank_logs(),  # where each SLURM rank writes (mushin-box logs)
            "previous_fingerprints": decision.previous_fingerprints,
            f"previous_{SHAPE_FREE}": decision.previous_shape_free,
            f"previous_{LIMIT_FREE}": decision.previous_limit_free,
            **({"extended": extended} if extended else {}),
        }
        self._status(cell.directory, **running, status="running")
        try:
            # every rank says where it runs: rank 0's record then shows each rank
            write_rank_runtime(cell.directory, rank=global_rank_from_env(), attempt=attempt)
            if global_rank_from_env() == 0:
                cellfiles.start_provenance(
                    self.task,
                    cfg,
                    cell.directory,
                    cell.fingerprints,
                    pre_call=self.pre_call,
                    experiment=getattr(self.plan, "experiment", None),
                    started=started,
                    attempt=attempt,
                    continues=decision.continue_from_checkpoint,
                    extended=extended,
                )
        except Terminated as exc:  # stopped while its start was recorded: not left running
            spent_s = time.monotonic() - t0
            self._cancelled(cell.directory, running, exc, sidecars.timestamp(), spent_s)
            raise
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
                with sigterm_raises():  # SIGTERM ends the cell "cancelled", not mid-write
                    result = self._call_task(cfg, cell_dir, running["attempt"], continues)
            finally:  # the task's end: the status and the provenance both say this one
                ended, t_end = sidecars.timestamp(), time.monotonic()
                self._ended(cell_dir, running, sys.exc_info()[1])
            metrics = cellfiles.metrics_from_return(result)
        except BaseException as exc:
            if rank0:
                cellfiles.finish_provenance(cell_dir, ended, t_end - t0, attempt=running["attempt"])
            if isinstance(exc, Terminated):  # the process ends; resume runs the cell again
                self._cancelled(cell_dir, running, exc, ended, t_end - t0)
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not recorded
                raise
            return self._failed(cell, running, exc, t_end - t0)
        # metrics, then the status, then the rest: a kill before the "completed" status runs
        # the cell again, so nothing else is written in between
        carried: list[str] = []
        try:
            if rank0:
                metrics, carried = cellfiles.carry_over(cell_dir, metrics, continues)
                sidecars.write_json_atomic(cell_dir / layout.METRICS_FILE, metrics)
            durable.commit()  # "completed" on disk: what it vouches for is there already
            self._status(
                cell_dir,
                **running,
                status="completed",
                ended=ended,
                **spent(running, t_end - t0),
                code_modules=dict(self.plan.code_modules),  # a later change names them
                **({"metrics_carried_over": carried} if carried else {}),
                **({"reason": cellfiles.NO_METRICS} if rank0 and continues and not metrics else {}),
            )
        except OSError as exc:  # a full disk: the result can't be kept, so the cell failed
            return self._failed(cell, running, exc, t_end - t0)
        if rank0:
            (mushin_dir(cell_dir) / layout.EARLIER_METRICS_FILE).unlink(missing_ok=True)  # carried
            cellfiles.finish_provenance(cell_dir, ended, t_end - t0, attempt=running["attempt"])
        return metrics

    def _cancelled(
        self, cell_dir: Path, running: dict[str, Any], exc: BaseException, ended: str, s: float
    ) -> None:
        with contextlib.suppress(OSError):
            fields = {**running, "ended": ended, **spent(running, s), "reason": str(exc)}
            self._status(cell_dir, **fields, status="cancelled")

    def _ended(self, cell_dir: Path, running: dict[str, Any], exc: BaseException | None) -> None:
        """Every rank says how its task ended; rank 0 of a restarted attempt adds to
        ``running`` the rank that ended the attempt before (it died without a word)."""
        how, rank, attempt = type(exc).__name__, global_rank_from_env(), running["attempt"]
        with contextlib.suppress(OSError):  # bookkeeping: never the cell's outcome
            write_rank_end(cell_dir, rank=rank, attempt=attempt, how=how if exc else "completed")
            if rank == 0 and running.get("restarts"):
                running.update(restarted_after=restart_cause(cell_dir, attempt))

    def _failed(
        self, cell: _Cell, running: dict[str, Any], exc: Exception, duration: float
    ) -> None:
        """Record the failure (rank 0); re-raise it under ``on_error="raise"`` (with the abort
        file, so that cells not yet started skip) or when unrecorded (the files can't tell)."""
        rank0 = global_rank_from_env() == 0
        ended = {"status": "failed", "ended": sidecars.timestamp(), **spent(running, duration)}
        record = {"schema": SCHEMA, "run_id": self.plan.run_id, **running, **ended}
        recorded = not rank0 or cellfiles.record_failure(cell.directory, record, exc)
        self._cell_failed = True
        if self.plan.on_error == "raise" or not recorded:
            if rank0:  # the error may quote a secret, as the traceback may
                abort = {"cell": cell.directory.name, "error": redact_text(repr(exc))}
                with contextlib.suppress(OSError):  # the error itself is re-raised
                    sidecars.write_json_atomic(cell.root / layout.ABORT_FILE, abort)
            redact(exc)  # it leaves the cell: its text is written elsewhere too
            raise exc

    def _call_task(self, cfg: Any, cell_dir: Path, attempt: int, continues: bool) -> Any:
        """Call the task through zen, ``mushin_resume`` filled by ``call_with_resume``."""
        # resolve_pre_call=False: zen's in-place resolve would turn an escaped "\\${x}" in
        # a swept string into an interpolation, resolved a second time
        task = resume.zen_with_resume(
            self.task,
            directory=cell_dir,
            continues=continues,
            attempt=attempt,
            pre_call=self.pre_call,
            resolve_pre_call=False,
            unpack_kwargs=True,  # a **kwargs task gets the keys swept for it, as in Python
        )
        with durable.immediate():  # the task's own files are synced as it writes them
            return task(cfg)
