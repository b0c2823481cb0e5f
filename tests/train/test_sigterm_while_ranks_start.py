# SPDX-License-Identifier: MIT
"""A stop is prompt at every moment of a local 2-rank run (issue 29, item 5): SIGTERM at
the moment the cell shows ``running``, or while rank 1 is still starting, ends the whole
run and records the cell ``cancelled``. Rank 0 used to sit in torch's rendezvous, a C++
wait no signal handler interrupts, until rank 1 joined; and SIGTERM before the task began
killed the driver with the status left at ``running``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mushin_box._core.layout import ERROR_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box._sweepdir.liveness import process_tree

# rank 1 takes 10 minutes to build its datamodule (a download, a slow filesystem)
SLOW_EXP = """
import os
import time

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP
from mushin_box.testing import TinyDataModule, TinyModule


class SlowRanks(TinyDataModule):
    def __init__(self, sleep_s: float = 0.0) -> None:
        super().__init__()
        if os.environ.get("MUSHIN_DDP_PARENT_PID"):  # the ranks HydraDDP starts
            time.sleep(sleep_s)


Config = make_config(
    seed=1,
    trainer=builds(
        pl.Trainer, accelerator="cpu", max_epochs=1, strategy=builds(HydraDDP), logger=False,
        enable_progress_bar=False, enable_model_summary=False,
        default_root_dir="${hydra:runtime.output_dir}",
    ),
    module=builds(TinyModule),
    datamodule=builds(SlowRanks, sleep_s=600.0),
)
"""


def status_of(run: Path) -> str | None:
    record = read_json(run / "cell" / STATUS_FILE, default=None)
    return record.get("status") if isinstance(record, dict) else None


def group_gone(pgid: int, timeout_s: float) -> bool:
    """Whether every process of the group has ended, waiting at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["running", "rank 1 starting"])
def test_sigterm_while_the_ranks_start_ends_the_run_and_records_it_cancelled(
    tmp_path: Path, moment: str
) -> None:
    (tmp_path / "slow_exp.py").write_text(SLOW_EXP)
    run = tmp_path / "run"
    argv = ["launch", "slow_exp.py", "--gpus", "2", "--local", "--working-dir", str(run)]
    driver = subprocess.Popen(
        [sys.executable, "-m", "mushin_box", *argv, "--no-progress"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: every rank of the run is in it
    )
    try:
        deadline = time.monotonic() + 180
        while status_of(run) != "running" or (
            moment != "running" and len(process_tree(driver.pid)) < 2
        ):
            assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
            assert time.monotonic() < deadline, f"the run never reached {moment!r}"
            time.sleep(0.05)
        t0 = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        try:
            code = driver.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"SIGTERM at {moment!r} did not end the run within 20 s")
        print(f"SIGTERM at {moment!r}: the driver ended in {time.monotonic() - t0:.1f} s")
        assert group_gone(driver.pid, 10), "processes of the run are left"
        assert code == 128 + signal.SIGTERM, driver.stderr.read() if driver.stderr else ""
        status = read_json(run / "cell" / STATUS_FILE)
        assert status["status"] == "cancelled" and "SIGTERM" in status["reason"]
    finally:
        if driver.poll() is None or not group_gone(driver.pid, 0.1):
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()


@pytest.mark.slow
def test_a_rank_that_dies_before_joining_fails_the_cell_at_once(tmp_path: Path) -> None:
    # rank 0 used to wait in the rendezvous until its observer killed it 30 s later
    (tmp_path / "slow_exp.py").write_text(
        SLOW_EXP.replace("time.sleep(sleep_s)", "raise OSError('no data here')")
    )
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", "slow_exp.py", "--gpus", "2"]
        + ["--local", "--working-dir", str(run), "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert status_of(run) == "failed"
    error = (run / "cell" / ERROR_FILE).read_text()
    assert "rank 1" in error and "before joining the process group" in error
