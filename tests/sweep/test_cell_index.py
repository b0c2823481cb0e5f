# SPDX-License-Identifier: MIT
"""A resume reads the finished cells from the sweep's index, and only what it still vouches for.

The index (``_sweepdir/settled.py``) holds each completed cell's status record and
metrics with the identity of the three files they were read from. A resume of a finished
sweep then reads no cell's sidecar; a cell one of whose files changed since (edited,
truncated, deleted, replaced by a symlink, its fingerprint rewritten) is read from its
files and decided as the runner decides it; and an index that is corrupt, too large, a
symlink, another user's, or whose identities are not the files' is not trusted at all.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workflow_tasks import marker_sweep as _sweep
from workflow_tasks import markers_ran as _ran

from mushin_box._core import sidecars
from mushin_box._core.layout import CELL_INDEX_FILE, METRICS_FILE, PROVENANCE_FILE, STATUS_FILE
from mushin_box._sweepdir import settled as cellindex
from mushin_box._sweepdir.manifest import cell_records

CELL_FILES = (STATUS_FILE, METRICS_FILE, PROVENANCE_FILE)


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A finished 6-cell sweep whose index holds every cell (the files are entered once
    older than the file system's clock at the index's start, not a second older)."""
    monkeypatch.setattr(cellindex, "RACY_NS", 0)
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    time.sleep(0.05)  # a coarse clock's tick after the last file
    cellindex.refresh_index(root, list(cell_records(root)), cellindex.CellIndex())
    assert sorted(cellindex.read_index(root).entries) == [f"x={x}" for x in range(1, 7)]
    yield root, markers


@pytest.fixture
def cell_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the cells' sidecars read through ``read_json`` from now on."""
    seen: list[str] = []
    real = sidecars.read_bounded

    def counting(path: Any, limit: int) -> bytes:
        if os.path.basename(os.fspath(path)) in CELL_FILES:
            seen.append(os.fspath(path))
        return real(path, limit)

    monkeypatch.setattr(sidecars, "read_bounded", counting)
    return seen


def test_a_finished_sweep_resumed_reads_no_cell_sidecar(
    indexed: tuple[Path, Path], cell_reads: list[str]
) -> None:
    root, markers = indexed
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert cell_reads == []
    assert _ran(markers) == [f"x={x}" for x in range(1, 7)]  # the first run only


def _rewrite_in_place(path: Path, text: str) -> None:
    """The same inode, the same size and mtime: only its ctime tells (a coarse clock's
    tick later, so that it does)."""
    st = path.stat()
    assert len(text.encode()) == st.st_size
    time.sleep(0.05)
    with open(path, "r+b") as f:
        f.write(text.encode())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _edit_metrics_same_size(cell: Path) -> None:
    old = (cell / METRICS_FILE).read_text()
    _rewrite_in_place(cell / METRICS_FILE, old.replace('"x2":6', '"x2":7'))


def _truncate_metrics(cell: Path) -> None:
    (cell / METRICS_FILE).write_text("{")


def _delete_metrics(cell: Path) -> None:
    (cell / METRICS_FILE).unlink()


def _symlink_metrics(cell: Path) -> None:
    copy = cell.parent.parent / "elsewhere.json"
    copy.write_bytes((cell / METRICS_FILE).read_bytes())
    (cell / METRICS_FILE).unlink()
    (cell / METRICS_FILE).symlink_to(copy)


def _truncate_provenance(cell: Path) -> None:
    (cell / PROVENANCE_FILE).write_text('{"run": ')


def _other_fingerprint(cell: Path) -> None:
    status = json.loads((cell / STATUS_FILE).read_text())
    status["fingerprints"]["config"] = status["config_without_shape"] = "0" * 64
    sidecars.write_json_atomic(cell / STATUS_FILE, status)


def _failed(cell: Path) -> None:
    status = json.loads((cell / STATUS_FILE).read_text())
    sidecars.write_json_atomic(cell / STATUS_FILE, {**status, "status": "failed"})


@pytest.mark.parametrize(
    ("change", "reruns"),
    [
        (_edit_metrics_same_size, False),  # reused, with the metrics its file holds now
        (_truncate_metrics, True),
        (_delete_metrics, True),
        (_symlink_metrics, True),
        (_truncate_provenance, True),
        (_other_fingerprint, True),
        (_failed, True),
    ],
)
def test_a_cell_whose_file_changed_since_is_decided_from_its_files(
    indexed: tuple[Path, Path], change: Any, reruns: bool
) -> None:
    root, markers = indexed
    change(root / "x=3")
    assert "x=3" not in cellindex.read_index(root).entries
    with warnings.catch_warnings():  # whatever the runner says of it (a corrupt sidecar...)
        warnings.simplefilter("ignore")
        ds = _sweep(root, markers, resume=True)
    first = [f"x={x}" for x in range(1, 7)]
    assert _ran(markers) == sorted(first + ["x=3"] if reruns else first)
    x2 = 7 if change is _edit_metrics_same_size else 6
    assert list(ds["x2"].values) == [2, 4, x2, 8, 10, 12]


def _corrupt(root: Path) -> None:
    (root / CELL_INDEX_FILE).write_bytes(b'{"schema":1,"cells":{"x=1":[')


def _symlinked(root: Path) -> None:
    elsewhere = root.parent / "index.json"
    (root / CELL_INDEX_FILE).rename(elsewhere)
    (root / CELL_INDEX_FILE).symlink_to(elsewhere)


def _other_identities(root: Path) -> None:
    data = json.loads((root / CELL_INDEX_FILE).read_text())
    for entry in data["cells"].values():
        entry["files"][1][1] += 1  # the metrics' size
    (root / CELL_INDEX_FILE).write_text(json.dumps(data))


def _hostile_entries(root: Path) -> None:
    data = json.loads((root / CELL_INDEX_FILE).read_text())
    good = data["cells"]["x=1"]
    data["cells"] = {
        "..": good,
        "x=1/../x=1": good,
        "x=2": {**good, "files": "no"},
        "x=3": {**good, "status": {**good["status"], "attempt": "1x"}},
        "x=4": [1, 2],
        "x=5": {**good, "status": {**good["status"], "status": "failed"}},
    }
    (root / CELL_INDEX_FILE).write_text(json.dumps(data))


@pytest.mark.parametrize("spoil", [_corrupt, _symlinked, _other_identities, _hostile_entries])
def test_an_index_not_to_be_trusted_is_not_used(
    indexed: tuple[Path, Path], cell_reads: list[str], spoil: Any
) -> None:
    root, markers = indexed
    _lie_about_metrics(root)
    spoil(root)
    assert cellindex.read_index(root).entries == {}
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]  # the files', not the index's
    assert len(cell_reads) >= 18  # every cell read from its files
    assert _ran(markers) == [f"x={x}" for x in range(1, 7)]
    assert len(cellindex.read_index(root).entries) == 6  # written again


def _lie_about_metrics(root: Path) -> None:
    data = json.loads((root / CELL_INDEX_FILE).read_text())
    for entry in data["cells"].values():
        entry["metrics"] = {"x2": 999}
    sidecars.write_bytes_atomic(root / CELL_INDEX_FILE, json.dumps(data).encode())


def test_an_oversized_index_is_not_read(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = indexed
    size = (root / CELL_INDEX_FILE).stat().st_size
    monkeypatch.setattr(cellindex, "read_limit", lambda name: size - 1)
    assert cellindex.read_index(root).entries == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_an_index_owned_by_another_user_than_the_cells_is_not_used(
    indexed: tuple[Path, Path], cell_reads: list[str]
) -> None:
    root, markers = indexed
    _lie_about_metrics(root)
    os.chown(root / CELL_INDEX_FILE, 4242, 4242)  # identities right, metrics forged
    assert cellindex.read_index(root).entries == {}
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]


def test_files_changed_within_a_second_of_the_index_are_left_out_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the window held wider than the sweep lasts, so a loaded machine's slow sweep is in it
    monkeypatch.setattr(cellindex, "RACY_NS", 600 * 10**9)
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)  # its end writes the index: every file is too recent
    records = list(cell_records(root))
    assert cellindex.read_index(root).entries == {}
    assert not cellindex.refresh_index(root, records, cellindex.read_index(root))
    assert not (root / CELL_INDEX_FILE).exists()


def test_a_resume_that_reads_a_cell_enters_it_in_the_index(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, markers = indexed
    (root / CELL_INDEX_FILE).unlink()
    ds = _sweep(root, markers, resume=True)  # each cell read, then entered
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert len(cellindex.read_index(root).entries) == 6
    before = (root / CELL_INDEX_FILE).stat().st_ino
    _sweep(root, markers, resume=True)
    assert (root / CELL_INDEX_FILE).stat().st_ino == before  # nothing new: not rewritten


def test_a_few_cells_run_again_leave_the_index_as_it_is(
    indexed: tuple[Path, Path], cell_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume that runs a few cells again (under 1 in 100, here 1 in 1) does not write
    the index again: its old entries for them no longer match their files, so the next
    resume reads those cells from their files (it used to write all of it, 10 MB at
    10,000 cells, for 10 cells run again)."""
    import shutil

    root, markers = indexed
    monkeypatch.setattr(cellindex, "_REWRITE_SHARE", 1)
    before = (root / CELL_INDEX_FILE).stat().st_ino
    shutil.rmtree(root / "x=3")
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert (root / CELL_INDEX_FILE).stat().st_ino == before
    cell_reads.clear()
    assert sorted(cellindex.read_index(root).entries) == [f"x={x}" for x in (1, 2, 4, 5, 6)]
    ds = _sweep(root, markers, resume=True)  # x=3 read from its files, not run again
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert {Path(p).parent.name for p in cell_reads} == {"x=3"}
    assert _ran(markers).count("x=3") == 2 and len(_ran(markers)) == 7
