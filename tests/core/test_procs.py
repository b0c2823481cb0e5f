# SPDX-License-Identifier: MIT
"""The bounded runner (``_core/procs.py``): a tool's output passed on and its last lines
kept; a tool whose reader's terminal is gone still runs to its end; past its time the
whole process group is stopped."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from mushin_box._core.procs import run_bounded

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
