# SPDX-License-Identifier: MIT
"""The sweep as readers see it (``mushin_box._sweepdir.board``): states from the sidecars,
corrected for owners that are gone, read without writing anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from workflow_tasks import grid_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import LOCK_FILE, MANIFEST_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._sweepdir import board
from mushin_box._sweepdir.manifest import SweepLock


def _sweep(root: Path, **kwargs: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the failed cell's warning: asserted elsewhere
        Workflow(grid_task).run(
            lr=multirun([0.1, 1.0]), working_dir=root, on_error="nan", progress=False, **kwargs
        )


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(root.rglob("*"))
    }


def test_a_finished_sweep_reads_as_its_sidecars_say(tmp_path: Path) -> None:
    _sweep(tmp_path, fail_at=1.0, seed=1)
    before = _snapshot(tmp_path)
    sweep = board.read_sweep(tmp_path)
    assert _snapshot(tmp_path) == before  # a reader writes nothing
    assert sweep.params == ("lr",)
    by_lr = {c.combo["lr"]: c for c in sweep.cells}
    good, bad = by_lr[0.1], by_lr[1.0]
    assert (good.state, good.metrics) == ("completed", {"loss": 0.2, "neg": -0.1})
    assert good.attempt == 1 and good.host == socket.gethostname() and good.duration_s is not None
    assert bad.state == "failed" and bad.metrics == {}
    assert bad.error_type == "ValueError" and "planned failure" in (bad.error_message or "")
    assert bad.error_file and Path(bad.error_file).is_file()
    assert sweep.counts() == {"completed": 1, "failed": 1}
    assert sweep.finished and not sweep.going and not sweep.active


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _running(root: Path, name: str, lr: float, **fields: object) -> None:
    write_json_atomic(
        root / name / STATUS_FILE,
        {
            "combo": {"lr": lr},
            "status": "running",
            "attempt": 1,
            "started": "2026-01-01T00:00:00+00:00",
            **fields,
        },
    )


def test_a_running_cell_whose_process_died_shows_failed_and_the_file_is_left(
    tmp_path: Path,
) -> None:
    host = socket.gethostname()
    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"lr": [0.1, 1.0]}, "cells": {}})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _running(tmp_path, "lr=0.1", 0.1, host=host, pid=sleeper.pid)
        dead = _dead_pid()
        _running(tmp_path, "lr=1.0", 1.0, host=host, pid=dead)
        cells = {c.combo["lr"]: c for c in board.read_sweep(tmp_path).cells}
        assert cells[0.1].state == "running" and cells[0.1].duration_s
        assert cells[1.0].state == "failed" and cells[1.0].recorded_state == "running"
        assert f"process {dead}" in (cells[1.0].reason or "")
        assert cells[1.0].error_type == "JobEnded"
        assert read_json(tmp_path / "lr=1.0" / STATUS_FILE)["status"] == "running"
        # liveness=False shows the files as they are
        raw = {c.combo["lr"]: c for c in board.read_sweep(tmp_path, liveness=False).cells}
        assert raw[1.0].state == "running"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_on_another_host_is_not_judged(tmp_path: Path) -> None:
    _running(tmp_path, "lr=0.1", 0.1, host="some-other-node", pid=_dead_pid())
    (cell,) = board.read_sweep(tmp_path).cells
    assert cell.state == "running"


def test_pending_cells_count_as_going_only_while_a_driver_holds_the_lock(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"lr": [0.1]}, "cells": {}})
    assert not board.driver_running(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()  # probing never creates the lock file
    with SweepLock(tmp_path):
        sweep = board.read_sweep(tmp_path)
        assert sweep.active and sweep.going and sweep.counts() == {"pending": 1}
    sweep = board.read_sweep(tmp_path)
    assert not sweep.active and not sweep.going


def test_not_a_sweep_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a sweep directory"):
        board.read_sweep(tmp_path)


def test_find_sweeps_newest_first_without_entering_cells_or_hidden_dirs(tmp_path: Path) -> None:
    for name in ("a", "deep/er/b", ".hidden/c"):
        write_json_atomic(tmp_path / name / MANIFEST_FILE, {"grid": {}, "cells": {}})
    old = time.time() - 100
    os.utime(tmp_path / "a" / MANIFEST_FILE, (old, old))
    # a manifest inside a cell of "a" is not a sweep of its own
    write_json_atomic(tmp_path / "a" / "x=1" / MANIFEST_FILE, {"grid": {}, "cells": {}})
    found = [p.relative_to(tmp_path).as_posix() for p in board.find_sweeps(tmp_path)]
    assert found == ["deep/er/b", "a"]
    assert board.find_sweeps(tmp_path, max_depth=1) == [tmp_path / "a"]
    assert board.latest_sweep(tmp_path) == tmp_path / "deep/er/b"
    assert board.latest_sweep(tmp_path / "deep" / "er" / "b" / "..") is not None


@pytest.mark.slurm
def test_slurm_cells_are_judged_by_their_jobs(slurm_cluster: object, tmp_path: Path) -> None:
    from mushin_box._slurm.jobs import job_states

    def sbatch(*wrap: str) -> str:
        out = subprocess.run(
            ["sbatch", "--parsable", "-N1", "-n1", "-o", "/dev/null", "--wrap", *wrap],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return out.stdout.strip().split(";")[0]

    live, done = sbatch("sleep 60"), sbatch("true")
    try:
        deadline = time.monotonic() + 60
        while job_states([done]).get(done) != "COMPLETED":
            assert time.monotonic() < deadline, job_states([done])
            time.sleep(0.2)
        states = job_states([live, done, "999999"])
        assert states[done] == "COMPLETED" and states[live] in ("PENDING", "RUNNING")
        assert "999999" not in states
        _running(tmp_path, "lr=0.1", 0.1, slurm_job_id=live, host="slurmnode1", pid=1)
        _running(tmp_path, "lr=1.0", 1.0, slurm_job_id=done, host="slurmnode1", pid=1)
        cells = {c.combo["lr"]: c for c in board.read_sweep(tmp_path).cells}
        assert cells[0.1].state == "running" and cells[0.1].job_id == live
        assert cells[1.0].state == "failed"
        assert f"SLURM job {done} ended COMPLETED" in (cells[1.0].reason or "")
    finally:
        subprocess.run(["scancel", live], check=False, timeout=30)


def test_the_manifest_written_after_a_launch_records_an_abandoned_cell_as_failed(
    tmp_path: Path,
) -> None:
    from mushin_box._sweepdir.manifest import finish_launch

    write_json_atomic(tmp_path / MANIFEST_FILE, {"grid": {"lr": [1.0]}, "cells": {}})
    _running(tmp_path, "lr=1.0", 1.0, host=socket.gethostname(), pid=_dead_pid())
    assert finish_launch(tmp_path, None)[0] == ["lr=1.0"]
    assert read_json(tmp_path / "lr=1.0" / STATUS_FILE)["status"] == "failed"
    # the manifest is built from the same read of the status files: it says so too
    (entry,) = read_json(tmp_path / MANIFEST_FILE)["cells"].values()
    assert (entry["status"], entry["error"]["type"]) == ("failed", "JobEnded")
