# SPDX-License-Identifier: MIT
"""The ``mushin_resume`` checkpoint contract.

A task function that declares a parameter named ``mushin_resume`` receives a
:class:`ResumeContext`; ``trainer.fit(..., ckpt_path=mushin_resume.last_ckpt)`` then
continues from the newest checkpoint of the job directory on every rank (HydraDDP
hands the same ``ckpt_path`` to the ranks it starts).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.jobdir import job_dir, mushin_dir

__all__ = [
    "RESUME_PARAM",
    "ResumeContext",
    "find_last_checkpoint",
    "resumable",
    "resume_context",
    "set_aside_checkpoints",
]

RESUME_PARAM = "mushin_resume"


@attrs.frozen
class ResumeContext:
    """What a task needs to continue an interrupted job.

    Attributes
    ----------
    dir : Path
        The job directory.
    last_ckpt : str | None
        The newest ``last.ckpt`` anywhere under ``dir``, else the newest ``*.ckpt``,
        else ``None``. Pass it to ``trainer.fit(..., ckpt_path=...)``.
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


def find_last_checkpoint(directory: str | os.PathLike[str]) -> str | None:
    """The newest ``last.ckpt`` under ``directory`` (recursively), else the newest
    ``*.ckpt``, else ``None``.

    Lightning nests checkpoints (``lightning_logs/version_0/checkpoints/``), so the
    search is recursive. "Newest" is by modification time; ``last-v1.ckpt`` style
    names written by Lightning when ``last.ckpt`` exists count as ``last`` too.

    Examples
    --------
    >>> import tempfile
    >>> from mushin_box import find_last_checkpoint
    >>> find_last_checkpoint(tempfile.mkdtemp()) is None
    True
    """
    root = Path(directory)
    if not root.is_dir():
        return None
    ckpts = _checkpoints(root)
    if not ckpts:
        return None

    def newest(paths: list[Path]) -> Path:
        return max(paths, key=lambda p: (p.stat().st_mtime_ns, str(p)))

    lasts = [p for p in ckpts if p.stem == "last" or p.stem.startswith("last-v")]
    return str(newest(lasts or ckpts))


def _checkpoints(root: Path) -> list[Path]:
    """``*.ckpt`` files under ``root``, except those set aside under ``root/.mushin/``."""
    aside = mushin_dir(root)
    return [p for p in root.rglob("*.ckpt") if p.is_file() and aside not in p.parents]


def set_aside_checkpoints(directory: str | os.PathLike[str], tag: str) -> list[Path]:
    """Move every checkpoint under ``directory`` to ``.mushin/stale-checkpoints/<tag>/``
    (same relative paths), so that no later resume continues from them; returns the new
    paths. For a cell that starts afresh: checkpoints of an earlier run are kept, not
    deleted, but are no longer found by :func:`find_last_checkpoint`."""
    root = Path(directory)
    moved: list[Path] = []
    for path in _checkpoints(root) if root.is_dir() else []:
        target = mushin_dir(root) / "stale-checkpoints" / tag / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved.append(target)
    return moved


def _next_attempt(directory: Path) -> int:
    """Count this start of the job: attempts are numbered 1, 2, ... per job directory."""
    from mushin_box._core.sidecars import read_json, write_json_atomic

    path = mushin_dir(directory) / "attempt.json"
    previous = read_json(path, default={})
    attempt = int(previous.get("attempt", 0)) + 1 if isinstance(previous, dict) else 1
    write_json_atomic(path, {"attempt": attempt})
    return attempt


def resume_context(
    directory: str | os.PathLike[str] | None = None, *, attempt: int | None = None
) -> ResumeContext:
    """Build the :class:`ResumeContext` of a job directory (default: the current job).

    Calling it without ``attempt`` counts a new attempt of the job (recorded in
    ``.mushin/attempt.json``); pass ``attempt`` to only look.
    """
    base = Path(directory) if directory is not None else job_dir()
    if attempt is None:
        attempt = _next_attempt(base)
    return ResumeContext(dir=base, last_ckpt=find_last_checkpoint(base), attempt=attempt)


def wants_resume(fn: Callable[..., Any]) -> bool:
    """Does ``fn`` declare a ``mushin_resume`` parameter?"""
    try:
        return RESUME_PARAM in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def resumable(task: Callable[..., Any], **zen_kwargs: Any) -> Callable[[Any], Any]:
    """Wrap ``task`` like :func:`hydra_zen.zen`, filling ``mushin_resume`` if declared.

    Use it where you would use ``zen(task)``: as the task function of
    ``hydra_zen.launch`` or with ``.hydra_main()``. (``Workflow.run`` does this itself.)

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
    from hydra_zen import zen

    if not wants_resume(task):
        return zen(task, **zen_kwargs)

    @functools.wraps(task)
    def with_context(*args: Any, **kwargs: Any) -> Any:
        kwargs[RESUME_PARAM] = resume_context()
        return task(*args, **kwargs)

    exclude = zen_kwargs.pop("exclude", None)
    excluded = {RESUME_PARAM} | ({exclude} if isinstance(exclude, str) else set(exclude or ()))
    return zen(with_context, exclude=excluded, **zen_kwargs)
