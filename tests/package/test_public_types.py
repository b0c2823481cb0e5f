# SPDX-License-Identifier: MIT
"""The public API's types, as a user's type checker sees them.

A snippet written as a user writes it is checked by the project's pyright: each
``reveal_type`` must show the type the annotations promise (``Workflow.run`` returns a
Dataset, or a ``SweepHandle`` with ``wait=False``), and a wrong call must be an error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYRIGHT = shutil.which("pyright", path=str(Path(sys.executable).parent))

SNIPPET = """\
import mushin_box
from mushin_box import MushinBoxError, SweepBusyError, SweepHandle, Workflow, multirun


def task(lr: float) -> dict[str, float]:
    return {"loss": lr}


flow = Workflow(task)
reveal_type(flow.run(lr=multirun([0.1, 0.2])))
reveal_type(flow.run(wait=True, lr=0.1))
handle = flow.run(launcher="mushin_slurm", wait=False, lr=0.1)
reveal_type(handle)
reveal_type(handle.status())
reveal_type(handle.status().cells[0])
reveal_type(handle.wait())
reveal_type(handle.cancel())
reveal_type(SweepHandle("multirun/x").job_ids)
reveal_type(mushin_box.load_experiment("multirun/x"))
busy: MushinBoxError = SweepBusyError("a live sweep")
handle.wait(timeout_s="soon")
"""

#: line of the snippet (1-based) -> the type pyright must reveal there
REVEALED = {
    10: "Dataset",
    11: "Dataset",
    13: "SweepHandle",
    14: "SweepView",
    15: "CellView",
    16: "Dataset",
    17: "CancelReport",
    18: "list[str]",
    19: "Dataset",
}
WRONG_CALL = 21  # a str where seconds go


@pytest.mark.skipif(PYRIGHT is None, reason="pyright is not installed in this environment")
def test_a_users_code_sees_the_public_types(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(SNIPPET)
    config = {
        "include": ["user.py"],
        "venvPath": str(REPO),
        "venv": ".venv",
        "extraPaths": [str(REPO)],  # the editable install's import hook is not static
        "pythonVersion": "3.11",
        "typeCheckingMode": "strict",
        "reportUnusedVariable": False,
    }
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    out = subprocess.run(
        [str(PYRIGHT), "--outputjson", "-p", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    found = {
        (d["range"]["start"]["line"] + 1, d["severity"]): d["message"]
        for d in report["generalDiagnostics"]
    }
    revealed = {line: msg for (line, severity), msg in found.items() if severity == "information"}
    for line, expected in REVEALED.items():
        assert (
            revealed.get(line)
            == f'Type of "{SNIPPET.splitlines()[line - 1][12:-1]}" is "{expected}"'
        ), (
            line,
            revealed.get(line),
        )
    errors = {line: msg for (line, severity), msg in found.items() if severity == "error"}
    assert set(errors) == {WRONG_CALL}, errors
    assert "timeout_s" in errors[WRONG_CALL]
