# SPDX-License-Identifier: MIT
"""The ``mushin_resume`` checkpoint contract: a task that declares a ``mushin_resume``
parameter receives a :class:`ResumeContext`; ``trainer.fit(...,
ckpt_path=mushin_resume.last_ckpt)`` then continues from the job directory's newest
checkpoint on every rank. The context is filled in one place (:func:`call_with_resume`)
and attempts counted in one (:func:`next_attempt`), however the task was launched; the
caller (a sweep's cell runner, or ``resumable``) says whether this attempt continues.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.jobdir import job_dir, mushin_dir
from mushin_box._core.layout import ATTEMPT_FILE, FINGERPRINTS_FILE, STALE_CHECKPOINTS_DIR
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._core.targets import public

RESUME_PARAM = "mushin_resume"

R = TypeVar("R")  # what the task returns


@public
@attrs.frozen
class ResumeContext:
    """What a task needs to continue an interrupted job.

    Attributes
    ----------
    dir : Path
        The job directory.
    last_ckpt : str | None
        The newest ``last.ckpt`` anywhere under ``dir``, else the newest ``*.ckpt``,
        else ``None``; a truncated one is skipped (:func:`find_last_checkpoint`). Pass it
        to ``trainer.fit(..., ckpt_path=...)``.
    attempt : int
        1 for the first run of this job, 2 for the first re-run, and so on.
    """

    dir: Path
    last_ckpt: str | None
    attempt: int

    @property
    def is_resume(self) -> bool:
        """True when this is not the first attempt of the job."""
        return self.attempt > 1


@public
def find_last_checkpoint(directory: str | os.PathLike[str]) -> str | None:
    """The newest ``last.ckpt`` under ``directory`` (recursively), else the newest
    ``*.ckpt``, else ``None``; a checkpoint that cannot be loaded is passed over.

    "Newest" is by modification time; ``last-v1.ckpt`` counts as ``last``. A checkpoint
    cut short (a job killed while Lightning wrote it) would fail every attempt, so the
    newest loadable one is returned instead, with a warning naming both.

    Design note: checkpoints can be many GB, so the check reads only the zip's central
    directory, at the very end of what ``torch.save`` writes (a truncation destroys it),
    which must name torch's ``data.pkl``. Torch's legacy (non-zip) format is trusted.

    Examples
    --------
    >>> import tempfile
    >>> from mushin_box import find_last_checkpoint
    >>> find_last_checkpoint(tempfile.mkdtemp()) is None
    True
    """
    root = Path(directory)
    ckpts = _checkpoints(root) if root.is_dir() else []
    if not ckpts:
        return None
    by_age = sorted(ckpts, key=lambda p: (p.stat().st_mtime_ns, str(p)), reverse=True)
    lasts = [p for p in by_age if p.stem == "last" or p.stem.startswith("last-v")]
    preferred = (lasts or by_age)[0]
    if _loadable(preferred):
        return str(preferred)
    # past the preferred one, "newest" alone decides: the best guess of the latest state
    fallback = next((p for p in by_age if p != preferred and _loadable(p)), None)
    if fallback is None:
        warnings.warn(
            f"no checkpoint under {root} can be loaded (newest: {preferred}, truncated?); "
            "this attempt starts afresh: move them aside to keep them",
            stacklevel=2,
        )
        return None
    warnings.warn(
        f"checkpoint {preferred} cannot be loaded (truncated? a job killed while saving "
        f"it); continuing from {fallback} instead",
        stacklevel=2,
    )
    return str(fallback)


def trained_so_far(directory: str | os.PathLike[str]) -> dict[str, int]:
    """How far the job's fit got (``max_epochs``, ``max_steps``), from the fingerprints
    ``MetricsCallback`` writes at each epoch's end; ``{}`` without them."""
    record = read_json(Path(directory) / FINGERPRINTS_FILE, default=None)
    epochs = record.get("epochs") if isinstance(record, dict) else None
    rows = epochs if isinstance(epochs, list) else []
    done = [e for e in rows if isinstance(e, dict) and isinstance(e.get("epoch"), int)]
    done = [e for e in done if "weights" in e]
    if not done:
        return {}
    last: dict[str, Any] = max(done, key=lambda e: int(e["epoch"]))
    out = {"max_epochs": int(last["epoch"]) + 1}
    if isinstance(last.get("step"), int):
        out["max_steps"] = int(last["step"])
    return out


@public
class ShortenedFitError(MushinBoxError, ValueError):
    """A resume set a training limit below what a cell already trained
    (:func:`refuse_shortened`)."""


def refuse_shortened(directory: str | os.PathLike[str], limits: Mapping[str, Any]) -> None:
    """Refuse ``limits`` (``{"trainer.max_epochs": 2}``) below what the job in
    ``directory`` already trained: continued, it would train nothing and report the longer
    fit's metrics under the shorter config. A negative limit is Lightning's "no limit"."""
    trained = trained_so_far(directory)
    for key, value in limits.items():
        done = trained.get(key.rsplit(".", 1)[-1])
        if isinstance(value, int) and done is not None and 0 <= value < done:
            unit = "epochs" if key.endswith("max_epochs") else "steps"
            raise ShortenedFitError(
                f"{key}={value} is below the {done} {unit} cell {Path(directory).name} already "
                f"trained: a resume extends a fit and cannot shorten one; give at least {done}, "
                "or launch the shorter run into a new directory"
            )


def _loadable(path: Path) -> bool:
    """Can ``torch.load`` read ``path``, judged cheaply (see :func:`find_last_checkpoint`)."""
    try:
        with path.open("rb") as f:
            head = f.read(2)
            if head[:1] == b"\x80":  # a pickle protocol byte: torch's legacy format
                return True
            if head != b"PK":
                return False
            with zipfile.ZipFile(f) as archive:  # reads the central directory only
                names = archive.namelist()
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False
    return any(name == "data.pkl" or name.endswith("/data.pkl") for name in names)


def _checkpoints(root: Path) -> list[Path]:
    """``*.ckpt`` files under ``root``, except those set aside under ``root/.mushin/``."""
    aside = mushin_dir(root)
    return [p for p in root.rglob("*.ckpt") if p.is_file() and aside not in p.parents]


def set_aside_checkpoints(directory: str | os.PathLike[str], tag: str) -> list[Path]:
    """Move every checkpoint under ``directory`` to ``.mushin/stale-checkpoints/<tag>/``
    (same relative paths), where no resume continues from them; returns the new paths."""
    root = Path(directory)
    moved: list[Path] = []
    for path in _checkpoints(root) if root.is_dir() else []:
        target = mushin_dir(root) / STALE_CHECKPOINTS_DIR / tag / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved.append(target)
    return moved


def next_attempt(
    directory: str | os.PathLike[str], *, start: str | None = None, known: int = 0
) -> int:
    """Count a start of the job in ``directory`` and return its number (1, 2, ...): a
    ``start`` already counted (another rank of it) gets the same number, None counts every
    call; ``known``, the highest attempt recorded elsewhere, is continued.

    >>> import tempfile
    >>> job = tempfile.mkdtemp()
    >>> next_attempt(job), next_attempt(job)
    (1, 2)
    >>> next_attempt(job, start="run-a"), next_attempt(job, start="run-a")
    (3, 3)
    """
    path = mushin_dir(Path(directory)) / ATTEMPT_FILE
    record = read_json(path, default={})
    if not isinstance(record, dict):
        record = {}
    stored = int(record.get("attempt", 0))
    if start is not None and record.get("start") == start:
        return stored  # another rank of this start counted it already
    attempt = max(stored, known) + 1
    record = {"attempt": attempt} if start is None else {"attempt": attempt, "start": start}
    write_json_atomic(path, record)
    return attempt


def current_attempt(directory: str | os.PathLike[str]) -> int | None:
    """The job's attempt as :func:`next_attempt` last counted it; None when none was.

    >>> import tempfile
    >>> job = tempfile.mkdtemp()
    >>> current_attempt(job), next_attempt(job), current_attempt(job)
    (None, 1, 1)
    """
    record = read_json(mushin_dir(Path(directory)) / ATTEMPT_FILE, default={})
    value = record.get("attempt") if isinstance(record, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@public
def resume_context(
    directory: str | os.PathLike[str] | None = None, *, attempt: int | None = None
) -> ResumeContext:
    """Build the :class:`ResumeContext` of a job directory (default: the current job).

    Calling it without ``attempt`` counts a new attempt of the job (recorded in
    ``.mushin/attempt.json``); pass ``attempt`` to only look.
    """
    base = Path(directory) if directory is not None else job_dir()
    attempt = next_attempt(base) if attempt is None else attempt
    return ResumeContext(dir=base, last_ckpt=find_last_checkpoint(base), attempt=attempt)


def wants_resume(fn: Callable[..., Any]) -> bool:
    """Does ``fn`` declare a ``mushin_resume`` parameter?"""
    try:
        return RESUME_PARAM in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def call_with_resume(
    task: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    continues: bool = True,
    attempt: int | None = None,
    start: str | None = None,
) -> Any:
    """Call ``task(*args, **kwargs)``, adding ``mushin_resume=`` (of ``directory``, default
    the current job) when ``task`` declares it; else no attempt is counted. ``last_ckpt`` is
    set only when ``continues``; ``attempt`` None counts one (:func:`next_attempt`).

    >>> import tempfile
    >>> from mushin_box._train.resume import call_with_resume
    >>> def task(x, mushin_resume):
    ...     return x, mushin_resume.attempt, mushin_resume.last_ckpt
    >>> job = tempfile.mkdtemp()
    >>> call_with_resume(task, (1,), directory=job)
    (1, 1, None)
    >>> call_with_resume(task, kwargs={"x": 2}, directory=job, continues=False, attempt=5)
    (2, 5, None)
    >>> call_with_resume(lambda x: x * 2, (3,), directory=job)  # no mushin_resume: as is
    6
    """
    call_kwargs = dict(kwargs or {})
    if wants_resume(task):
        base = Path(directory) if directory is not None else job_dir()
        attempt = next_attempt(base, start=start) if attempt is None else attempt
        last = find_last_checkpoint(base) if continues else None
        call_kwargs[RESUME_PARAM] = ResumeContext(dir=base, last_ckpt=last, attempt=attempt)
    return task(*args, **call_kwargs)


def zen_with_resume(
    task: Callable[..., Any],
    *,
    directory: str | os.PathLike[str] | None = None,
    continues: bool = True,
    attempt: int | None = None,
    start: str | None = None,
    **zen_kwargs: Any,
) -> Any:
    """:func:`hydra_zen.zen` of ``task`` whose ``mushin_resume`` (if declared) is filled by
    :func:`call_with_resume` with these arguments instead of from the config.

    >>> import tempfile
    >>> from hydra_zen import make_config
    >>> from mushin_box._train.resume import zen_with_resume
    >>> def task(x: int, mushin_resume=None):
    ...     return x, mushin_resume.attempt
    >>> zen_with_resume(task, directory=tempfile.mkdtemp(), attempt=2)(make_config(x=1)())
    (1, 2)
    """
    from hydra_zen import zen

    if not wants_resume(task):
        return zen(task, **zen_kwargs)

    @functools.wraps(task)  # zen reads the task's signature through __wrapped__
    def with_context(*args: Any, **kwargs: Any) -> Any:
        return call_with_resume(
            task,
            args,
            kwargs,
            directory=directory,
            continues=continues,
            attempt=attempt,
            start=start,
        )

    exclude = zen_kwargs.pop("exclude", None)
    if isinstance(exclude, str):  # zen's own spelling: "a,b"
        exclude = [name.strip() for name in exclude.split(",")]
    excluded = {RESUME_PARAM} | set(exclude or ())
    return zen(with_context, exclude=excluded, **zen_kwargs)


@public
def resumable(task: Callable[..., R], **zen_kwargs: Any) -> Callable[[object], R]:
    """Wrap ``task`` like :func:`hydra_zen.zen`, filling ``mushin_resume`` if declared.

    Use it where you would use ``zen(task)``: as the task function of
    ``hydra_zen.launch`` or with ``.hydra_main()``. (``Workflow.run`` does this itself.)
    Each call counts an attempt of the current job (:func:`mushin_box.job_dir`) and
    continues from its last checkpoint when there is one.

    Examples
    --------
    >>> from hydra_zen import make_config
    >>> from mushin_box import resumable
    >>> def task(x: int, mushin_resume=None):
    ...     return x, mushin_resume.last_ckpt
    >>> import os, tempfile; os.environ["MUSHIN_JOB_DIR"] = tempfile.mkdtemp()
    >>> resumable(task)(make_config(x=1)())
    (1, None)
    >>> del os.environ["MUSHIN_JOB_DIR"]
    """
    return zen_with_resume(task, **zen_kwargs)
