# SPDX-License-Identifier: MIT
"""What a cell writes beside its task: metrics, provenance, its failure, Hydra's files.

Metrics belong to the current status: a start moves the earlier ones out; a continuing
attempt that returns fewer keeps the missing ones, saying so (:func:`carry_over`).
Provenance is written after the "running" status and completed after the outcome's, each
attempt carrying the earlier ones of the same fit (``run.attempts``).

A failure is recorded even on a full disk: the redacted traceback and the ``failed`` status,
each atomic; if the status does not fit, the traceback makes way for it; then the
``running`` status file is overwritten in place by one ``pwrite`` of at most a page (no new
space; a kill leaves either record whole); else a note on the exception says it was not
recorded, and the caller re-raises it.

Hydra writes ``.hydra/*.yaml`` with a plain ``open(..., "w")`` on every run of the job, so
a full disk or a kill leaves them empty: this module makes :func:`save_config` its writer,
atomic (and a no-op for the same text). In a ``Workflow`` job (:data:`JOB_NAME`) a failed
write is kept for the runner (:func:`take_failure`), which records the cell ``failed``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from mushin_box._core import durable, layout, sidecars
from mushin_box._core.jobdir import mushin_dir
from mushin_box._core.redact import redact_text
from mushin_box._provenance.elastic import attempt_entry, carried_attempts, finished_run
from mushin_box._provenance.files import write_provenance
from mushin_box._provenance.full import (
    finish_record,
    full_provenance,
    launcher_from_hydra,
    record_with_seeds,
)
from mushin_box._provenance.ranks import read_rank_runtimes, record_with_rank_runtime
from mushin_box._provenance.record import basic_provenance
from mushin_box._train.seeding import seed_records
from mushin_box._upstream.hydra import replace_save_config

#: the ``reason`` a completed cell's status gives when a continuing attempt reported no
#: metrics (``status`` and ``wait`` show it: the warning itself reaches only the job's log)
NO_METRICS = (
    "no metrics: it continued a finished fit, which logs nothing, and no MetricsCallback "
    "series was restored (return MetricsCallback.final_metrics(trainer), or run it afresh)"
)


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


def carry_over(
    cell_dir: Path, metrics: dict[str, Any], continues: bool
) -> tuple[dict[str, Any], list[str]]:
    """``metrics`` plus the previous attempt's values of the names it lacks, and those names:
    a continuing attempt that returns fewer is most likely a fit resumed with nothing left
    to train, which must not replace good metrics with fewer. A fresh start carries nothing.
    """
    if not continues:
        return metrics, []
    previous = sidecars.read_json(mushin_dir(cell_dir) / layout.EARLIER_METRICS_FILE, default={})
    missing = sorted(k for k in previous if k not in metrics) if isinstance(previous, dict) else []
    if not missing:  # none returned and none recorded: killed after its fit
        return (metrics, []) if metrics else _restored(cell_dir)
    warnings.warn(
        f"cell {cell_dir.name}: this attempt returned no {', '.join(missing)}; keeping the "
        f"previous attempt's values from {layout.METRICS_FILE} (a fit resumed with nothing left to "
        "train logs nothing: return MetricsCallback.final_metrics(trainer))",
        stacklevel=4,
    )
    return {**metrics, **{k: previous[k] for k in missing}}, missing


def _restored(cell_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The last values of the fit's ``MetricsCallback`` series, for a task that returned
    nothing: a cell killed after its fit resumes at ``max_epochs``, trains nothing, and
    returns ``{}``, while the series restored with the checkpoint holds its result."""
    series = sidecars.read_json(cell_dir / layout.stage_metrics_json_file("fit"), default=None)
    restored: dict[str, Any] = {}
    if isinstance(series, dict):
        for name, values in series.items():
            if name == "epoch" or not isinstance(values, list):
                continue
            last = next((v for v in reversed(values) if isinstance(v, int | float)), None)
            if last is not None and not isinstance(last, bool):
                restored[str(name)] = last
    if not restored:
        warnings.warn(
            f"cell {cell_dir.name}: this attempt continued from a checkpoint, trained "
            "nothing and returned no metrics, and no MetricsCallback series was restored: "
            "the cell has no metrics. Add MetricsCallback to the Trainer and return "
            "MetricsCallback.final_metrics(trainer), or run the cell afresh",
            stacklevel=5,
        )
        return {}, []
    names = sorted(restored)
    warnings.warn(
        f"cell {cell_dir.name}: this attempt continued from a checkpoint and returned no "
        f"metrics; reporting {', '.join(names)} as its checkpoint restored them (the last "
        f"values of {layout.stage_metrics_json_file('fit')}). Return "
        "MetricsCallback.final_metrics(trainer) to report them yourself",
        stacklevel=5,
    )
    return restored, names


def set_aside_metrics(cell_dir: Path, tag: str, continues: bool) -> None:
    """Move the earlier metrics out of the sidecar (none beside ``running`` or ``failed``):
    for :func:`carry_over` when the attempt continues, else beside the set-aside checkpoints."""
    path = cell_dir / layout.METRICS_FILE
    earlier = mushin_dir(cell_dir) / layout.EARLIER_METRICS_FILE
    stale = mushin_dir(cell_dir) / layout.STALE_CHECKPOINTS_DIR / tag / layout.METRICS_FILE
    target = earlier if continues else stale
    for source in (path,) if continues else (earlier, path):  # the newer last: it is kept
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)


def start_provenance(
    task: Callable[..., Any],
    cfg: Any,
    cell_dir: Path,
    fingerprints: dict[str, str],
    pre_call: Callable[..., Any] | None,
    experiment: Mapping[str, Any] | None,
    *,
    started: str,
    attempt: int,
    continues: bool,
    extended: Mapping[str, Any] | None,
) -> None:
    """Write the cell's provenance record as the task starts (``started``: the status's);
    ``extended`` (``{limit: [before, now]}``) marks an attempt to a raised training limit."""
    common: dict[str, Any] = {
        "task": task,
        "config": OmegaConf.to_container(cfg, resolve=False, enum_to_str=True),
        "fingerprints": fingerprints,
        "seed_base": OmegaConf.select(cfg, "seed", default=None),
        "pre_call": pre_call,
        "experiment": experiment,
    }
    try:
        record = full_provenance(**common, launcher=launcher_from_hydra(), started=started)
    except ValueError as exc:  # a malformed launcher environment: keep the basic record
        warnings.warn(
            f"cell {cell_dir.name}: recording the basic provenance only ({exc})", stacklevel=2
        )
        record = basic_provenance(**common)
    write_provenance(cell_dir, _with_attempt(record, cell_dir, attempt, continues, extended))


def _with_attempt(
    record: dict[str, Any],
    cell_dir: Path,
    attempt: int | None,
    continues: bool,
    extended: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``record`` with ``run.attempts``: the earlier ones of this fit, then this one."""
    run = record.get("run")
    if not isinstance(run, dict):
        return record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a corrupt earlier record: its attempts are lost
        previous = sidecars.read_json(cell_dir / layout.PROVENANCE_FILE)
        earlier = carried_attempts(previous, continues=continues)
    topology, launcher = run.get("topology"), run.get("launcher")
    entry = attempt_entry(
        os.environ,
        attempt=attempt,
        world_size=topology.get("world_size") if isinstance(topology, dict) else None,
        started=run.get("started"),
        launcher=launcher.get("kind") if isinstance(launcher, dict) else None,
    )
    if extended:
        entry["extended"] = dict(extended)
    kept = [row for row in earlier if attempt is None or row.get("attempt") != attempt]
    # the fit starts on disk are the last attempt's: they date it even when it died before
    # a checkpoint kept its start (then the fit this attempt restores no longer lists it)
    record = {**record, "run": {**run, "attempts": [*kept, entry]}}
    return _with_fit_starts(record, cell_dir, changes=False)


def finish_provenance(cell_dir: Path, ended: str, duration: float, *, attempt: int) -> None:
    """Complete the provenance once the task returned or raised: each rank's seed and
    place, ``run.ended``, ``run.duration_s`` (the attempt's, from its start), ``run.devices``."""
    try:
        record = sidecars.read_json(cell_dir / layout.PROVENANCE_FILE)
        if not isinstance(record, dict):
            return
        runtimes = read_rank_runtimes(cell_dir, attempt=attempt)
        if runtimes:  # first: the ranks' placements, then each placed rank's seed
            record = record_with_rank_runtime(record, runtimes)
        records = seed_records(cell_dir)
        if records:
            record = record_with_seeds(record, records)
        record = _with_fit_starts(record, cell_dir)
        write_provenance(
            cell_dir, finish_record(record, ended=ended, duration_s=round(duration, 3))
        )
    except (OSError, ValueError, KeyError) as exc:  # never fail a cell over provenance
        warnings.warn(f"cell {cell_dir.name}: provenance not completed ({exc})", stacklevel=2)


def _with_fit_starts(
    record: dict[str, Any], cell_dir: Path, *, changes: bool = True
) -> dict[str, Any]:
    """``record`` with each attempt's first epoch and (``changes``) ``run.world_changes``,
    from the fit starts ``MetricsCallback`` recorded."""
    run = record.get("run")
    if not isinstance(run, dict):
        return record
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the user's file, not a sidecar: none is no loss
        prints = sidecars.read_json(cell_dir / layout.FINGERPRINTS_FILE)
    starts = prints.get("starts") if isinstance(prints, dict) else None
    done = finished_run(run, starts)
    if not changes:  # the starts of the fit this attempt has not restored yet
        done.pop("world_changes", None)
    return {**record, "run": done}


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """The status's last resort (see the module doc): one pwrite into the blocks the file
    already holds, padded with spaces; only a crash before the fsync tears it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        st = os.fstat(fd)
        if len(data) > min(4096, st.st_blocks * 512):  # at most a page
            raise OSError(errno.ENOSPC, "the failed status does not fit in its file's block")
        data += b" " * max(0, st.st_size - len(data))  # JSON readers skip trailing spaces
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(errno.ENOSPC, "short write of the failed status")
        os.fsync(fd)
    finally:
        os.close(fd)


def record_failure(cell_dir: Path, record: dict[str, Any], exc: BaseException) -> bool:
    """Write the traceback and the ``failed`` status ``record`` (with ``error`` added) of a
    cell; False, with a note on ``exc``, when the status could not be written at all."""
    # an exception may quote a secret ("invalid token ..."): the values of secret-looking
    # variables, sweep secrets included, are replaced (the manifest copies this error)
    text = redact_text("".join(traceback.format_exception(exc)))
    error: dict[str, Any] = {
        "type": type(exc).__qualname__,
        "message": redact_text(str(exc))[:2000],
        "file": layout.ERROR_FILE,
    }
    status = cell_dir / layout.STATUS_FILE
    try:
        sidecars.write_text_atomic(cell_dir / layout.ERROR_FILE, text)
    except OSError:
        error["file"] = None
    try:
        sidecars.write_json_atomic(status, {**record, "error": error})
        return True
    except OSError as full:
        problem = full  # the one to name: the later tries only fall back
    if error["file"] is not None:  # the traceback makes way for the status
        (cell_dir / layout.ERROR_FILE).unlink(missing_ok=True)
        error["file"] = None
    final = {**record, "error": error}
    for write in (
        lambda: sidecars.write_json_atomic(status, final),
        lambda: _overwrite_in_place(status, sidecars.canonical_dumps(final)),  # no file: an OSError
    ):
        with contextlib.suppress(OSError):
            write()
            return True
    exc.add_note(
        f"cell {cell_dir.name}: this failure could not be recorded ({problem}); the next "
        "run of the sweep runs the cell again"
    )
    return False


#: the Hydra job name of every Workflow launch (``hydra_zen.launch(job_name=...)``)
JOB_NAME = "mushin_workflow"

_FAILED: dict[str, OSError] = {}


def save_config(cfg: Any, filename: str, output_dir: Path) -> None:
    """Hydra's writer of a job's ``.hydra`` files, atomic (see the module doc)."""
    path, text = Path(output_dir) / filename, OmegaConf.to_yaml(cfg)
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return  # a reused cell's files: nothing to rewrite
    try:
        ours = str(HydraConfig.get().job.name) == JOB_NAME
    except Exception:  # no Hydra job set up: not ours
        ours = False
    try:
        # a cell's files are synced with the cell runner's next commit (_core/durable.py)
        with durable.handed_on() if ours else contextlib.nullcontext():
            sidecars.write_text_atomic(path, text)  # creates output_dir, as Hydra's mkdir did
    except OSError as exc:
        if not ours:
            raise
        _FAILED.setdefault(str(Path(output_dir).parent), exc)  # the first one counts


def take_failure(cell_dir: Path) -> OSError | None:
    """The error that kept Hydra from writing this cell's files in this process, if any."""
    return _FAILED.pop(str(cell_dir), None)


replace_save_config(save_config)  # nothing replaced for an unknown Hydra
