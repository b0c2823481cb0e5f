# SPDX-License-Identifier: MIT
"""``mushin-box logs``: every rank's output of a cell, from the files its status and the
layout name; one rank, the last lines, and following while the cell runs."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.layout import STATUS_FILE
from mushin_box._core.sidecars import SidecarWarning, write_json_atomic
from mushin_box._sweepdir.logs import rank_logs
from mushin_box.cli.main import main


def _cell(root: Path, status: str = "completed") -> Path:
    """A cell as a SLURM job leaves it (ranks 0 and 1 in submitit's files, listed in the
    status) beside a local rank file that the status does not list."""
    cell = root / "lr=0.1"
    slurm = root / ".submitit" / "7"
    slurm.mkdir(parents=True)
    (slurm / "7_0_log.out").write_text("r0 out 1\nr0 out 2\n")
    (slurm / "7_0_log.err").write_text("r0 err\n")
    (slurm / "7_1_log.out").write_text("r1 out 1\nr1 out 2\nr1 out 3\n")
    logs = {
        "rank0.out": str(slurm / "7_0_log.out"),
        "rank0.err": str(slurm / "7_0_log.err"),
        "rank1.out": str(slurm / "7_1_log.out"),
        "rank1.err": str(slurm / "7_1_log.err"),  # not written yet: left out
    }
    record = {"combo": {"lr": 0.1}, "status": status, "logs": logs, "host": "x", "pid": 1}
    write_json_atomic(cell / STATUS_FILE, record)
    (cell / "logs").mkdir()
    (cell / "logs" / "rank2.log").write_text("r2 line\n")
    return cell


def test_rank_logs_from_the_status_and_the_layout(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    found = rank_logs(cell)
    assert {r: [p.name for p in files] for r, files in found.items()} == {
        0: ["7_0_log.out", "7_0_log.err"],
        1: ["7_1_log.out"],
        2: ["rank2.log"],
    }


def test_logs_of_one_rank_all_ranks_and_the_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cell(tmp_path)
    assert main(["logs", str(tmp_path), "lr=0.1", "--rank", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == ["r1 out 1", "r1 out 2", "r1 out 3"]
    assert main(["logs", str(tmp_path), "--tail", "1"]) == 0  # the one cell: no CELL needed
    assert capsys.readouterr().out.splitlines() == [
        "[rank 0] r0 out 2",
        "[rank 0] r0 err",
        "[rank 1] r1 out 3",
        "[rank 2] r2 line",
    ]
    assert main(["logs", str(tmp_path / "lr=0.1"), "--rank", "5"]) == 2
    assert "ranks with output: 0, 1, 2" in capsys.readouterr().err
    assert main(["logs", str(tmp_path), "lr=9"]) == 2
    assert "its cells: lr=0.1" in capsys.readouterr().err


def test_follow_prints_what_is_appended_until_the_cell_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mushin_box.cli.logs as cli_logs

    cell = _cell(tmp_path, status="running")
    monkeypatch.setattr(cli_logs, "_POLL_S", 0.05)
    monkeypatch.setattr(cli_logs, "_LIVENESS_EVERY_S", 0.2)
    rank2 = cell / "logs" / "rank2.log"

    def later() -> None:
        time.sleep(0.5)
        with open(rank2, "a") as f:
            f.write("appended ")
            f.flush()
            time.sleep(0.3)  # half a line is not printed until it is whole
            f.write("whole\n")
        time.sleep(0.3)
        record = {"combo": {"lr": 0.1}, "status": "completed"}
        write_json_atomic(cell / STATUS_FILE, record)

    writer = threading.Thread(target=later)
    writer.start()
    # "running" with pid 1 on host "x": another host, so it counts as alive until completed
    assert main(["logs", str(tmp_path), "lr=0.1", "--rank", "2", "--tail", "0", "-f"]) == 0
    writer.join()
    assert capsys.readouterr().out.splitlines() == ["appended whole"]


@pytest.mark.parametrize("how", ["truncated", "rotated"])
def test_follow_goes_on_after_the_log_is_truncated_or_rotated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    import mushin_box.cli.logs as cli_logs

    cell = _cell(tmp_path, status="running")
    monkeypatch.setattr(cli_logs, "_POLL_S", 0.05)
    monkeypatch.setattr(cli_logs, "_LIVENESS_EVERY_S", 0.2)
    rank2 = cell / "logs" / "rank2.log"
    rank2.write_text("a long first line that the new file never outgrows\n")

    def later() -> None:
        time.sleep(0.5)
        if how == "truncated":
            rank2.write_text("")  # `: > log`
        else:
            rank2.rename(rank2.with_name("rank2.log.1"))
            rank2.write_text("")
        time.sleep(0.3)
        with open(rank2, "a") as f:
            f.write("after\n")
        time.sleep(0.5)
        write_json_atomic(cell / STATUS_FILE, {"combo": {"lr": 0.1}, "status": "completed"})

    writer = threading.Thread(target=later)
    writer.start()
    said = "was truncated" if how == "truncated" else "was replaced"
    with pytest.warns(SidecarWarning, match=said):
        assert main(["logs", str(tmp_path), "lr=0.1", "--rank", "2", "-f"]) == 0
    writer.join()
    assert capsys.readouterr().out.splitlines()[-1] == "after"


def test_logs_of_a_sweep_whose_parent_cannot_be_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep inside a directory one may enter but not list (mode 711, a shared scratch):
    ``logs`` reads the sweep and its cell, never the directory above them."""
    sweep = tmp_path / "scratch" / "sweep"
    _cell(sweep)
    scandir = os.scandir

    def unlisted(path: Any = ".") -> Any:
        if Path(path) == sweep.parent:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", unlisted)
    assert main(["logs", str(sweep), "--rank", "1"]) == 0  # its one cell
    assert capsys.readouterr().out.splitlines() == ["r1 out 1", "r1 out 2", "r1 out 3"]
    assert main(["logs", str(sweep / "lr=0.1"), "--rank", "1"]) == 0  # a cell given itself
    assert capsys.readouterr().out.splitlines() == ["r1 out 1", "r1 out 2", "r1 out 3"]
