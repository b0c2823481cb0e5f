# SPDX-License-Identifier: MIT
"""A resume whose jobs run elsewhere (``submitit_local``, SLURM) says in the driver why a
completed cell runs again: "code fingerprint changed" reached only the job's log (issue 42,
case 11)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GEN = """
import sys

import helper
from mushin_box import Workflow, multirun


def task(x: int = 1) -> dict:
    return {"y": helper.SCALE * x}


if __name__ == "__main__":
    how = {"launcher": "submitit_local", "resume": "resume" in sys.argv, "progress": False}
    Workflow(task).run(working_dir="sw", x=multirun([1, 2]), **how)
"""


def test_a_submitit_local_resume_says_which_cells_run_again_and_why(tmp_path: Path) -> None:
    (tmp_path / "gen.py").write_text(GEN)
    (tmp_path / "helper.py").write_text("SCALE = 1.0\n")

    def run(*argv: str) -> str:
        proc = subprocess.run(
            [sys.executable, "gen.py", *argv],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stderr

    run()
    (tmp_path / "helper.py").write_text("SCALE = 2.0\n")
    said = run("resume")
    for cell in ("x=1", "x=2"):
        assert f"cell {cell}: code fingerprint changed (code: helper)" in said, said[-3000:]
