# SPDX-License-Identifier: MIT
"""A failed cell at the command line: the summary names it and how to run it again, once;
no Python warning with a file and line inside mushin-box, nor the API's advice
(``resume=True``). From Python, the same failure is a ``CellWarning`` (issue 43, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mushin_box import CellWarning, Workflow, multirun

WF = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    if x == 2:
        raise ValueError("boom")
    return {"y": float(x)}


workflow = Workflow(task)
"""


def task(x: int = 1) -> dict[str, float]:
    if x == 2:
        raise ValueError("boom")
    return {"y": float(x)}


def test_a_failed_cell_is_said_once_by_the_summary(tmp_path: Path) -> None:
    (tmp_path / "wf.py").write_text(WF)
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", "wf.py", "x=1,2", "--local"]
        + ["--no-progress", "--working-dir", "s"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 1
    assert "Warning" not in proc.stderr and "resume=True" not in proc.stderr, proc.stderr
    assert "  x=2: failed: ValueError: boom" in proc.stdout
    assert f"to run only those again: mushin-box resume {tmp_path / 's'}" in proc.stderr


def test_from_python_a_failed_cell_is_a_cell_warning(tmp_path: Path) -> None:
    with pytest.warns(CellWarning, match=r"cell x=2: failed \(ValueError: boom\)"):
        Workflow(task).run(working_dir=tmp_path, progress=False, on_error="nan", x=multirun([1, 2]))
