# SPDX-License-Identifier: MIT
"""``mushin-box wait``: follows a sweep run by another process until nothing of it runs,
then prints the launch's summary and exits as the launch would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from workflow_tasks import grid_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import LAUNCH_FILE, MANIFEST_FILE
from mushin_box._core.sidecars import write_json_atomic
from mushin_box._sweepdir.manifest import SweepLock
from mushin_box.cli.main import main

TESTS = Path(__file__).resolve().parents[1]


def test_wait_of_a_finished_sweep_exits_as_its_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Workflow(grid_task).run(
            lr=multirun([0.1, 1.0]),
            working_dir=tmp_path,
            on_error="nan",
            progress=False,
            fail_at=1.0,
            seed=1,
        )
    capsys.readouterr()
    assert main(["wait", str(tmp_path), "--no-progress", "--interval", "1"]) == 1
    captured = capsys.readouterr()
    assert f"{tmp_path}: 1 completed, 1 failed" in captured.out
    assert "lr=1.0: failed: ValueError: planned failure" in captured.out
    # started from Python: no launch record, so `mushin-box resume DIR` would refuse it
    assert "resume=True" in captured.err and "mushin-box resume" not in captured.err
    # a launch records itself in the sweep: then `resume DIR` replays it
    (tmp_path / LAUNCH_FILE).write_text("{}")
    assert main(["wait", str(tmp_path), "--no-progress", "--interval", "1"]) == 1
    assert f"mushin-box resume {tmp_path}" in capsys.readouterr().err
    # piped or logged (not a terminal): the summary, and no progress bar
    assert main(["wait", str(tmp_path), "--interval", "1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"[mushin-box] {tmp_path}: 1 completed") and "━" not in out, out


def test_wait_gives_up_after_its_timeout_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"lr": [0.1]}, "cells": {}})
    with SweepLock(tmp_path):  # a driver that has not started its cell yet
        t0 = time.monotonic()
        argv = ["wait", str(tmp_path), "--no-progress", "--interval", "60", "--timeout", "1"]
        code = main(argv)
        assert code == 3 and time.monotonic() - t0 < 30  # not a whole interval after it
    assert "still running after 1 s" in capsys.readouterr().err
    assert main(["wait", str(tmp_path), "--interval", "0.1"]) == 2


_DRIVER = """
import sys
from workflow_tasks import marker_task
from mushin_box import Workflow, multirun
Workflow(marker_task).run(x=multirun([1, 2]), markers=sys.argv[2], sleep_s=1,
                          working_dir=sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_wait_follows_a_sweep_run_elsewhere_until_it_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(sweep), str(tmp_path / "markers")],
        env={**os.environ, "PYTHONPATH": path},
    )
    try:
        deadline = time.monotonic() + 120
        while not (sweep / MANIFEST_FILE).exists():
            assert driver.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        code = main(["wait", str(sweep), "--no-progress", "--interval", "1", "--timeout", "120"])
        assert code == 0
        assert driver.wait(timeout=30) == 0
    finally:
        driver.kill()
        driver.wait()
    assert f"{sweep}: 2 completed" in capsys.readouterr().out
    assert len(list((tmp_path / "markers").iterdir())) == 2


def test_a_failed_launch_names_the_command_that_resumes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mushin_box.cli.launch import _resume_command

    # the launch is recorded in the sweep: `resume DIR` replays it, overrides and all
    monkeypatch.setattr(sys, "argv", ["mushin-box", "launch", "exp.py", "lr=0.1,1"])
    assert _resume_command("/r/my sweep") == "mushin-box resume '/r/my sweep'"
