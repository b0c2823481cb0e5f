# SPDX-License-Identifier: MIT
"""``launch`` on a tree with uncommitted changes says so in one line (issue 43, item 3):
its cells record only the hash of the changes, so no later checkout gives that code back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WF = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ}
    )


def test_a_launch_on_a_dirty_tree_says_so_once(tmp_path: Path) -> None:
    (tmp_path / "wf.py").write_text(WF)
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    for step in (("init", "-q"), ("add", "wf.py"), ("commit", "-qm", "wf")):
        assert _run(*git, *step, cwd=tmp_path).returncode == 0
    launch = (sys.executable, "-m", "mushin_box", "launch", "wf.py", "--local", "--no-progress")
    clean = _run(*launch, "--working-dir", "clean", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "uncommitted" not in clean.stderr

    (tmp_path / "wf.py").write_text(WF.replace("float(x)", "float(x) + 1"))
    dirty = _run(*launch, "--working-dir", "dirty", cwd=tmp_path)
    assert dirty.returncode == 0, dirty.stderr
    said = [line for line in dirty.stderr.splitlines() if "uncommitted" in line]
    assert said == [
        f"[mushin-box launch] {tmp_path} has uncommitted changes: the cells record only their "
        f"hash ({said[0].split('hash (')[1][:12]}), so `mushin-box reproduce` runs them again "
        "only on this very tree; commit them to keep the code"
    ], dirty.stderr
