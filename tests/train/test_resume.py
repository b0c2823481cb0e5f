# SPDX-License-Identifier: MIT
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra_zen import make_config

from mushin_box import ResumeContext, find_last_checkpoint, resumable, resume_context


def _touch(path: Path, mtime: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    os.utime(path, ns=(mtime * 10**9, mtime * 10**9))
    return path


def test_no_checkpoint(tmp_path: Path) -> None:
    assert find_last_checkpoint(tmp_path) is None
    assert find_last_checkpoint(tmp_path / "missing") is None


def test_last_ckpt_preferred_over_newer_epoch_ckpt_and_found_recursively(tmp_path: Path) -> None:
    last = _touch(tmp_path / "lightning_logs/version_0/checkpoints/last.ckpt", 100)
    _touch(tmp_path / "lightning_logs/version_0/checkpoints/epoch=3.ckpt", 200)
    assert find_last_checkpoint(tmp_path) == str(last)


def test_newest_last_ckpt_wins(tmp_path: Path) -> None:
    _touch(tmp_path / "a/last.ckpt", 100)
    newer = _touch(tmp_path / "b/last-v1.ckpt", 300)
    assert find_last_checkpoint(tmp_path) == str(newer)


def test_newest_ckpt_without_last(tmp_path: Path) -> None:
    _touch(tmp_path / "epoch=1.ckpt", 100)
    newest = _touch(tmp_path / "sub/epoch=2.ckpt", 200)
    assert find_last_checkpoint(tmp_path) == str(newest)


def test_resume_context_counts_attempts(tmp_path: Path) -> None:
    first = resume_context(tmp_path)
    second = resume_context(tmp_path)
    assert (first.attempt, second.attempt) == (1, 2)
    assert not first.is_resume and second.is_resume
    assert resume_context(tmp_path, attempt=7).attempt == 7  # looking does not count
    assert resume_context(tmp_path).attempt == 3


def test_resumable_fills_the_parameter_from_the_job_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    ckpt = _touch(tmp_path / "checkpoints/last.ckpt", 100)
    seen: list[ResumeContext] = []

    def task(x: int, mushin_resume: ResumeContext) -> int:
        seen.append(mushin_resume)
        return x

    assert resumable(task)(make_config(x=3)()) == 3
    assert seen[0] == ResumeContext(dir=tmp_path, last_ckpt=str(ckpt), attempt=1)


def test_resumable_without_the_parameter_is_plain_zen() -> None:
    def task(x: int) -> int:
        return x * 2

    assert resumable(task)(make_config(x=3)()) == 6
