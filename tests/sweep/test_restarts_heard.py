# SPDX-License-Identifier: MIT
"""A restarted cell says what happened (issue 43, item 4).

Every rank records how its task ended in its own rank record; a rank that starts again
keeps what its record said of the attempt before, so a rank with no end died without a
word (SIGKILL, the OOM killer, a crash). The restarted cell's status names that rank, its
node and the epoch the fit went on from; its duration sums the fit's attempts; and a cell
still running after a restart shows as restarting. (The real torchrun restart, a worker
SIGKILLed at epoch 2: tests/cli/test_cli_launch_torchrun.py.)
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.layout import FINGERPRINTS_FILE
from mushin_box._provenance.elastic import earlier_s, restarts, spent
from mushin_box._provenance.ranks import restart_cause, write_rank_end, write_rank_runtime
from mushin_box._sweepdir.board import cell_view
from mushin_box.cli.tables import detail, end_report


def _attempt(
    cell: Path, attempt: int, ends: dict[int, str | None], host: str, mp: pytest.MonkeyPatch
) -> None:
    """Ranks 0 and 1 start ``attempt``, rank r on ``<host><r>``; each ends as ``ends`` says
    (None: no end recorded, as a SIGKILLed rank leaves it)."""
    for rank, how in ends.items():
        mp.setattr(socket, "gethostname", lambda rank=rank: f"{host}{rank}")
        write_rank_runtime(cell, rank=rank, attempt=attempt)
        if how is not None:
            write_rank_end(cell, rank=rank, attempt=attempt, how=how)


def test_the_rank_that_died_without_a_word_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _attempt(tmp_path, 1, {0: "RuntimeError", 1: None}, "node", monkeypatch)  # rank 1 SIGKILLed
    (tmp_path / FINGERPRINTS_FILE).write_text(
        json.dumps({"starts": [{"epoch": 0, "attempt": 1}, {"epoch": 2, "attempt": 2}]})
    )
    _attempt(tmp_path, 2, {0: None, 1: None}, "node", monkeypatch)  # the restart, still running
    cause = restart_cause(tmp_path, 2)
    assert cause == {"rank": 1, "host": "node1", "ended": None, "epoch": 2}


def test_a_rank_that_raised_is_named_when_none_died_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _attempt(tmp_path, 1, {0: "Terminated", 1: "CUDAError"}, "gpu", monkeypatch)
    _attempt(tmp_path, 2, {0: None, 1: None}, "gpu", monkeypatch)
    raised = {"rank": 1, "host": "gpu1", "ended": "CUDAError", "epoch": None}
    assert restart_cause(tmp_path, 2) == raised
    _attempt(
        tmp_path, 3, {0: None, 1: None}, "gpu", monkeypatch
    )  # attempt 2 ended with no word of it
    assert restart_cause(tmp_path, 3)["rank"] == 0  # type: ignore[index]
    fresh = tmp_path / "fresh"
    _attempt(fresh, 1, {0: None}, "gpu", monkeypatch)
    assert restart_cause(fresh, 1) is None  # a first start lost nothing


def test_restarts_and_what_is_left_come_from_the_launcher() -> None:
    env = {"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "3"}
    assert restarts(env) == {"restarts": 1, "restarts_left": 2}
    assert restarts({"SLURM_RESTART_COUNT": "2"}) == {"restarts": 2, "restarts_left": None}
    assert restarts({"TORCHELASTIC_RESTART_COUNT": "0"}) == {}


def test_a_duration_sums_the_attempts_of_the_fit() -> None:
    failed = {"status": "failed", "duration_s": 40.0, "run_id": "r"}
    assert earlier_s(failed, True, "r") == 40.0
    assert earlier_s(failed, False, "r") == 0.0  # a fresh start counts from nothing
    ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=30)
    died = {"status": "running", "started": ago.isoformat(), "earlier_s": 5.0, "run_id": "r"}
    assert 34.0 < earlier_s(died, True, "r") < 60.0  # its rank 0 died without a word
    assert earlier_s(died, True, "another run") == 5.0  # last week's: its end is unknown
    assert spent({"earlier_s": 40.0}, 20.0) == {"duration_s": 60.0, "attempt_s": 20.0}
    assert spent({}, 20.0) == {"duration_s": 20.0}


def _status(**fields: Any) -> dict[str, Any]:
    return {"status": "completed", "attempt": 2, "combo": {"lr": 0.1}, **fields}


def test_status_and_the_summary_say_how_a_cell_got_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    after = {"rank": 3, "host": "slurmnode2", "ended": None, "epoch": 167}
    record = _status(restarts=1, restarts_left=0, restarted_after=after, duration_s=70.0)
    cell = cell_view(tmp_path, {"dir": "lr=0.1", "combo": {"lr": 0.1}}, record)
    said = (
        "after 1 restart (rank 3 on slurmnode2 was killed or crashed, no error recorded, "
        "restarted from epoch 167; 0 left)"
    )
    assert detail(cell) == said
    assert cell.duration_s == 70.0

    class Sweep:
        root, launcher, cells = tmp_path, None, (cell,)

        def counts(self) -> dict[str, int]:
            return {"completed": 1}

    assert end_report(Sweep(), "resume") == 0
    assert capsys.readouterr().out.splitlines()[1] == f"  completed lr=0.1  {said}"


def test_a_cell_running_again_after_a_restart_shows_as_restarting(tmp_path: Path) -> None:
    started = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=10)
    record = _status(
        status="running",
        restarts=1,
        restarts_left=2,
        earlier_s=50.0,
        started=started.isoformat(),
        host="n1",
        pid=os.getpid(),
    )
    cell = cell_view(tmp_path, {"dir": "lr=0.1", "combo": {"lr": 0.1}}, record)
    assert detail(cell) == "restarting (1, 2 left)"
    assert cell.duration_s is not None and 59.0 < cell.duration_s < 90.0  # 50 s before, 10 now


def test_the_signal_a_torchrun_agent_saw_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILLed worker writes nothing; its torchrun agent hears each failed worker
    (exit code -9, local rank 1, pid P), keeps it as a note by pid, and the restarted
    cell's rank 0 reads it back. A note of a pid that a new worker holds now is dropped by
    that worker: it names another process's death."""
    from mushin_box._core.layout import TORCHRUN_EXITS_ENV
    from mushin_box._slurm import torchrun

    exits = tmp_path / "exits"
    monkeypatch.setenv(TORCHRUN_EXITS_ENV, str(exits))
    _attempt(tmp_path / "cell", 1, {0: "Terminated", 1: None}, "node", monkeypatch)
    pid = os.getpid()  # the rank records' process: here, this one
    torchrun._note_exit(exits, -9, 1, pid)  # as the seam reports it
    torchrun._note_exit(exits, -15, 0, pid + 7)  # rank 0, stopped by the agent
    assert json.loads((exits / f"{pid}.json").read_text())["exitcode"] == -9
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)  # the restart's workers: new pids
    _attempt(tmp_path / "cell", 2, {0: None, 1: None}, "node", monkeypatch)
    after = restart_cause(tmp_path / "cell", 2)
    assert after == {"rank": 1, "host": "node1", "ended": None, "signal": "SIGKILL", "epoch": None}
    record = _status(restarts=1, restarts_left=0, restarted_after=after)
    cell = cell_view(tmp_path, {"dir": "cell", "combo": {}}, record)
    assert detail(cell) == "after 1 restart (rank 1 on node1 was killed by SIGKILL; 0 left)"

    # a worker of the pid that died starts: the note goes, the death is told without it
    monkeypatch.setattr(os, "getpid", lambda: pid)
    _attempt(tmp_path / "cell", 3, {0: None, 1: None}, "node", monkeypatch)
    assert not (exits / f"{pid}.json").exists()


def test_a_ranks_write_in_flight_is_not_read_as_a_second_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 folds the ranks' records while the others write how they ended: the temporary
    file of such a write (``.rank1.json.<pid>.<random>.tmp``) is no record of its own."""
    from mushin_box._provenance.ranks import read_rank_runtimes

    cell = tmp_path / "cell"
    _attempt(cell, 1, {0: "completed", 1: None}, "node", monkeypatch)
    ranks = cell / ".mushin" / "ranks"
    (ranks / ".rank1.json.4242.x1y2.tmp").write_bytes((ranks / "rank1.json").read_bytes())
    assert [r["rank"] for r in read_rank_runtimes(cell, attempt=1)] == [0, 1]
