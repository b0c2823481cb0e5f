# SPDX-License-Identifier: MIT
"""``mushin-box reproduce CELL``: exit 0 reproduced, 1 something differs, 2 bad input."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun
from mushin_box._core.secrets import SecretVault
from mushin_box.cli.main import main

SOURCE = """
def task(lr: float, seed: int = 0, db_password: str = "") -> dict:
    return {"loss": lr * (seed + 1) + len(db_password)}
"""
VAR = SecretVault.env_name("db_password")


def _cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    code = tmp_path / "code"
    code.mkdir()
    name = f"clitask_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(code))
    module = importlib.import_module(name)
    Workflow(module.task).run(
        working_dir=tmp_path / "sweep", progress=False, lr=multirun([0.5]), db_password="pw12"
    )
    return tmp_path / "sweep" / "lr=0.5", module


def test_reproduced_exit_0_then_changed_code_exit_2_then_allow_dirty_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, module = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "Breaks reproducibility: nothing" in out and out.rstrip().endswith("reproduced")

    path = Path(module.__file__)
    path.write_text(path.read_text().replace("+ len(db_password)", "+ 2 * len(db_password)"))
    monkeypatch.delitem(sys.modules, module.__name__)  # as a new process: the edited code
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "code fingerprint" in err and "--allow-dirty" in err
    assert not (tmp_path / "b").exists()

    argv = ["reproduce", str(cell), "--into", str(tmp_path / "b"), "--allow-dirty"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "reproducibility.code.task_sha256" in out
    assert "loss: 4.5 -> 8.5  DIFFER" in out
    assert "not reproduced: the reproducibility parts differ; metrics differ beyond --atol" in out
    assert main([*argv[:3], str(tmp_path / "c"), "--allow-dirty", "--atol", "5"]) == 1
    assert "metrics differ" not in capsys.readouterr().out  # within --atol 5


def test_bad_input_exit_2_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, _ = _cell(tmp_path, monkeypatch)
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and VAR in err and "'db_password'" in err
    assert main(["reproduce", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    monkeypatch.setenv(VAR, "pw12")
    assert main(["reproduce", str(cell), "--local", "--gpus", "2", "--into", "x"]) == 2
    err = capsys.readouterr().err  # plan_launch's refusal: 2 ranks need a trainer node
    assert err.count("\n") == 1 and "2 ranks requested" in err
    assert not (tmp_path / "a").exists() and not Path("x").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, module = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for line in (
        f"task      {module.__name__}:task",
        "swept     lr=0.5",
        "topology  1 node(s) x 1 rank(s)",
        "launcher  local: basic (in-process)  (recorded basic)",
        "image     none (the cell ran in no image)",
        "code      same: fingerprint ",
        f"env       reads {VAR} (set; values not shown)",
        "command   Workflow(",
        f"  db_password: ${{oc.env:{VAR}}}",
    ):
        assert line in out, line
    assert "pw12" not in out
    assert not (tmp_path / "a").exists()
