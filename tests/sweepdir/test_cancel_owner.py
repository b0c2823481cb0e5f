# SPDX-License-Identifier: MIT
"""``cancel`` acts only on what the sweep's owner owns: a status or jobs file that another
user owns or can write names no process or job to stop, a process of another uid is never
signalled, a refused job is never waited for, and a jobs file of 100,000 entries costs a
number of comparisons linear in its size (issue 42, cases 1, 6 and 7)."""

from __future__ import annotations

import grp
import os
import pwd
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import mushin_box._sweepdir.board as board
import mushin_box._sweepdir.cancel as cancel_mod
from mushin_box._core.layout import JOBS_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json, timestamp, write_json_atomic
from mushin_box._slurm.jobs import sweep_mark
from mushin_box._sweepdir.board import CellView
from mushin_box._sweepdir.cancel import cancel
from mushin_box._sweepdir.liveness import pid_alive, process_start
from mushin_box._sweepdir.manifest import write_grid
from mushin_box.cli.main import main

NOBODY = 65534
ME = pwd.getpwuid(os.getuid()).pw_name  # the name squeue shows for our jobs
as_root = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def _running(root: Path, pid: int) -> Path:
    status = root / "a=1" / STATUS_FILE
    record = {"combo": {"a": 1}, "status": "running", "attempt": 1}
    record.update(host=socket.gethostname(), pid=pid, pid_start=process_start(pid))
    write_json_atomic(status, record)  # its true start: only the owner rule refuses it
    return status


@as_root
def test_a_status_of_another_user_names_no_process_to_kill(
    tmp_path: Path, sleeper: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    status = _running(tmp_path, sleeper.pid)
    os.chown(status, NOBODY, NOBODY)
    assert main(["cancel", str(tmp_path), "--grace", "0"]) == 1
    out, err = capsys.readouterr()
    assert pid_alive(sleeper.pid) and "a=1: cancelled" not in out
    (line,) = err.splitlines()
    assert f"belongs to uid {NOBODY}, not to the sweep's owner (uid 0)" in line
    assert read_json(status)["status"] == "running"


def test_a_status_others_can_write_names_no_process_to_kill(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    status = _running(tmp_path, sleeper.pid)
    for shared in (status, status.parent):
        shared.chmod(0o666 if shared.is_file() else 0o777)
        report = cancel(tmp_path, grace_s=0, timeout_s=2)
        assert pid_alive(sleeper.pid) and report.cancelled == ()
        assert any("can be written by other users" in line for line in report.refused)
        shared.chmod(0o644 if shared.is_file() else 0o755)


@as_root
def test_root_signals_no_process_the_sweeps_owner_does_not_own(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    root = tmp_path / "sweep"
    status = _running(root, sleeper.pid)
    for path in (root, status.parent, status):  # nobody's whole sweep names root's process
        os.chown(path, NOBODY, NOBODY)
    report = cancel(root, grace_s=0, timeout_s=2)
    assert pid_alive(sleeper.pid) and report.cancelled == ()
    assert any(
        f"runs as uid 0, not as the sweep's owner (uid {NOBODY})" in r for r in report.refused
    )


def _completed(root: Path) -> None:
    write_json_atomic(root / "a=1" / STATUS_FILE, {"combo": {"a": 1}, "status": "completed"})


def _foreign_job(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A sweep whose a=2 never started, and whose jobs file names a job of someone else
    that squeue shows running; returns the job ids each job_states call asked about."""
    _completed(root)
    write_grid(root, {"a": [1, 2]})
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
    write_json_atomic(root / JOBS_FILE, {**record, "jobs": [{"job_id": "92"}]})
    asked: list[list[str]] = []
    shown = {"92": ("RUNNING", "someone else's", ME)}
    monkeypatch.setattr(cancel_mod, "queued_jobs", lambda ids, **_: {j: shown[j] for j in ids})
    monkeypatch.setattr(cancel_mod, "job_states", lambda ids, **_: asked.append(ids) or {})
    monkeypatch.setattr(cancel_mod, "scancel", lambda ids: None)
    return asked


def test_a_refused_job_is_never_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _foreign_job(tmp_path, monkeypatch)
    report = cancel(tmp_path, grace_s=0, timeout_s=3)
    assert any("92: not this sweep's" in line for line in report.refused)
    assert ["92"] not in asked and report.unreachable == ()
    assert report.cancelled == ("a=2",)  # no job of the sweep can start it any more


def test_a_scancel_that_cannot_run_marks_no_queued_cell_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _foreign_job(tmp_path, monkeypatch)
    running = {"combo": {"a": 3}, "status": "running", "attempt": 1, "slurm_job_id": "93"}
    write_json_atomic(tmp_path / "a=3" / STATUS_FILE, running)
    write_grid(tmp_path, {"a": [1, 2, 3]})
    # the reader sees job 93 running, with or without a cluster here
    monkeypatch.setattr(board, "job_states", lambda ids, **_: dict.fromkeys(ids, "RUNNING"))
    mark = sweep_mark(tmp_path.resolve())
    monkeypatch.setattr(
        cancel_mod, "queued_jobs", lambda ids, **_: dict.fromkeys(ids, ("PENDING", mark, ME))
    )
    monkeypatch.setattr(cancel_mod, "scancel", lambda ids: "[Errno 2] No such file: 'scancel'")
    report = cancel(tmp_path, grace_s=0, timeout_s=3)
    assert report.cancelled == () and report.scancelled == ()  # job 92 may still start a=2
    why = dict(report.unreachable)
    assert sorted(why) == ["a=2", "a=3"]  # the queued cell, and the running one of job 93
    said = "scancel could not run ([Errno 2] No such file: 'scancel'): cancel again where it runs"
    assert all(said in w for w in why.values()), why


@as_root
def test_a_jobs_file_of_another_user_names_no_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _foreign_job(tmp_path, monkeypatch)
    os.chown(tmp_path / JOBS_FILE, NOBODY, NOBODY)
    called: list[object] = []
    monkeypatch.setattr(cancel_mod, "queued_jobs", lambda ids, **_: called.append(ids) or {})
    report = cancel(tmp_path, grace_s=0, timeout_s=3)
    assert called == [] and report.cancelled == ()
    assert any(f"{JOBS_FILE} belongs to uid {NOBODY}" in line for line in report.refused)
    ((cell, why),) = report.unreachable  # may still be started by a job it names
    assert cell == "a=2" and "not the sweep owner's" in why


class _Id(str):
    """A job id that counts the comparisons made with it: a list's ``in`` compares with
    every element, a set's or dict's with about one."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Id.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_a_jobs_file_of_100_000_entries_costs_linear_comparisons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 100_000
    ids = [_Id(f"{1000 + i}") for i in range(n)]
    mark = sweep_mark(tmp_path.resolve())
    batches: list[int] = []

    def queued(asked: list[str], **_: object) -> dict[str, tuple[str, str]]:
        batches.append(len(asked))  # half are this sweep's, half someone else's
        return {j: ("PENDING", mark if int(j) % 2 else "", ME) for j in asked}

    _completed(tmp_path)
    write_json_atomic(tmp_path / JOBS_FILE, {"schema": 1, "cluster": "slurm", "jobs": []})
    monkeypatch.setattr(cancel_mod, "checked_job_ids", lambda submission: (ids, []))
    monkeypatch.setattr(cancel_mod, "queued_jobs", queued)
    monkeypatch.setattr(cancel_mod, "scancel", lambda ids: None)
    _Id.compared = 0
    report = cancel(tmp_path, grace_s=0, timeout_s=1)
    assert len(report.scancelled) == n // 2
    assert _Id.compared < 10 * n  # a list's `in`: about n * n / 2
    assert max(batches) <= cancel_mod._SQUEUE_BATCH  # one argument fits the kernel's limit


def test_cancelling_10_000_cells_that_never_started_costs_linear_comparisons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every queued cell of a big array cancelled before it started: the cells marked
    cancelled are looked up as a set, not a list (whose ``in`` compares with each)."""
    n = 10_000
    _completed(tmp_path)
    write_grid(tmp_path, {"a": list(range(1, n + 1))})
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
    write_json_atomic(tmp_path / JOBS_FILE, {**record, "jobs": [{"job_id": "92"}]})
    monkeypatch.setattr(cancel_mod, "queued_jobs", lambda ids, **_: {})  # the queue emptied
    monkeypatch.setattr(cancel_mod, "job_states", lambda ids, **_: {})
    label = cancel_mod.cell_label
    monkeypatch.setattr(cancel_mod, "cell_label", lambda d, c: _Id(label(d, c)))
    _Id.compared = 0
    report = cancel(tmp_path, grace_s=0, timeout_s=1)
    assert len(report.cancelled) == n - 1 and not report.unreachable
    assert _Id.compared < 10 * n  # a list's `in`: about n * n / 2


def test_cancelling_running_cells_costs_linear_comparisons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running SLURM cells, half of whose jobs left the queue (not cancelled) and, of the
    rest, half end at the cancel: the cells kept and dropped are sorted in one pass each
    (a list's ``remove`` compares each dropped cell with every one kept before it)."""
    n = 600
    cells = [
        CellView(f"a={i}", {"a": i}, "running", "running", job_id=str(1000 + i), host="node")
        for i in range(n)
    ]
    for cell in cells:
        status = {"combo": cell.combo, "status": "running", "slurm_job_id": cell.job_id}
        write_json_atomic(tmp_path / str(cell.dir) / STATUS_FILE, status)
    jobs = [{"job_id": c.job_id} for c in cells]
    write_json_atomic(tmp_path / JOBS_FILE, {"schema": 1, "cluster": "slurm", "jobs": jobs})
    mark = sweep_mark(tmp_path.resolve())

    def scancel(ids: list[str]) -> None:  # every other cancelled job ends at once
        for job in ids[::2]:
            status = tmp_path / f"a={int(job) - 1000}" / STATUS_FILE
            ended = {"status": "cancelled", "ended": timestamp()}
            write_json_atomic(status, {**read_json(status), **ended})

    shown = {c.job_id: ("RUNNING", mark, ME) for c in cells if int(str(c.job_id)) % 2 == 0}
    monkeypatch.setattr(cancel_mod, "read_sweep", lambda root: SimpleNamespace(cells=cells))
    monkeypatch.setattr(cancel_mod, "_cell_problem", lambda *_: None)
    monkeypatch.setattr(
        cancel_mod, "queued_jobs", lambda ids, **_: {j: shown[j] for j in ids if j in shown}
    )
    monkeypatch.setattr(cancel_mod, "scancel", scancel)
    monkeypatch.setattr(cancel_mod, "job_states", lambda ids, **_: dict.fromkeys(ids, "RUNNING"))
    compared = []
    equal = CellView.__eq__
    monkeypatch.setattr(CellView, "__eq__", lambda a, b: compared.append(1) or equal(a, b))
    report = cancel(tmp_path, grace_s=0, timeout_s=0.1)
    assert len(report.cancelled) == n // 4 and len(report.unreachable) == 3 * n // 4
    assert len(compared) < 10 * n  # list.remove: about n * n / 4


def test_a_squeue_that_does_not_answer_is_not_blamed_on_slurm_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _completed(tmp_path)
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
    write_json_atomic(tmp_path / JOBS_FILE, {**record, "jobs": [{"job_id": "92"}]})
    monkeypatch.setattr(cancel_mod, "queued_jobs", lambda ids, **_: None)
    report = cancel(tmp_path, grace_s=0, timeout_s=1)
    (line,) = report.refused
    assert "squeue did not answer when asked about 1 job(s)" in line
    assert "check SLURM_CONF" not in line


def test_a_status_swapped_after_the_sweep_was_read_is_not_acted_on(
    tmp_path: Path, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    status = _running(tmp_path, sleeper.pid)
    swapped = {**read_json(status), "pid": os.getppid()}  # another process, after the read
    read_sweep = cancel_mod.read_sweep

    def read_then_swap(root: Path) -> object:
        sweep = read_sweep(root)
        write_json_atomic(status, swapped)
        return sweep

    monkeypatch.setattr(cancel_mod, "read_sweep", read_then_swap)
    report = cancel(tmp_path, grace_s=0, timeout_s=2)
    assert pid_alive(sleeper.pid) and report.cancelled == ()
    assert any("changed while cancel read it" in line for line in report.refused)


def test_a_sweep_written_under_umask_002_is_the_owners_when_its_group_is_private(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # Debian and Red Hat give each user a group of their own, where umask 002 is usual:
    # g+w there lets no one else write (resume, reproduce and cancel refused such sweeps)
    user, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid())
    assert group.gr_name == user, "this test needs a user-private group (UPG)"
    old = os.umask(0o002)
    try:
        status = _running(tmp_path, sleeper.pid)
    finally:
        os.umask(old)
    assert status.stat().st_mode & stat.S_IWGRP and status.parent.stat().st_mode & stat.S_IWGRP
    report = cancel(tmp_path, grace_s=0, timeout_s=5)
    assert report.refused == () and sleeper.wait(timeout=10) is not None


@as_root
def test_a_status_a_shared_group_can_write_names_no_process_to_kill(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    status = _running(tmp_path, sleeper.pid)
    os.chown(status, 0, grp.getgrnam("staff").gr_gid)
    status.chmod(0o664)
    report = cancel(tmp_path, grace_s=0, timeout_s=2)
    assert pid_alive(sleeper.pid) and report.cancelled == ()
    assert any("can be written by other users" in line for line in report.refused)
