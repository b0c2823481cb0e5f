# SPDX-License-Identifier: MIT
"""When a cell's files reach the disk: every file the cell runner wrote is synced by the
cell's end, what a "completed" status vouches for before that status is in place, and the
task's own files as it writes them (:mod:`mushin_box._core.durable`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mushin_box import ResumeContext, Workflow, multirun
from mushin_box._core import durable
from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE, STATUS_FILE
from mushin_box._core.sidecars import write_json_atomic

EVENTS: list[tuple[str, str]] = []
OWN = "own.json"


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every rename over a file and every fsync of a file or directory, by path, in order."""
    EVENTS.clear()
    real_replace, real_fsync = os.replace, os.fsync
    names: dict[int, str] = {}
    real_open = os.open

    def opened(path: Any, flags: int, *a: Any, **k: Any) -> int:
        fd = real_open(path, flags, *a, **k)
        names[fd] = os.path.abspath(os.fspath(path))
        return fd

    def replaced(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        real_replace(src, dst, *a, **k)
        EVENTS.append(("replace", os.path.abspath(os.fspath(dst))))

    def synced(fd: int) -> None:
        real_fsync(fd)
        EVENTS.append(("fsync", names.get(fd, "?")))

    monkeypatch.setattr(os, "open", opened)
    monkeypatch.setattr(os, "replace", replaced)
    monkeypatch.setattr(os, "fsync", synced)
    return EVENTS


def writes_its_own(x: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """A task that writes a sidecar of its own, and says whether it was synced at once."""
    own = mushin_resume.dir / OWN
    before = len(EVENTS)
    write_json_atomic(own, {"x": x})
    new = EVENTS[before:]
    synced = any(k == "fsync" and Path(p).name.startswith(f".{OWN}.") for k, p in new)
    return {"x": float(x), "synced_at_once": float(synced and ("fsync", str(own.parent)) in new)}


def _last(events: list[tuple[str, str]], kind: str, path: Path) -> int:
    return max(i for i, e in enumerate(events) if e == (kind, str(path)))


def test_every_file_a_cell_writes_is_synced_by_its_end_and_completed_after_its_metrics(
    tmp_path: Path, events: list[tuple[str, str]]
) -> None:
    root = tmp_path / "sweep"
    ds = Workflow(writes_its_own).run(working_dir=root, progress=False, x=multirun([1, 2]))
    assert ds["synced_at_once"].values.tolist() == [1.0, 1.0]  # the task's file: at once
    for cell in sorted(root.glob("x=*")):
        written = {
            p
            for kind, p in events
            if kind == "replace" and p.startswith(str(cell)) and not p.endswith(OWN)
        }
        assert {str(cell / f) for f in (STATUS_FILE, METRICS_FILE, PROVENANCE_FILE)} <= written
        assert str(cell / ".hydra" / "config.yaml") in written
        for path in written:  # each file synced after its last rename, its directory too
            assert _last(events, "fsync", Path(path)) > _last(events, "replace", Path(path))
            parent = Path(path).parent
            assert _last(events, "fsync", parent) > _last(events, "replace", Path(path))
        completed = _last(events, "replace", cell / STATUS_FILE)
        for vouched in (cell / METRICS_FILE, cell / ".hydra" / "config.yaml"):
            assert _last(events, "fsync", vouched) < completed


def test_a_deferred_block_syncs_once_a_file_written_twice() -> None:
    """Two writes of one file in a block: one fsync of it, at the commit."""
    import tempfile

    target = Path(tempfile.mkdtemp()) / "s.json"
    synced: list[str] = []
    real = durable._fsync_file
    try:
        durable._fsync_file = lambda path: (synced.append(path), real(path))[1]  # type: ignore[assignment]
        with durable.deferred():
            write_json_atomic(target, {"a": 1})
            write_json_atomic(target, {"a": 2})
            assert synced == []
        assert synced == [str(target)]
    finally:
        durable._fsync_file = real  # type: ignore[assignment]
    assert target.read_text() == '{"a":2}\n'
