# SPDX-License-Identifier: MIT
"""``reproduce`` checks the code a record names before it imports any of it.

A record sits in a sweep directory that others may write. Each case edits a real cell's
record the way a hostile or careless writer could, and asserts that nothing the record
names was imported (a marker file its module-level code would write stays absent), that
nothing was written, and that the refusal says why in one line.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun, reproduce
from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._reproduce.checks import ReproduceError

TASK = """
def task(lr: float) -> dict:
    return {"loss": lr * 2}
"""

HOSTILE = """
from pathlib import Path
Path({marker!r}).write_text("imported")  # module-level code: must never run


def task(lr: float) -> dict:
    return {{"loss": lr * 2}}
"""


def _cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    code = tmp_path / "code"
    code.mkdir()
    name = f"trusttask_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(textwrap.dedent(TASK))
    monkeypatch.syspath_prepend(str(code))
    module = importlib.import_module(name)
    Workflow(module.task).run(working_dir=tmp_path / "sweep", progress=False, lr=multirun([0.5]))
    return tmp_path / "sweep" / "lr=0.5", module


def _hostile(directory: Path, marker: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"hostile_{uuid.uuid4().hex[:8]}.py"
    path.write_text(textwrap.dedent(HOSTILE.format(marker=str(marker))))
    return path


def _point_task_at(cell: Path, path: Path) -> None:
    record = read_json(cell / PROVENANCE_FILE)
    record["run"]["task"]["task"] = {
        "module": path.stem,
        "qualname": "task",
        "file": str(path),
        "partial": False,
    }
    write_json_atomic(cell / PROVENANCE_FILE, record)


def test_a_record_naming_a_file_outside_the_experiments_repository_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell, _ = _cell(tmp_path, monkeypatch)
    marker = tmp_path / "ran"
    _point_task_at(cell, _hostile(tmp_path / "elsewhere", marker))
    for dry_run in (True, False):
        with pytest.raises(ReproduceError, match="outside its experiment's repository"):
            reproduce(cell, into=tmp_path / "again", dry_run=dry_run)
    assert not marker.exists() and not (tmp_path / "again").exists()


def test_a_record_whose_experiment_file_moved_elsewhere_imports_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both the experiment and the task pointed at another user's directory: the files
    # there are not the user's own
    cell, _ = _cell(tmp_path, monkeypatch)
    marker = tmp_path / "ran"
    hostile = _hostile(tmp_path / "theirs", marker)
    record = read_json(cell / PROVENANCE_FILE)
    record["run"]["experiment"] = {"file": str(hostile)}
    write_json_atomic(cell / PROVENANCE_FILE, record)
    _point_task_at(cell, hostile)
    os.chown(hostile, 65534, 65534)  # nobody's
    with pytest.raises(ReproduceError, match="belongs to another user"):
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    os.chown(hostile, os.getuid(), os.getgid())
    hostile.chmod(0o646)  # o+w (g+w of a private group is the owner's alone)
    with pytest.raises(ReproduceError, match="can be written by other users"):
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert not marker.exists() and not (tmp_path / "again").exists()


def test_a_module_of_the_tasks_name_in_the_current_directory_is_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell, module = _cell(tmp_path, monkeypatch)
    shell = tmp_path / "shell"
    shell.mkdir()
    marker = tmp_path / "ran"
    (shell / f"{module.__name__}.py").write_text(
        textwrap.dedent(HOSTILE.format(marker=str(marker)))
    )
    record = read_json(cell / PROVENANCE_FILE)
    record["run"]["task"]["task"]["file"] = None  # found by name only: the path decides
    write_json_atomic(cell / PROVENANCE_FILE, record)
    env = {**os.environ, "PYTHONPATH": ""}
    # a new process in that directory, where `python -m` puts it first on sys.path
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "reproduce", str(cell), "--dry-run"],
        cwd=shell, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # the experiment's own directory comes first: its module, not the shell's, is checked
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "code      same: fingerprint" in proc.stdout
    assert not marker.exists()
    # and with the task's module gone from the experiment's directory, the shell's is
    # found: outside the repository
    experiment = Path(module.__file__).with_name("exp.py")
    experiment.write_text("# the experiment\n")
    record["run"]["experiment"] = {"file": str(experiment)}
    write_json_atomic(cell / PROVENANCE_FILE, record)
    Path(module.__file__).unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "reproduce", str(cell), "--dry-run"],
        cwd=shell, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "outside its experiment's repository" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("name", [PROVENANCE_FILE, ".hydra/config.yaml"])
def test_a_record_or_config_symlinked_to_dev_zero_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    cell, _ = _cell(tmp_path, monkeypatch)
    (cell / name).unlink()
    (cell / name).symlink_to("/dev/zero")
    with pytest.raises(ReproduceError, match="symbolic link") as refused:
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert "\n" not in str(refused.value) and not (tmp_path / "again").exists()


def test_a_module_beside_the_experiment_is_hashed_before_it_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 42 case 2: the planted file is the user's own, in the experiment's folder
    cell, module = _cell(tmp_path, monkeypatch)
    marker = tmp_path / "ran"
    _point_task_at(cell, _hostile(Path(module.__file__).parent, marker))
    for dry_run, allow_dirty in ((True, False), (False, False)):
        with pytest.raises(ReproduceError, match="code fingerprint") as refused:
            reproduce(cell, into=tmp_path / "again", dry_run=dry_run, allow_dirty=allow_dirty)
        # names no fingerprint that a forger could write into the record
        assert not re.search("[0-9a-f]{64}", str(refused.value))
    assert not marker.exists() and not (tmp_path / "again").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("name", [PROVENANCE_FILE, ".hydra/config.yaml"])
def test_a_record_or_config_another_user_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    cell, _ = _cell(tmp_path, monkeypatch)
    os.chown(cell / name, 65534, 65534)  # nobody's
    with pytest.raises(ReproduceError, match="belongs to another user") as refused:
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert "\n" not in str(refused.value)
    os.chown(cell / name, os.getuid(), os.getgid())
    (cell / name).chmod(0o666)
    with pytest.raises(ReproduceError, match="can be written by other users"):
        reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert not (tmp_path / "again").exists()
