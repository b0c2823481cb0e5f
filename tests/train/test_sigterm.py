# SPDX-License-Identifier: MIT
"""SIGTERM to a local HydraDDP run (what ``kill``, ``timeout``, systemd and CI runners
send): every rank ends in bounded time, no process of the run is left, and the cell is
recorded ``cancelled`` (Lightning 2.6's own handler hangs both ranks for good)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mushin_box._core.layout import STATUS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box._sweepdir.liveness import pid_alive, process_tree

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sigterm_ends_a_local_two_rank_run_and_records_it_cancelled(tmp_path: Path) -> None:
    run = tmp_path / "run"
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mushin_box",
            "launch",
            str(REPO / "examples" / "exp.py"),
            "--gpus",
            "2",
            "--local",
            "--working-dir",
            str(run),
            "--no-progress",
            "trainer.max_epochs=100000",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # training is under way once both ranks run and rank 0 saved a checkpoint
        deadline = time.monotonic() + 180
        tree: list[int] = []
        while not any((run / "cell" / "ckpt").glob("*.ckpt")) or len(tree) < 2:
            assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
            assert time.monotonic() < deadline, "the run did not start training"
            time.sleep(0.2)
            tree = process_tree(driver.pid)
        assert read_json(run / "cell" / STATUS_FILE)["status"] == "running"
        t0 = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=60)
        while any(pid_alive(p) for p in tree) and time.monotonic() - t0 < 30:
            time.sleep(0.1)
        assert not [p for p in tree if pid_alive(p)], "processes of the run are left"
        assert time.monotonic() - t0 < 30
        assert code == 128 + signal.SIGTERM
        status = read_json(run / "cell" / STATUS_FILE)
        assert status["status"] == "cancelled" and "SIGTERM" in status["reason"]
        # rank 1's output went to its file in the cell, not through rank 0's terminal
        assert "GLOBAL_RANK: 1" in (run / "cell" / "logs" / "rank1.log").read_text()
        assert driver.stderr is not None and "GLOBAL_RANK: 1" not in driver.stderr.read()
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
