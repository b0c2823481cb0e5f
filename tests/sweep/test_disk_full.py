# SPDX-License-Identifier: MIT
"""A full disk: the cell is recorded failed with ENOSPC, the first error is the one
reported, and Hydra's own ``.hydra/*.yaml`` are never left empty."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from mushin_box import ResumeContext, Workflow, multirun
from mushin_box._core.layout import STATUS_FILE
from mushin_box._sweep import cellfiles as hydrafiles
from mushin_box._upstream.hydra import replace_save_config


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs the tests as root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, leave_pages: int) -> Path:
    """Fill the disk with one file, leaving ``leave_pages`` pages free."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("ab") as out:
        out.write(b"\0" * max(0, (st.f_bavail - leave_pages) * st.f_frsize))
    return filler


def write_task(x: int, flag: str, mushin_resume: ResumeContext) -> dict[str, float]:
    """Writes a big "checkpoint" into its cell while ``flag`` exists, else a small one."""
    big = Path(flag).exists() and x == 2
    (mushin_resume.dir / "ckpt.bin").write_bytes(b"w" * (4 << 20 if big else 16))
    return {"x2": 2.0 * x}


def _statuses(root: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in root.glob(f"*/{STATUS_FILE}")}


def _empty_hydra_files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.glob("*/.hydra/*.yaml") if p.stat().st_size == 0]


def test_a_task_that_fills_the_disk_is_recorded_failed_with_enospc(
    small_disk: Path, tmp_path: Path
) -> None:
    root, flag = small_disk / "sweep", tmp_path / "big"
    flag.write_text("")

    def sweep(resume: bool = False):
        return Workflow(write_task).run(
            working_dir=root,
            on_error="nan",
            resume=resume,
            progress=False,
            x=multirun([1, 2]),
            flag=str(flag),
        )

    ds = sweep()  # recorded, so not raised (on_error="nan")
    status = _statuses(root)["x=2"]
    assert status["status"] == "failed" and status["error"]["type"] == "OSError"
    assert os.strerror(errno.ENOSPC) in status["error"]["message"]
    assert ds["x2"].sel(x=1).item() == 2.0 and ds["status"].sel(x=2).item() == "failed"
    assert not _empty_hydra_files(root)
    flag.unlink()
    (root / "x=2" / "ckpt.bin").unlink()  # the user makes room, then resumes
    assert sweep(resume=True)["x2"].values.tolist() == [2.0, 4.0]


def test_hydras_job_files_are_written_atomically_and_other_jobs_keep_their_errors(
    tmp_path: Path,
) -> None:
    import hydra.core.utils

    assert replace_save_config(hydrafiles.save_config)  # a changed Hydra fails here, not silently
    assert hydra.core.utils._save_config is hydrafiles.save_config  # noqa: SLF001
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"a": 1})
    hydrafiles.save_config(cfg, "config.yaml", tmp_path / ".hydra")
    written = tmp_path / ".hydra" / "config.yaml"
    assert written.read_text() == OmegaConf.to_yaml(cfg)
    before = written.stat().st_mtime_ns
    hydrafiles.save_config(cfg, "config.yaml", tmp_path / ".hydra")  # the same text: untouched
    assert written.stat().st_mtime_ns == before
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):  # not a Workflow job: raised, as Hydra would
        hydrafiles.save_config(cfg, "config.yaml", tmp_path / "file" / ".hydra")


def grid_task(x: int) -> dict[str, float]:
    return {"x2": 2.0 * x}


@pytest.mark.slow
@pytest.mark.parametrize("pages", [0, 1, 2, 3, 5, 8, 12])
def test_at_every_level_of_a_full_disk_nothing_is_left_empty_and_the_first_error_counts(
    small_disk: Path, pages: int
) -> None:
    root = small_disk / "sweep"
    filler = fill(small_disk, pages)

    def sweep(resume: bool = False):
        return Workflow(grid_task).run(
            working_dir=root, on_error="nan", resume=resume, progress=False, x=multirun([1, 2, 3])
        )

    try:
        sweep()
    except OSError as exc:  # what could not be recorded is raised: the first error
        assert exc.errno == errno.ENOSPC
        where = "".join(traceback.format_exception(exc))
        assert "reconcile_abandoned" not in where and "rebuild_manifest" not in where
    for cell, status in _statuses(root).items():
        if status["status"] == "failed":
            assert os.strerror(errno.ENOSPC) in status["error"]["message"], cell
    assert not _empty_hydra_files(root)
    filler.unlink()
    ds = sweep(resume=True)
    assert ds["x2"].values.tolist() == [2.0, 4.0, 6.0]
    assert not _empty_hydra_files(root)
