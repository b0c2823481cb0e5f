# SPDX-License-Identifier: MIT
"""A finished sweep is read from its manifest (issue 32): ``show``, ``report`` and
``load_experiment`` see what the status files say, while opening a status file only where
the manifest cannot answer (a status newer than it, a cell that did not complete, a cell it
does not know, a cell that may still run)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import xarray as xr
from sweep_files import write_cell
from workflow_tasks import one_failed_sweep

from mushin_box._core.sidecars import write_json_atomic
from mushin_box._results.experiment import load_sweep
from mushin_box._results.table import read_finished, read_results
from mushin_box._sweepdir import manifest, settled
from mushin_box._sweepdir.board import read_sweep


def _seen(sweep: Any) -> list[tuple[Any, ...]]:
    return [
        (c.dir, c.combo, c.state, c.attempt, c.metrics, c.error_type, c.error_message, c.reason)
        for c in sweep.cells
    ]


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` look written ``seconds`` ago (the manifest/status order is by time)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def _grid(root: Path, a: int, b: int) -> Path:
    for i in range(a):
        for j in range(b):
            write_cell(root, {"a": i, "b": j}, metrics={"loss": float((i - 1) ** 2 + j)})
    records = list(manifest.cell_records(root))
    manifest.write_manifest(
        root, grid={"a": list(range(a)), "b": list(range(b))}, run_id="r", records=records
    )
    for cell, _ in records:
        _age(cell / "mushin_status.json", 5)
    return root


@pytest.fixture(scope="module")
def engine_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``Workflow.run`` sweep, one cell failed."""
    return one_failed_sweep(tmp_path_factory.mktemp("engine") / "sweep")


def test_a_finished_sweep_reads_as_every_status_file_says(engine_sweep: Path) -> None:
    fast = read_finished(engine_sweep)
    assert fast is not None  # the manifest answered
    assert _seen(fast) == _seen(read_sweep(engine_sweep))
    assert fast.params == ("lr", "seed") and fast.counts() == {"completed": 3, "failed": 1}
    xr.testing.assert_identical(
        load_sweep(engine_sweep),
        load_sweep(engine_sweep, list(manifest.cell_records(engine_sweep))),
    )


def test_only_the_cells_the_manifest_cannot_answer_for_are_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _grid(tmp_path / "s", 4, 5)
    write_cell(root, {"a": 2, "b": 2}, status="failed", error="boom")  # after the manifest
    opened: list[str] = []
    real = manifest.read_status

    def spy(cell: Any) -> Any:
        opened.append(os.path.basename(cell))
        return real(cell)

    monkeypatch.setattr(settled, "read_status", spy)
    sweep = read_results(root)
    assert opened == ["a=2,b=2"]
    failed = [c for c in sweep.cells if c.state == "failed"]
    assert [(c.dir, c.error_message) for c in failed] == [("a=2,b=2", "boom")]
    assert len(sweep.cells) == 20 and sweep.cells[0].metrics == {"loss": 1.0}


def test_a_status_newer_than_the_manifest_is_what_is_shown(tmp_path: Path) -> None:
    root = _grid(tmp_path / "s", 2, 2)
    cell = root / "a=1,b=1"
    write_json_atomic(
        cell / "mushin_status.json",
        {"attempt": 2, "combo": {"a": 1, "b": 1}, "status": "timeout", "reason": "time limit"},
    )
    sweep = read_results(root)
    shown = {c.dir: (c.state, c.attempt, c.reason) for c in sweep.cells}
    assert shown["a=1,b=1"] == ("timeout", 2, "time limit")
    assert _seen(sweep) == _seen(read_sweep(root))


def test_a_cell_that_may_still_run_is_read_with_its_owner_checked(tmp_path: Path) -> None:
    root = _grid(tmp_path / "s", 2, 2)
    write_json_atomic(  # running, naming no owner: read_sweep shows it failed (stale)
        root / "a=0,b=1" / "mushin_status.json",
        {"attempt": 1, "combo": {"a": 0, "b": 1}, "status": "running"},
    )
    assert read_finished(root) is None
    sweep = read_results(root)
    assert {c.dir: c.state for c in sweep.cells}["a=0,b=1"] == "failed"
    assert _seen(sweep) == _seen(read_sweep(root))


def test_a_cell_the_manifest_does_not_know_is_shown(tmp_path: Path) -> None:
    root = _grid(tmp_path / "s", 2, 2)
    write_cell(root, {"a": 0, "b": 0, "c": 1}, metrics={"loss": 9.0})  # an earlier grid's
    assert read_finished(root) is None
    dirs = [c.dir for c in read_results(root).cells]
    assert dirs == [c.dir for c in read_sweep(root).cells] and "a=0,b=0,c=1" in dirs


def test_a_pending_cell_is_read_by_read_sweep(tmp_path: Path) -> None:
    root = _grid(tmp_path / "s", 2, 2)
    data = manifest.read_sweep_manifest(root)
    assert data is not None
    data["grid"]["b"].append(2)  # a resume added a value: its cells are pending
    write_json_atomic(root / "mushin_sweep.json", data)
    assert read_finished(root) is None
    assert read_results(root).counts() == {"pending": 2, "completed": 4}


@pytest.mark.parametrize("bad", ["x", float("nan"), 10**400, [1]])
def test_a_manifest_entry_of_wrong_types_is_shown_as_unknown(tmp_path: Path, bad: Any) -> None:
    # the manifest is a shared file: a hand-edited entry is shown, not a ValueError
    root = _grid(tmp_path / "s", 1, 2)
    data = manifest.read_sweep_manifest(root)
    assert data is not None
    for entry in data["cells"].values():
        entry.update(attempt=bad, restarts=bad, restarts_left=bad, reason=bad)
    (root / "mushin_sweep.json").write_text(json.dumps(data))  # NaN as JSON's NaN
    sweep = read_finished(root)
    assert sweep is not None
    shown = {(c.attempt, c.restarts, c.restarts_left, c.reason) for c in sweep.cells}
    assert shown == {(0, 0, None, bad if isinstance(bad, str) else None)}
