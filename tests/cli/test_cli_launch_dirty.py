# SPDX-License-Identifier: MIT
"""``launch`` on a tree with uncommitted changes says so in one line, and keeps the changes
in the sweep, named by the hash the cells record, unless they are too large or hold a
secret (issue 43, item 3)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from mushin_box._core.layout import PROVENANCE_FILE

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


GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
LAUNCH = (sys.executable, "-m", "mushin_box", "launch", "wf.py", "--local", "--no-progress")
SECRET = "hunter2-tok-8842"


def _repo(tmp_path: Path, *extra: str) -> None:
    (tmp_path / "wf.py").write_text(WF)
    for name in extra:
        (tmp_path / name).write_text("x: 1\n")
    for step in (("init", "-q"), ("add", "."), ("commit", "-qm", "wf")):
        assert _run(*GIT, *step, cwd=tmp_path).returncode == 0


def _record(sweep: Path) -> dict:
    (cell,) = sweep.glob(f"*/{PROVENANCE_FILE}")
    return json.loads(cell.read_text())


def test_a_launch_on_a_dirty_tree_says_so_once_and_keeps_the_changes(tmp_path: Path) -> None:
    _repo(tmp_path)
    clean = _run(*LAUNCH, "--working-dir", "clean", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "uncommitted" not in clean.stderr
    assert not (tmp_path / "clean" / ".mushin").exists()

    (tmp_path / "wf.py").write_text(WF.replace("float(x)", "float(x) + 1"))
    dirty = _run(*LAUNCH, "--working-dir", "dirty", cwd=tmp_path)
    assert dirty.returncode == 0, dirty.stderr
    record = _record(tmp_path / "dirty")
    sha = record["reproducibility"]["code"]["git"]["diff_sha256"]
    kept = f".mushin/code/{sha}.patch"
    said = [line for line in dirty.stderr.splitlines() if "uncommitted" in line]
    assert said == [
        f"[mushin-box launch] {tmp_path} has uncommitted changes (sha256 {sha[:12]}): the "
        f"sweep keeps them ({kept}), so `mushin-box reproduce` can give them back; commit "
        "them to keep them in git"
    ], dirty.stderr
    patch = tmp_path / "dirty" / kept
    assert hashlib.sha256(patch.read_bytes()).hexdigest() == sha
    assert patch.stat().st_mode & 0o777 == 0o600
    assert record["run"]["experiment"]["patch"] == kept
    # the pointer is the same for the same code: two dirty runs are one experiment
    again = _run(*LAUNCH, "--working-dir", "again", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    diff = _run(sys.executable, "-m", "mushin_box", "diff", "dirty", "again", cwd=tmp_path)
    assert diff.stdout.startswith("same experiment, same results"), diff.stdout + diff.stderr


def test_changes_that_hold_a_secret_value_are_not_kept_and_the_line_says_why(
    tmp_path: Path,
) -> None:
    _repo(tmp_path)
    (tmp_path / "wf.py").write_text(WF + f'\nAPI_TOKEN = "{SECRET}"\n')
    env = {**os.environ, "API_TOKEN": SECRET}
    dirty = subprocess.run(
        [*LAUNCH, "--working-dir", "dirty"], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, env=env,
    )  # fmt: skip
    assert dirty.returncode == 0, dirty.stderr
    assert SECRET not in dirty.stdout + dirty.stderr
    said = [line for line in dirty.stderr.splitlines() if "uncommitted" in line]
    assert (
        len(said) == 1
        and (
            ", not kept in the sweep: the changes to wf.py hold a value the secret rule hides. "
            "The cells record only their hash"
        )
        in said[0]
    ), dirty.stderr
    assert not (tmp_path / "dirty" / ".mushin").exists()
    assert "patch" not in _record(tmp_path / "dirty")["run"]["experiment"]
    assert not any(
        SECRET.encode() in p.read_bytes() for p in (tmp_path / "dirty").rglob("*") if p.is_file()
    )


def test_changes_to_a_secret_file_are_not_kept(tmp_path: Path) -> None:
    _repo(tmp_path, "secrets.yaml")
    (tmp_path / "secrets.yaml").write_text("x: 2\n")
    dirty = _run(*LAUNCH, "--working-dir", "dirty", cwd=tmp_path)
    assert dirty.returncode == 0, dirty.stderr
    assert "not kept in the sweep: they change secrets.yaml, whose name is a secret file's" in (
        dirty.stderr
    )
    assert not (tmp_path / "dirty" / ".mushin").exists()


def test_a_refused_launch_keeps_no_changes(tmp_path: Path) -> None:
    _repo(tmp_path)
    (tmp_path / "wf.py").write_text(WF.replace("float(x)", "float(x) + 1"))
    refused = _run(*LAUNCH, "--working-dir", "dirty", "no_such_key=1", cwd=tmp_path)
    assert refused.returncode != 0
    assert not (tmp_path / "dirty" / ".mushin").exists()
