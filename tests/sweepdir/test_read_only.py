# SPDX-License-Identifier: MIT
"""Reading a sweep writes nothing; a completed sweep on a read-only mount needs no run."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from workflow_tasks import grid_task

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.layout import MANIFEST_FILE


def _tree(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_load_experiment_writes_nothing_even_without_a_manifest(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    Workflow(grid_task).run(working_dir=root, progress=False, lr=multirun([0.1, 0.2]))
    (root / MANIFEST_FILE).unlink()  # the cache is gone: rebuilt in memory, not on disk
    before = _tree(root)
    ds = load_experiment(root)
    assert list(ds["status"].values) == ["completed", "completed"]
    assert _tree(root) == before


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[Path]:
    """``path`` bind-mounted read-only (a real EROFS, which root cannot write either)."""
    mount = path.with_name(path.name + "-ro")
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", str(path), str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], check=True)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_read_only_sweep_loads_and_a_completed_one_needs_no_run(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    Workflow(grid_task).run(working_dir=root, progress=False, lr=multirun([0.1, 0.2]))
    with _read_only(root) as ro:
        assert list(load_experiment(ro)["loss"].values) == [0.1, 0.2]
        with pytest.warns(UserWarning, match="read-only.*nothing needs to run"):
            ds = Workflow(grid_task).run(
                working_dir=ro, resume=True, progress=False, lr=multirun([0.1, 0.2])
            )
        assert list(ds["loss"].values) == [0.1, 0.2]
        with pytest.raises(PermissionError, match=r"read-only.*lr=0\.3"):
            Workflow(grid_task).run(
                working_dir=ro, resume=True, progress=False, lr=multirun([0.1, 0.3])
            )
