# SPDX-License-Identifier: MIT
"""One sweep cell = one Hydra job: the picklable task runner and its sidecars.

The runner is what Hydra (or submitit, in another process or on another node) calls for
each job. It decides reuse/skip/run from what is on disk, runs the task, and records the
outcome in the cell directory. It only reads what the driver shipped inside it
(:class:`CellPlan`) and what is on disk: nothing reaches back to the driver process.
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

from mushin_box._core.secrets import scrub_secret_values
from mushin_box._core.sidecars import (
    canonical_dumps,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from mushin_box._train.resume import (
    RESUME_PARAM,
    ResumeContext,
    find_last_checkpoint,
    set_aside_checkpoints,
    wants_resume,
)
from mushin_box._train.seeding import global_rank_from_env

__all__ = [
    "ABORT_FILE",
    "ERROR_FILE",
    "METRICS_FILE",
    "PROVENANCE_FILE",
    "STATUSES",
    "STATUS_FILE",
    "CellPlan",
    "CellRunner",
    "cell_key",
    "code_fingerprint",
    "config_fingerprint",
    "is_multi_rank",
]

STATUS_FILE = "mushin_status.json"
METRICS_FILE = "mushin_metrics.json"
PROVENANCE_FILE = "mushin_provenance.json"
ERROR_FILE = "mushin_error.txt"
# at the sweep root: a cell failed under on_error="raise"; cells not yet started skip
ABORT_FILE = ".mushin_abort.json"
STATUSES = ("pending", "running", "completed", "failed", "timeout", "skipped")
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
    from mushin_box._provenance.full import scrub

    plain = scrub(_plain_config(cfg))
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
        record = {"schema": SCHEMA, "run_id": self.plan.run_id, **fields}
        if global_rank_from_env() == 0:  # one writer per cell; the other ranks only read
            write_json_atomic(cell_dir / STATUS_FILE, record)
        return record

    def __call__(self, cfg: Any) -> dict[str, Any] | None:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf

        cell_dir = Path(HydraConfig.get().runtime.output_dir)
        root = Path(self.plan.working_dir)
        combo = {k: _plain_value(OmegaConf.select(cfg, k)) for k in self.plan.swept}
        fingerprints = {"config": config_fingerprint(cfg), "code": self.plan.code_fingerprint}
        image = os.environ.get("MUSHIN_SIF_SHA256")
        if image:  # ranks in an Apptainer image: a different image is a different cell
            fingerprints["image"] = image
        previous = read_json(cell_dir / STATUS_FILE, default={})
        if not isinstance(previous, dict):
            previous = {}
        base = {"combo": combo, "cell": cell_dir.name, "fingerprints": fingerprints}

        if (root / ABORT_FILE).exists():
            reason = "sweep aborted (on_error='raise')"
            self._status(cell_dir, **base, status="skipped", reason=reason,
                         attempt=previous.get("attempt", 0))  # fmt: skip
            return None

        if self.plan.resume and previous.get("status") == "completed":
            if previous.get("fingerprints") == fingerprints:
                metrics = read_json(cell_dir / METRICS_FILE)
                if isinstance(metrics, dict):
                    return metrics  # reused: nothing runs, nothing is rewritten
            else:
                changed = sorted(
                    k for k in fingerprints
                    if previous.get("fingerprints", {}).get(k) != fingerprints[k]
                )  # fmt: skip
                warnings.warn(
                    f"cell {cell_dir.name}: {' and '.join(changed)} fingerprint changed since it "
                    "completed; running it again instead of reusing it",
                    stacklevel=2,
                )
                base["rerun_reason"] = f"{'/'.join(changed)} fingerprint changed"

        if self.plan.deadline is not None:
            if is_multi_rank():
                warnings.warn(
                    "max_total_seconds is disabled for a cell launched on several ranks (a rank "
                    "that stopped alone would hang the others at rendezvous); bound the job "
                    "with the scheduler's timeout_min instead",
                    stacklevel=2,
                )
            elif time.time() >= self.plan.deadline:
                self._status(cell_dir, **base, status="skipped", reason="max_total_seconds",
                             attempt=previous.get("attempt", 0))  # fmt: skip
                return None

        attempt = int(previous.get("attempt", 0)) + 1
        known = previous.get("fingerprints")
        if previous.get("run_id") == self.plan.run_id and "previous_fingerprints" in previous:
            # written by this run (another rank was quicker): compare with what was there
            # before it, as that rank did, so that every rank decides the same
            known = previous["previous_fingerprints"]
        continues = self._continues(previous, changed=bool(known) and known != fingerprints)
        if not continues and global_rank_from_env() == 0:
            # a fresh start: an earlier run's checkpoints (maybe of another config) must
            # not be picked up by this attempt or by a later resume
            set_aside_checkpoints(cell_dir, self.plan.run_id[:12] or "earlier")
        started = _now()
        t0 = time.monotonic()
        running = {
            **base,
            "attempt": attempt,
            "started": started,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "slurm_job_id": slurm_job_id(),
            "previous_fingerprints": known,
        }
        self._status(cell_dir, **running, status="running")
        if global_rank_from_env() == 0:
            self._write_provenance(cfg, cell_dir, fingerprints)
        try:
            try:
                result = self._call_task(cfg, cell_dir, attempt, continues)
            finally:
                if global_rank_from_env() == 0:
                    self._record_seeds(cell_dir)
            metrics = metrics_from_return(result)
        except Exception as exc:
            self._record_failure(cell_dir, running, exc, time.monotonic() - t0)
            if self.plan.on_error == "raise":
                if global_rank_from_env() == 0:
                    write_json_atomic(
                        root / ABORT_FILE, {"cell": cell_dir.name, "error": repr(exc)}
                    )
                raise
            return None
        if global_rank_from_env() == 0:
            write_json_atomic(cell_dir / METRICS_FILE, metrics)
        self._status(cell_dir, **running, status="completed", ended=_now(),
                     duration_s=round(time.monotonic() - t0, 3))  # fmt: skip
        return metrics

    def _write_provenance(self, cfg: Any, cell_dir: Path, fingerprints: dict[str, str]) -> None:
        """Write the cell's provenance record (and its package list) as the task starts.

        ``run.started`` is the ``started`` of the status just written, so both files agree;
        :meth:`_record_seeds` completes the record when the task is done.
        """
        from omegaconf import OmegaConf

        from mushin_box._provenance.full import (
            full_provenance,
            launcher_from_hydra,
            write_provenance,
        )
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

    def _record_seeds(self, cell_dir: Path) -> None:
        """Complete the cell's provenance once the task has returned or raised: the per-rank
        seeds its ranks recorded, ``run.ended``/``run.duration_s`` and ``run.devices`` (the
        task has usually imported torch by now)."""
        from mushin_box._provenance.full import finish_record, record_with_seeds, write_provenance
        from mushin_box._train.seeding import seed_records

        t0 = self.__dict__.get("_provenance_clocks", {}).pop(str(cell_dir), None)
        duration = round(time.monotonic() - t0, 3) if t0 is not None else None
        try:
            record = read_json(cell_dir / PROVENANCE_FILE)
            if not isinstance(record, dict):
                return
            records = seed_records(cell_dir)
            if records:
                record = record_with_seeds(record, records)
            write_provenance(cell_dir, finish_record(record, ended=_now(), duration_s=duration))
        except (OSError, ValueError, KeyError) as exc:  # never fail a cell over provenance
            warnings.warn(f"cell {cell_dir.name}: provenance not completed ({exc})", stacklevel=2)

    def _continues(self, previous: dict[str, Any], *, changed: bool) -> bool:
        """Does this attempt continue from the cell's checkpoints? Only a requeue within
        this run, or ``resume=True`` with unchanged fingerprints; a new run without
        ``resume`` starts afresh."""
        if is_multi_rank():
            # every rank decides alone while rank 0 rewrites the status: the plan, SLURM's
            # restart count and the fingerprints from before this run (see __call__)
            if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
                return True
            return self.plan.resume and not changed
        if previous.get("run_id") == self.plan.run_id:  # requeued within this run
            return True
        return self.plan.resume and not changed

    def _call_task(self, cfg: Any, cell_dir: Path, attempt: int, continues: bool) -> Any:
        from hydra_zen import zen

        # resolve_pre_call=False: zen's in-place OmegaConf.resolve would turn an escaped
        # literal "\\${x}" in a swept string into an interpolation that the field access
        # then resolves a second time
        if not wants_resume(self.task):
            return zen(self.task, pre_call=self.pre_call, resolve_pre_call=False)(cfg)
        last = find_last_checkpoint(cell_dir) if continues else None
        ctx = ResumeContext(dir=cell_dir, last_ckpt=last, attempt=attempt)
        task = self.task

        def with_context(*args: Any, **kwargs: Any) -> Any:
            kwargs[RESUME_PARAM] = ctx
            return task(*args, **kwargs)

        with_context.__signature__ = inspect.signature(task)  # type: ignore[attr-defined]
        return zen(
            with_context, exclude=RESUME_PARAM, pre_call=self.pre_call, resolve_pre_call=False
        )(cfg)

    def _record_failure(
        self, cell_dir: Path, running: dict[str, Any], exc: BaseException, duration: float
    ) -> None:
        if global_rank_from_env() != 0:
            return
        # an exception may quote a secret (e.g. "invalid token ..."): the values of
        # secret-looking environment variables, sweep secrets included, are replaced
        text = scrub_secret_values("".join(traceback.format_exception(exc)))
        write_text_atomic(cell_dir / ERROR_FILE, text)
        message = scrub_secret_values(str(exc))
        self._status(
            cell_dir,
            **running,
            status="failed",
            ended=_now(),
            duration_s=round(duration, 3),
            error={"type": type(exc).__qualname__, "message": message[:2000], "file": ERROR_FILE},
        )
