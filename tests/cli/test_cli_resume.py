# SPDX-License-Identifier: MIT
"""``mushin-box resume DIR [CELL...]`` replays the recorded launch: what it does per cell,
the cells it runs, and the change it refuses (a checkpoint thrown away) unless --restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main

EXP = """
import os

from mushin_box import Workflow


def task(x: int = 1, tag: str = "a") -> dict:
    if str(x) == os.environ.get("FAIL_X"):
        raise RuntimeError("asked to fail")
    return {"y": float(x), "tagged_b": float(tag == "b")}


workflow = Workflow(task)
"""


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
    )


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """A local sweep x=1,2,3 tag=b whose cell x=2 failed, launched from tmp_path."""
    (tmp_path / "exp.py").write_text(EXP)
    args = ("launch", "exp.py", "x=1,2,3", "tag=b", "--local", "--no-progress")
    proc = _cli(*args, "--working-dir", "sweep", cwd=tmp_path, FAIL_X="2")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"mushin-box resume {tmp_path / 'sweep'}" in proc.stderr + proc.stdout
    return tmp_path / "sweep"


def _checkpoint(cell: Path) -> Path:
    import torch

    path = cell / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True)
    torch.save({"epoch": 1}, path)
    return path


def test_dry_run_says_per_cell_what_runs(sweep: Path) -> None:
    checkpoint = _checkpoint(sweep / "x=2")
    proc = _cli("resume", str(sweep), "--dry-run", "--json", cwd=sweep.parent.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    review = json.loads(proc.stdout)
    actions = {c["cell"]: c["action"] for c in review["resume"]}
    assert actions == {"x=1": "reuse", "x=2": "continue", "x=3": "reuse"}
    assert review["resume"][1]["checkpoint"] == str(checkpoint)
    assert review["cells_to_run"] == 1 and review["overrides"] == ["x=1,2,3", "tag=b"]


def test_a_change_that_drops_a_checkpoint_is_refused_unless_restart(sweep: Path) -> None:
    _checkpoint(sweep / "x=2")
    record = (sweep / "mushin_launch.json").read_bytes()
    proc = _cli("resume", str(sweep), "--set", "tag=c", cwd=sweep.parent)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "x=2" in line and "--restart" in line and "tag changed" in line, line
    assert (sweep / "mushin_launch.json").read_bytes() == record  # nothing written
    proc = _cli("resume", str(sweep), "--set", "tag=c", "--restart", "--dry-run", cwd=sweep.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "x=2  failed     restart: override tag changed" in proc.stdout, proc.stdout


def test_resume_one_cell_runs_it_with_the_recorded_overrides(sweep: Path) -> None:
    stamp = {c: (sweep / c / "mushin_status.json").read_bytes() for c in ("x=1", "x=3")}
    proc = _cli("resume", str(sweep), "x=2", "--no-progress", cwd=sweep.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((sweep / "x=2" / "mushin_metrics.json").read_text())
    assert metrics == {"y": 2.0, "tagged_b": 1.0}
    for cell, before in stamp.items():  # the others were left as they were
        assert (sweep / cell / "mushin_status.json").read_bytes() == before
    manifest = json.loads((sweep / "mushin_sweep.json").read_text())
    assert manifest["grid"] == {"x": [1, 2, 3]}  # the whole sweep's grid, not the cell's
    record = json.loads((sweep / "mushin_launch.json").read_text())
    assert record["overrides"] == ["x=1,2,3", "tag=b"]  # a later resume replays all


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["x=9"], "no cell x=9"),
        (["x=2", "--set", "tag=c"], "--set changes the config of every cell"),
        (["--json"], "add --dry-run"),
    ],
)
def test_bad_resumes_are_one_line(sweep: Path, args: list[str], needle: str) -> None:
    proc = _cli("resume", str(sweep), *args, cwd=sweep.parent)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert needle in proc.stderr.strip().splitlines()[-1], proc.stderr


def test_a_sweep_without_a_launch_record_says_how_to_resume(tmp_path: Path) -> None:
    from mushin_box import Workflow, multirun

    def task(x: int = 1) -> dict:
        return {"y": float(x)}

    Workflow(task).run(working_dir=tmp_path / "w", progress=False, x=multirun([1]))
    proc = _cli("resume", str(tmp_path / "w"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "holds no launch record" in proc.stderr and "--resume" in proc.stderr


@pytest.mark.parametrize("shared", ["record", "experiment"])
def test_resume_imports_nothing_another_user_could_have_written(sweep: Path, shared: str) -> None:
    """The launch record names the file a resume imports: a record or an experiment file
    that others can write is refused before anything is imported."""
    exp = sweep.parent / "exp.py"
    marker = sweep.parent / "imported"
    exp.write_text(f"open({str(marker)!r}, 'w').close()\n" + EXP)
    exp.chmod(0o644)
    os.chmod(sweep / "mushin_launch.json", 0o644)
    os.chmod(exp if shared == "experiment" else sweep / "mushin_launch.json", 0o666)
    proc = _cli("resume", str(sweep), "--dry-run", cwd=sweep.parent)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "can be written by other users" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not marker.exists()


def test_a_record_naming_another_experiment_is_refused(sweep: Path) -> None:
    """A launch record edited to name another experiment, the user's own (issue 42, case 8):
    refused in one line saying the record's experiment is not the one the cells ran, before
    that experiment is imported; the completed cells' results stay."""
    here, marker = sweep.parent, sweep.parent / "imported"
    other = here / "other.py"
    other.write_text(f"open({str(marker)!r}, 'w').close()\n" + EXP.replace("float(x)", "-1.0"))
    launch = sweep / "mushin_launch.json"
    record = json.loads(launch.read_text())
    launch.write_text(json.dumps({**record, "experiment": str(other)}))
    before = {c: (sweep / c / "mushin_metrics.json").read_bytes() for c in ("x=1", "x=3")}

    proc = _cli("resume", str(sweep), cwd=here)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"the launch record names the experiment {other}, but the sweep's cells " in line
    assert f"ran {here / 'exp.py'} (cell x=" in line, line
    assert not marker.exists()
    after = {c: (sweep / c / "mushin_metrics.json").read_bytes() for c in ("x=1", "x=3")}
    assert after == before

    launch.write_text(json.dumps(record))  # put back: the failed cell runs, the rest reused
    proc = _cli("resume", str(sweep), cwd=here)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {c: (sweep / c / "mushin_metrics.json").read_bytes() for c in before} == before


def test_resume_imports_no_module_of_the_experiment_another_user_could_write(
    tmp_path: Path,
) -> None:
    """The experiment imports a module beside it: once others can write that module,
    ``resume DIR`` refuses before importing anything (reproduce's check of the files the
    run would import, read not run: issue 42, hash before import)."""
    (tmp_path / "helper.py").write_text("SCALE = 2.0\n")
    (tmp_path / "exp.py").write_text("import helper\n" + EXP.replace("float(x)", "helper.SCALE"))
    args = ("launch", "exp.py", "x=1,2", "--local", "--no-progress", "--working-dir", "sweep")
    proc = _cli(*args, cwd=tmp_path, FAIL_X="2")
    assert proc.returncode == 1, proc.stderr[-3000:]
    marker = tmp_path / "imported"
    helper = tmp_path / "helper.py"
    helper.write_text(f"open({str(marker)!r}, 'w').close()\nSCALE = 3.0\n")
    helper.chmod(0o666)

    proc = _cli("resume", str(tmp_path / "sweep"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"{helper} can be written by other users" in line, line
    assert not marker.exists()

    helper.chmod(0o644)  # the user's own again: the changed code runs
    proc = _cli("resume", str(tmp_path / "sweep"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marker.exists()


def test_a_slurm_launch_resumed_with_no_controller_says_so(sweep: Path) -> None:
    """A launch that recorded a SLURM job option ran on SLURM: resumed where no controller
    answers, it says that, and does not tell the user to drop a ``--job-name`` they never
    typed (issue 42, case 11)."""
    launch = sweep / "mushin_launch.json"
    record = json.loads(launch.read_text())
    flags = {k: v for k, v in record["flags"].items() if k != "local"}
    launch.write_text(json.dumps({**record, "flags": {**flags, "job_name": "nightly"}}))
    conf = sweep.parent / "empty.conf"  # no cluster it names: sbatch fails at once
    conf.write_text("")
    proc = _cli("resume", str(sweep), cwd=sweep.parent, SLURM_CONF=str(conf))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "mushin-box resume: error:" in x]
    assert "no SLURM cluster is reachable from here" in line and "--job-name" not in line, line


SLOW_EXP = """
import os
import time
from pathlib import Path

from mushin_box import Workflow


def task(x: int = 1) -> dict:
    if str(x) == os.environ.get("FAIL_X"):
        raise RuntimeError("asked to fail")
    if str(x) == os.environ.get("SLOW_X"):
        Path(os.environ["STARTED"]).touch()
        time.sleep(120)
    return {"y": float(x)}


workflow = Workflow(task)
"""


def test_a_cancel_beside_a_resume_says_what_each_did(tmp_path: Path) -> None:
    """A ``cancel`` beside a local ``resume DIR`` stops the cell it runs, in the resume's own
    process: the resume exited 143 without a word, and the cancel said "x=2: cancelled, left
    as it is" of the cell it had just cancelled (issue 42, case 11)."""
    (tmp_path / "exp.py").write_text(SLOW_EXP)
    launched = _cli(
        *("launch", "exp.py", "x=1,2", "--local", "--no-progress", "--working-dir", "sweep"),
        cwd=tmp_path,
        FAIL_X="2",
    )
    assert launched.returncode == 1, launched.stderr[-3000:]
    started = tmp_path / "started"
    env = {**os.environ, "SLOW_X": "2", "STARTED": str(started)}
    argv = [sys.executable, "-m", "mushin_box", "resume", str(tmp_path / "sweep"), "--no-progress"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        cancelled = _cli("cancel", str(tmp_path / "sweep"), "--grace", "30", cwd=tmp_path)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "x=2: cancelled\n" in cancelled.stdout, cancelled.stdout  # not "..., left as it is"
    assert proc.returncode == 128 + signal.SIGTERM
    assert "mushin-box resume: stopped by SIGTERM (a `mushin-box cancel`" in err, err[-3000:]


# ``resume DIR --set trainer.max_epochs=N`` (issue 43, item 2):
# ``resume DIR --set trainer.max_epochs=N`` trains a finished cell on from its checkpoint
# (issue 43, item 2).
#
# A cell fitted for 2 epochs and extended to 3 ends with the results of a cell fitted for 3
# epochs from the start, bit for bit: the extension continued the same fit, and did not
# start again. The attempt says it extended the fit (from 2 to 3), ``diff`` against the 2-epoch
# run puts ``max_epochs`` under a heading of its own, and a limit below what the cell trained
# is refused in one line with nothing changed.
@pytest.mark.slow
def test_a_finished_fit_extended_to_more_epochs_equals_the_longer_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    shutil.copy(REPO / "examples" / "exp.py", tmp_path / "exp.py")
    for name, epochs in (("short", 2), ("long", 3)):
        run = _cli(
            *("launch", "exp.py", f"trainer.max_epochs={epochs}", "--working-dir", name),
            *("--local", "--no-progress"),  # here, even where a SLURM cluster answers
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr[-3000:]
    shutil.copytree(tmp_path / "short", tmp_path / "before")  # the 2-epoch run, kept
    review = _cli("resume", "short", "--set", "trainer.max_epochs=3", "--dry-run", cwd=tmp_path)
    assert "completed  extend: to trainer.max_epochs=3" in review.stdout, review.stdout

    extended = _cli(
        "resume", "short", "--set", "trainer.max_epochs=3", "--no-progress", cwd=tmp_path
    )
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "Restored all states from the checkpoint" in extended.stderr  # not from scratch
    assert "exists and is not empty" not in extended.stderr  # kept on purpose: not warned
    status = read_json(tmp_path / "short" / "cell" / "mushin_status.json")
    assert (status["status"], status["attempt"]) == ("completed", 2)
    assert status["extended"] == {"trainer.max_epochs": [2, 3]}
    attempts = read_json(tmp_path / "short" / "cell" / "mushin_provenance.json")["run"]["attempts"]
    assert [(a["attempt"], a["epoch"], a.get("extended")) for a in attempts] == [
        (1, 0, None),
        (2, 2, {"trainer.max_epochs": [2, 3]}),
    ]

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["diff", "long", "short"]) == 0
    same = capsys.readouterr().out
    assert same.startswith("same experiment, same results"), same

    assert main(["diff", "before", "short"]) == 1
    longer = capsys.readouterr().out
    assert longer.startswith(
        "same experiment trained to another limit (trainer.max_epochs 2 vs 3), results differ"
    ), longer
    section = longer.split("Training limits, changed on purpose (1)\n", 1)[1]
    assert section.split("\n")[0].endswith("reproducibility.config.trainer.max_epochs: 2 -> 3")
    assert "Breaks reproducibility: nothing" in longer

    before = (tmp_path / "short" / "cell" / "mushin_status.json").read_bytes()
    lowered = _cli("resume", "short", "--set", "trainer.max_epochs=1", cwd=tmp_path)
    assert lowered.returncode == 2 and lowered.stdout == ""
    assert lowered.stderr.count("\n") == 1, lowered.stderr
    assert "trainer.max_epochs=1 is below the 3 epochs cell cell already trained" in lowered.stderr
    assert "give at least 3" in lowered.stderr
    assert (tmp_path / "short" / "cell" / "mushin_status.json").read_bytes() == before
    # the same through the runner (Workflow.run(resume=True)), which decides in the cell
    lowered = _cli(
        *("launch", "exp.py", "--working-dir", "short", "--resume", "trainer.max_epochs=1"),
        *("--local", "--no-progress"),
        cwd=tmp_path,
    )
    assert lowered.returncode == 2, lowered.stderr[-3000:]
    assert lowered.stderr.strip().splitlines()[-1] == (
        "mushin-box launch: error: trainer.max_epochs=1 is below the 3 epochs cell cell "
        "already trained: a resume extends a fit and cannot shorten one; give at least 3, or "
        "launch the shorter run into a new directory"
    )
    assert (tmp_path / "short" / "cell" / "mushin_status.json").read_bytes() == before
