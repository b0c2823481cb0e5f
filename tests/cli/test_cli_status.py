# SPDX-License-Identifier: MIT
"""``mushin-box status`` and ``mushin-box ls``: tables and JSON from the sidecars, exit
codes for scripts, no torch at start-up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from workflow_tasks import grid_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import MANIFEST_FILE, STATUS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main

TESTS = Path(__file__).resolve().parents[1]


def _sweep(root: Path, fail_at: float = -1.0) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Workflow(grid_task).run(
            lr=multirun([0.1, 1.0]),
            working_dir=root,
            on_error="nan",
            progress=False,
            fail_at=fail_at,
            seed=1,
        )


def test_status_of_a_finished_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(tmp_path / "ok")
    capsys.readouterr()
    assert main(["status", str(tmp_path / "ok")]) == 0
    out = capsys.readouterr().out
    assert (
        f"{tmp_path / 'ok'}: 2 completed" in out
        and "loss" in out
        and "0.2" in out
        and "completed" in out
    )

    _sweep(tmp_path / "bad", fail_at=1.0)
    capsys.readouterr()
    assert main(["status", str(tmp_path / "bad")]) == 1
    out = capsys.readouterr().out
    assert "ValueError: planned failure at lr=1.0" in out
    assert f"(see {tmp_path / 'bad' / 'lr=1.0' / 'mushin_error.txt'})" in out

    assert main(["status", str(tmp_path / "bad"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"completed": 1, "failed": 1} and data["exit_code"] == 1
    failed = [c for c in data["cells"] if c["state"] == "failed"]
    assert failed[0]["combo"] == {"lr": 1.0} and failed[0]["error_type"] == "ValueError"


def test_a_long_sweep_is_a_line_per_cell_in_aligned_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path / "bad", fail_at=1.0)
    capsys.readouterr()
    monkeypatch.delenv("COLUMNS", raising=False)  # piped, no width: nothing left out
    assert main(["status", str(tmp_path / "bad")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{tmp_path / 'bad'}: 1 completed, 1 failed"
    header, rows = lines[1], {line.split()[0]: line for line in lines[2:4]}
    assert header.split()[:3] == ["lr", "state", "attempt"] and header.split()[-1] == "error"
    assert rows["0.1"].split()[1] == "completed" and rows["1"].split()[1] == "failed"
    for name, row, value in (("state", "1", "failed"), ("loss", "0.1", "0.2")):
        assert row_at(rows[row], header.index(name)) == value  # under its header
    assert rows["1"].endswith("ValueError: planned failure at lr=1.0, seed=1")
    assert f"(see {tmp_path / 'bad' / 'lr=1.0' / 'mushin_error.txt'})" in lines[4]


def row_at(line: str, column: int) -> str:
    return line[column:].split()[0]


def test_status_of_a_cell_dir_shows_its_sweep_and_without_dir_the_latest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _sweep(tmp_path / "old")
    _sweep(tmp_path / "new", fail_at=0.1)
    old_time = time.time() - 100
    os.utime(tmp_path / "old" / MANIFEST_FILE, (old_time, old_time))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["status", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["sweep"] == str(tmp_path / "new")
    assert main(["status", str(tmp_path / "old" / "lr=0.1"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sweep"] == str(tmp_path / "old")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p, "is not a sweep directory"),
        (lambda p: p / "missing", "is not a directory"),
    ],
)
def test_status_of_something_else_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, message: str
) -> None:
    target = make(tmp_path)  # type: ignore[operator]
    assert main(["status", str(target)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_status_without_any_sweep_names_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["status"]) == 2
    assert "mushin-box status DIR" in capsys.readouterr().err


def test_ls_lists_sweeps_newest_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(tmp_path / "runs" / "a", fail_at=0.1)
    _sweep(tmp_path / "runs" / "b")
    old_time = time.time() - 100
    os.utime(tmp_path / "runs" / "a" / MANIFEST_FILE, (old_time, old_time))
    capsys.readouterr()
    assert main(["ls", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["sweep"] for r in rows] == ["runs/b", "runs/a"]
    assert rows[1]["counts"] == {"completed": 1, "failed": 1} and rows[1]["cells"] == 2
    assert rows[0]["started"] and rows[0]["wall_s"] is not None
    assert main(["ls", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index("runs/b") < out.index("runs/a") and "1 completed, 1 failed" in out
    assert main(["ls", str(tmp_path / "nope")]) == 2


def test_readers_and_cancel_import_no_torch_hydra_numpy_or_xarray(tmp_path: Path) -> None:
    _sweep(tmp_path)
    code = textwrap.dedent(
        f"""
        import sys
        from mushin_box.cli.main import main
        root = {str(tmp_path)!r}
        codes = [
            main(["status", root]),
            main(["ls", root]),
            main(["logs", root, "lr=0.1"]),
            main(["wait", root, "--no-progress"]),
            main(["cancel", root]),
        ]
        heavy = ("torch", "pytorch_lightning", "lightning", "hydra", "omegaconf", "numpy",
                 "xarray")
        print(codes, [m for m in heavy if m in sys.modules])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[0, 0, 0, 0, 0] []"


_DRIVER = """
import sys
from workflow_tasks import marker_task
from mushin_box import Workflow, multirun
Workflow(marker_task).run(x=multirun([1]), markers=sys.argv[2], sleep_s=120,
                          working_dir=sys.argv[1], progress=False)
"""


@pytest.mark.slow
def test_status_after_the_driver_was_killed_shows_no_cell_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(sweep), str(tmp_path / "markers")], env=env
    )
    try:
        status = sweep / "x=1" / STATUS_FILE
        deadline = time.monotonic() + 120
        while (read_json(status) or {}).get("status") != "running":
            assert driver.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert main(["status", str(sweep), "--json"]) == 3  # running
        assert json.loads(capsys.readouterr().out)["cells"][0]["state"] == "running"
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    assert main(["status", str(sweep), "--json"]) == 1
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert cell["state"] == "failed" and f"process {driver.pid}" in cell["reason"]


def test_the_program_skips_the_last_collection_and_a_caller_keeps_its_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run as the program, a reading command freezes the collector's objects before it
    exits (Python's last collection would scan every record it read, to free nothing);
    called in a process that goes on, it leaves the collector as it was."""
    import gc

    from sweep_files import lr_sweep

    root = lr_sweep(tmp_path / "sweep")
    before = gc.get_freeze_count()
    assert main(["status", str(root)]) == 1  # lr=1.0 failed
    assert gc.get_freeze_count() == before
    capsys.readouterr()
    program = (
        "import gc, sys; from mushin_box.cli.main import main; code = main(); "
        "print('frozen' if gc.get_freeze_count() else 'not frozen'); sys.exit(code)"
    )
    # cancel acts (it may leave work to finalise): never frozen, even when it fails
    for command, frozen in (("status", "frozen"), ("cancel", "not frozen")):
        argv = [sys.executable, "-c", program, command, str(root)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.stdout.splitlines()[-1] == frozen, done.stdout + done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "mushin_box", "status", str(root), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and json.loads(done.stdout)["counts"] == {
        "completed": 2,
        "failed": 1,
    }
