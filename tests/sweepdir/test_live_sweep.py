# SPDX-License-Identifier: MIT
"""A sweep is live while any job of it is queued or running, a scheduler that does not
answer means "unknown" (never "ended"), and ``cancel`` acts only on ids and processes it
has checked. SLURM's tools are PATH stand-ins here; ``tests/slurm/test_live_sweep_slurm.py``
does the same on the real cluster."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from workflow_tasks import marker_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import JOBS_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json, timestamp, write_json_atomic
from mushin_box._slurm.jobs import UNKNOWN, job_states, sweep_mark
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.cancel import cancel
from mushin_box._sweepdir.liveness import pid_alive, process_start, same_process
from mushin_box._sweepdir.manifest import SweepBusyError
from mushin_box.cli.main import main

# a stand-in squeue/sacct/scancel: logs its argv, then prints STATES (id -> "state|comment")
# for the ids given with -j (an array's id: each of its tasks, as squeue -r prints them);
# FAIL=1 makes it exit 1 like a squeue that cannot reach slurmctld
_TOOL = textwrap.dedent(
    """\
    #!{python}
    import json, os, pwd, sys
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "calls.jsonl"), "a") as log:
        log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
    if os.path.exists(os.path.join(here, "FAIL")):
        sys.exit(1)
    states = json.load(open(os.path.join(here, "states.json")))
    if os.path.basename(sys.argv[0]) == "squeue" and "-j" in sys.argv:
        asked = sys.argv[sys.argv.index("-j") + 1].split(",")
        for job in [j for j in states if j in asked or j.split("_")[0] in asked]:
            state, _, comment = states[job].partition("|")
            users = os.path.join(here, "users.json")  # whose job: the caller's unless named
            user = json.load(open(users)).get(job) if os.path.exists(users) else None
            user = user or pwd.getpwuid(os.getuid()).pw_name
            tail = f"|{{user}}" if "%u" in sys.argv[-1] else ""
            tail += f"|{{comment}}" if "%k" in sys.argv[-1] else ""
            print(f"{{job}}|{{state}}{{tail}}")
    """
)


@pytest.fixture
def slurm_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """squeue, sacct and scancel stand-ins first on PATH; their folder holds states.json."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("squeue", "sacct", "scancel"):
        (folder / name).write_text(_TOOL.format(python=sys.executable))
        (folder / name).chmod(0o755)
    (folder / "states.json").write_text("{}")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    return folder


def _calls(tools: Path, name: str) -> list[list[str]]:
    path = tools / "calls.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [c[1:] for c in map(json.loads, lines) if c[0] == name]


def _sweep(root: Path, markers: Path, resume: bool = False):
    return Workflow(marker_task).run(
        working_dir=root, resume=resume, progress=False, x=multirun([1, 2]), markers=str(markers)
    )


def _jobs_file(root: Path, jobs: dict[str, list[str]], **extra: object) -> None:
    entries = [{"job_id": j, "overrides": o} for j, o in jobs.items()]
    record = {"schema": 1, "cluster": "slurm", "host": "login1", "submitted": timestamp()}
    write_json_atomic(root / JOBS_FILE, {**record, "detached": True, "jobs": entries, **extra})


def test_a_resume_while_the_last_submission_is_queued_refuses_and_keeps_its_jobs_file(
    tmp_path: Path, slurm_tools: Path
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    _jobs_file(root, {"88_0": ["x=1"], "88_1": ["x=2"]})
    (slurm_tools / "states.json").write_text(json.dumps({"88_0": "PENDING", "88_1": "PENDING"}))
    before = (root / JOBS_FILE).read_bytes()
    with pytest.raises(SweepBusyError) as refused:
        _sweep(root, markers, resume=True)
    message = str(refused.value)
    assert "88_0 (PENDING)" in message and "88_1 (PENDING)" in message
    assert f"mushin-box wait {root}" in message and f"mushin-box cancel {root}" in message
    assert "\n" not in message
    assert (root / JOBS_FILE).read_bytes() == before  # the only handle on the queued jobs
    assert len(list(markers.glob("*.done"))) == 2  # nothing ran again


def test_a_scheduler_that_does_not_answer_is_unknown_never_ended(
    tmp_path: Path, slurm_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    status = root / "x=1" / STATUS_FILE
    running = {**read_json(status), "status": "running", "slurm_job_id": "77_0"}
    write_json_atomic(status, {**running, "host": "node9", "pid": 4242, "pid_start": "b:1"})
    (slurm_tools / "FAIL").write_text("")  # squeue and sacct exit 1
    assert job_states(["77_0"]) == {"77_0": UNKNOWN}
    capsys.readouterr()
    assert main(["status", str(root), "--json"]) == 3  # may still run
    data = json.loads(capsys.readouterr().out)
    assert [c["state"] for c in data["cells"]] == ["unknown", "completed"]
    assert data["unanswered"] == ["77_0"]
    assert main(["status", str(root)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "77_0" in err[0] and "scheduler did not answer" in err[0]
    with pytest.raises(SweepBusyError, match="SLURM job 77_0"):  # never a second copy
        _sweep(root, markers, resume=True)
    assert read_json(status)["status"] == "running"
    assert len(list(markers.glob("*.done"))) == 2


def test_a_missing_slurm_conf_is_unknown_at_once(
    slurm_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", "/nonexistent/slurm.conf")
    assert job_states(["5", "6_1"]) == {"5": UNKNOWN, "6_1": UNKNOWN}
    assert _calls(slurm_tools, "squeue") == []  # not asked: it would retry for a minute


def test_status_after_a_detached_resume_shows_the_queued_attempt(
    tmp_path: Path, slurm_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    status = root / "x=1" / STATUS_FILE
    failed = {**read_json(status), "status": "failed", "ended": "2020-01-01T00:00:00+00:00"}
    write_json_atomic(status, failed)
    _jobs_file(root, {"90_0": ["x=1", f"markers={markers}"]})
    (slurm_tools / "states.json").write_text(json.dumps({"90_0": "PENDING"}))
    cells = {c.dir: c for c in read_sweep(root).cells}
    assert (cells["x=1"].state, cells["x=1"].job_id) == ("pending", "90_0")
    assert cells["x=2"].state == "completed"
    assert main(["status", str(root)]) == 3  # the resumed job waits: not "1 failed"
    # once it ended (here: its job is no longer known), the recorded attempt shows again
    (slurm_tools / "states.json").write_text(json.dumps({"90_0": "CANCELLED"}))
    assert {c.dir: c.state for c in read_sweep(root).cells}["x=1"] == "failed"


def test_a_running_status_that_names_no_owner_is_stale_and_wait_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_atomic(tmp_path / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "running"})
    (cell,) = read_sweep(tmp_path).cells
    assert cell.state == "failed" and cell.error_type == "StaleStatus"
    argv = ["wait", str(tmp_path), "--interval", "1", "--timeout", "30", "--no-progress"]
    assert main(argv) == 1  # ended, as the launch's would: not 3 (still running) at timeout
    assert read_json(tmp_path / "x=1" / STATUS_FILE)["status"] == "running"  # a reader


def test_cancel_passes_only_checked_ids_of_this_sweep_to_scancel(
    tmp_path: Path, slurm_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sweep"
    write_json_atomic(root / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "pending"})
    ours, foreign, ended = "91_0", "92", "93"
    states = {ours: f"PENDING|{sweep_mark(root)}", foreign: "RUNNING|someone else's"}
    (slurm_tools / "states.json").write_text(json.dumps(states))
    hostile = ["--name=X", 94, ["95"], None, "96;rm -rf /", ours, foreign, ended]
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
    jobs = [{"job_id": j} for j in hostile] + ["97", 98]
    write_json_atomic(root / JOBS_FILE, {**record, "jobs": jobs})
    capsys.readouterr()
    assert main(["cancel", str(root)]) == 0
    assert _calls(slurm_tools, "scancel") == [["--", ours]]
    err = capsys.readouterr().err
    assert f"{foreign}: not this sweep's" in err and f"{ended}: not in the queue" in err
    for entry in ("{'job_id': '--name=X'}", "{'job_id': 94}", "{'job_id': ['95']}", "'97'", "98"):
        assert f"{entry} is not a job entry" in err
    assert all(line.startswith("warning: ") for line in err.splitlines())


def test_cancel_leaves_a_job_of_this_sweep_that_another_user_runs(
    tmp_path: Path, slurm_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job carrying this sweep's mark (a comment anyone can set) but run by another user,
    as squeue's user field says, is not cancelled, and said so (issue 42)."""
    root = tmp_path / "sweep"
    write_json_atomic(root / "x=1" / STATUS_FILE, {"combo": {"x": 1}, "status": "pending"})
    ours, theirs = "91", "92"
    mark = sweep_mark(root)
    states = {ours: f"PENDING|{mark}", theirs: f"RUNNING|{mark}"}
    (slurm_tools / "states.json").write_text(json.dumps(states))
    (slurm_tools / "users.json").write_text(json.dumps({theirs: "mallory"}))
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp()}
    write_json_atomic(root / JOBS_FILE, {**record, "jobs": [{"job_id": ours}, {"job_id": theirs}]})
    capsys.readouterr()
    assert main(["cancel", str(root)]) == 0
    assert _calls(slurm_tools, "scancel") == [["--", ours]]
    me = pwd.getpwuid(os.getuid()).pw_name
    assert f"{theirs}: run by mallory, not by the sweep's owner {me}" in capsys.readouterr().err


def test_a_process_is_signalled_only_when_its_recorded_start_matches(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = process_start(sleeper.pid)
        assert start is not None and same_process(sleeper.pid, start)
        for recorded in (None, start + "0"):  # none recorded; another process's
            assert not same_process(sleeper.pid, recorded)
        host = os.uname().nodename
        running = {"combo": {"x": 1}, "status": "running", "host": host, "pid": sleeper.pid}
        write_json_atomic(tmp_path / "x=1" / STATUS_FILE, running)  # no pid_start
        report = cancel(tmp_path, grace_s=0, timeout_s=5)
        assert pid_alive(sleeper.pid) and report.cancelled == ()
        assert any("records no start time" in line for line in report.refused)
        assert read_json(tmp_path / "x=1" / STATUS_FILE)["status"] == "running"
    finally:
        sleeper.kill()
        sleeper.wait()
    # never pid 1, this process, or an ancestor of it, whatever a record says
    for pid in (1, os.getpid(), os.getppid()):
        assert not same_process(pid, process_start(pid))


_EXP = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def test_launch_resume_of_a_live_sweep_is_one_line_exit_2(
    tmp_path: Path, slurm_tools: Path
) -> None:
    (tmp_path / "exp.py").write_text(_EXP)
    root = tmp_path / "sweep"
    argv = [sys.executable, "-m", "mushin_box", "launch", "exp.py", "--local", "--no-progress"]
    argv += ["x=1,2", "--working-dir", str(root)]
    run = lambda *more: subprocess.run(  # noqa: E731
        [*argv, *more], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert run().returncode == 0
    _jobs_file(root, {"88_0": ["x=1"]})
    (slurm_tools / "states.json").write_text(json.dumps({"88_0": "RUNNING"}))
    proc = run("--resume")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mushin-box launch: error: this sweep is still live: ")
    assert "88_0 (RUNNING)" in line and f"mushin-box cancel {root}" in line


def test_a_detached_launch_that_submitted_nothing_names_no_old_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mushin_box import SweepHandle
    from mushin_box._slurm.submitted import read_submission
    from mushin_box.cli import launch

    _jobs_file(tmp_path, {"41_0": ["x=1"], "41_1": ["x=2"]})  # the first, finished launch
    before = read_submission(tmp_path)
    assert launch._detached(SweepHandle(tmp_path), before) == 0  # every cell was reused
    out = capsys.readouterr().out
    assert "nothing submitted" in out and "41_0" not in out and "submitted 2" not in out
