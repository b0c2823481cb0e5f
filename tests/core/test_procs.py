# SPDX-License-Identifier: MIT
"""The bounded runner (``_core/procs.py``): a tool's output passed on and its last lines
kept; a tool whose reader's terminal is gone still runs to its end; past its time the
whole process group is stopped."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mushin_box._core.procs import git, run_bounded

LINES = "for i in range(20000): print('line', i)"  # ~220 KB: more than a pipe holds


def test_the_last_lines_are_kept_and_passed_on(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_bounded([sys.executable, "-c", LINES], timeout=60, capture=False, tail=3)
    assert done.returncode == 0
    assert done.stderr == "line 19997\nline 19998\nline 19999\n"
    assert capsys.readouterr().err.count("\n") == 20000


def test_a_closed_stderr_does_not_stall_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = io.StringIO()
    gone.close()  # as a closed pipe: every write raises
    monkeypatch.setattr(sys, "stderr", gone)
    done = run_bounded([sys.executable, "-c", LINES], timeout=30, capture=False, tail=1)
    assert (done.returncode, done.stderr) == (0, "line 19999\n")


def test_past_its_time_the_whole_group_is_stopped() -> None:
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sh", "-c", "sleep 60 & sleep 60; wait"], timeout=0.5, capture=True)
    assert time.monotonic() - start < 30


def test_git_gives_a_diff_with_its_line_ends_and_none_where_git_fails(tmp_path: Path) -> None:
    """A diff's bytes are hashed into the record (diff_sha256): a CRLF line must come back
    as CRLF, not as text mode's newline."""
    env = ["-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "a.txt").write_bytes(b"one\r\n")
    for args in (["init", "-q"], ["add", "a.txt"], [*env, "commit", "-qm", "a"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    (tmp_path / "a.txt").write_bytes(b"two\r\n")
    diff = git(["diff", "HEAD"], tmp_path)
    assert diff is not None and "+two\r\n" in diff
    assert git(["no-such-command"], tmp_path) is None
