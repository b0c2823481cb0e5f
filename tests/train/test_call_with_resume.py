# SPDX-License-Identifier: MIT
"""call_with_resume and next_attempt: the one injection of mushin_resume, the one counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra_zen import make_config

from mushin_box import ResumeContext, resumable, resume_context
from mushin_box._train.resume import (
    call_with_resume,
    next_attempt,
    set_aside_checkpoints,
    zen_with_resume,
)


def _ckpt(path: Path) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": 0}, path)  # a file torch can load: find_last_checkpoint checks
    return path


def _attempt_file(directory: Path) -> Path:
    return directory / ".mushin" / "attempt.json"


def _probe(x: int, mushin_resume: ResumeContext) -> tuple[int, ResumeContext]:
    return x, mushin_resume


def test_next_attempt_counts_in_attempt_json(tmp_path: Path) -> None:
    assert [next_attempt(tmp_path) for _ in range(3)] == [1, 2, 3]
    assert json.loads(_attempt_file(tmp_path).read_text())["attempt"] == 3


def test_one_start_is_counted_once_whichever_rank_counts_it(tmp_path: Path) -> None:
    assert next_attempt(tmp_path, start="run:job:0") == 1
    assert next_attempt(tmp_path, start="run:job:0") == 1  # another rank of the same start
    assert next_attempt(tmp_path, start="run:job:1") == 2  # requeued: a new start
    assert next_attempt(tmp_path) == 3


def test_next_attempt_continues_after_a_known_attempt(tmp_path: Path) -> None:
    assert next_attempt(tmp_path, known=4) == 5  # a status written before attempt.json
    assert next_attempt(tmp_path, known=1) == 6


def test_a_corrupt_attempt_file_starts_the_count_again(tmp_path: Path) -> None:
    _attempt_file(tmp_path).parent.mkdir(parents=True)
    _attempt_file(tmp_path).write_text("[1, 2]")
    assert next_attempt(tmp_path) == 1


def test_resume_context_and_call_with_resume_share_the_counter(tmp_path: Path) -> None:
    assert resume_context(tmp_path).attempt == 1
    _, ctx = call_with_resume(_probe, (1,), directory=tmp_path)
    assert ctx.attempt == 2
    assert next_attempt(tmp_path) == 3


def test_last_ckpt_only_when_the_attempt_continues(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path / "ckpt" / "last.ckpt")
    _, ctx = call_with_resume(_probe, (1,), directory=tmp_path)
    assert ctx == ResumeContext(dir=tmp_path, last_ckpt=str(ckpt), attempt=1)
    _, ctx = call_with_resume(_probe, kwargs={"x": 1}, directory=tmp_path, continues=False)
    assert ctx == ResumeContext(dir=tmp_path, last_ckpt=None, attempt=2)


def test_a_given_attempt_is_not_counted_again(tmp_path: Path) -> None:
    _, ctx = call_with_resume(_probe, (1,), directory=tmp_path, attempt=7)
    assert ctx.attempt == 7 and ctx.is_resume
    assert not _attempt_file(tmp_path).exists()


def test_a_task_without_the_parameter_is_called_as_it_is_and_counts_nothing(
    tmp_path: Path,
) -> None:
    assert call_with_resume(lambda x, y=0: x + y, (1,), {"y": 2}, directory=tmp_path) == 3
    assert not _attempt_file(tmp_path).exists()


def test_call_with_resume_defaults_to_the_job_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    _, ctx = call_with_resume(_probe, (1,))
    assert (ctx.dir, ctx.attempt) == (tmp_path, 1)


def test_checkpoints_set_aside_are_not_continued_from(tmp_path: Path) -> None:
    _ckpt(tmp_path / "ckpt" / "last.ckpt")
    moved = set_aside_checkpoints(tmp_path, "run0")
    assert moved == [tmp_path / ".mushin" / "stale-checkpoints" / "run0" / "ckpt" / "last.ckpt"]
    _, ctx = call_with_resume(_probe, (1,), directory=tmp_path)
    assert ctx.last_ckpt is None


def test_zen_with_resume_excludes_the_parameter_from_the_config(tmp_path: Path) -> None:
    cfg = make_config(x=3, y=4, mushin_resume="from the config: ignored")()

    def task(x: int, y: int = 0, mushin_resume: ResumeContext | None = None) -> tuple:
        return x, y, mushin_resume

    x, y, ctx = zen_with_resume(task, directory=tmp_path, exclude="y")(cfg)
    assert (x, y) == (3, 0)  # y excluded as zen's "a,b" string spells it
    assert isinstance(ctx, ResumeContext) and ctx.attempt == 1
    assert zen_with_resume(task, directory=tmp_path, exclude=["y"])(cfg)[:2] == (3, 0)


def test_resumable_counts_and_continues_through_call_with_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    ckpt = _ckpt(tmp_path / "last.ckpt")
    wrapped = resumable(_probe)
    assert wrapped(make_config(x=1)())[1] == ResumeContext(tmp_path, str(ckpt), 1)
    assert wrapped(make_config(x=1)())[1].attempt == 2
    assert json.loads(_attempt_file(tmp_path).read_text()) == {"attempt": 2}
