# SPDX-License-Identifier: MIT
"""``run.attempts`` and ``run.world_changes``: each attempt's facts survive the next attempt's
record write (issue 30, item 2), read from the cell directory without following a symlink."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from mushin_box._core.layout import FINGERPRINTS_FILE, PROVENANCE_FILE
from mushin_box._sweep.cellfiles import _with_attempt, _with_fit_starts


@pytest.fixture(autouse=True)
def _no_restart_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)


def _record(world: int, started: str, kind: str = "torchrun") -> dict[str, Any]:
    run = {"started": started, "topology": {"world_size": world}, "launcher": {"kind": kind}}
    return {"reproducibility": {}, "run": run}


def _write(cell: Path, name: str, data: Any) -> None:
    (cell / name).write_text(json.dumps(data))


def _attempts(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (a["attempt"], a["restart"], a["world_size"], a["epoch"]) for a in record["run"]["attempts"]
    ]


def test_a_continuing_attempt_keeps_the_earlier_attempts_and_a_fresh_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    first = _with_attempt(_record(2, "t1"), tmp_path, 1, False)
    assert _attempts(first) == [(1, 0, 2, None)]
    _write(tmp_path, PROVENANCE_FILE, first)
    _write(tmp_path, FINGERPRINTS_FILE, {"starts": [{"epoch": 0, "world_size": 2, "attempt": 1}]})

    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")  # torchrun restarted the group
    second = _with_attempt(_record(2, "t2"), tmp_path, 2, True)
    assert _attempts(second) == [(1, 0, 2, 0), (2, 1, 2, None)]
    assert "world_changes" not in second["run"]  # known once this attempt's fit ran
    _write(tmp_path, PROVENANCE_FILE, second)

    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT")
    third = _with_attempt(_record(1, "t3", "single"), tmp_path, 3, True)  # --resume --gpus 1
    assert _attempts(third) == [(1, 0, 2, 0), (2, 1, 2, None), (3, 0, 1, None)]
    assert [a["started"] for a in third["run"]["attempts"]] == ["t1", "t2", "t3"]
    fresh = _with_attempt(_record(1, "t4"), tmp_path, 4, False)  # not resumed: a new fit
    assert _attempts(fresh) == [(4, 0, 1, None)]


def test_the_fit_starts_date_each_attempt_and_name_the_change_of_world(tmp_path: Path) -> None:
    record = _record(1, "t3")
    record["run"]["attempts"] = [
        {"attempt": 1, "restart": 0, "world_size": 2, "epoch": None},
        {"attempt": 2, "restart": 1, "world_size": 2, "epoch": 2},  # died before a ckpt
        {"attempt": 3, "restart": 0, "world_size": 1, "epoch": None},
    ]
    starts = [
        {"epoch": 0, "world_size": 2, "attempt": 1},
        {"epoch": 2, "world_size": 1, "attempt": 3},
    ]
    _write(tmp_path, FINGERPRINTS_FILE, {"starts": starts})
    done = _with_fit_starts(record, tmp_path)
    assert _attempts(done) == [(1, 0, 2, 0), (2, 1, 2, 2), (3, 0, 1, 2)]
    assert done["run"]["world_changes"] == [{"epoch": 2, "from": 2, "to": 1}]


def test_without_fit_starts_the_attempts_still_say_the_world_changed(tmp_path: Path) -> None:
    record = _record(1, "t2")
    record["run"]["attempts"] = [{"attempt": 1, "world_size": 4}, {"attempt": 2, "world_size": 2}]
    done = _with_fit_starts(record, tmp_path)  # no MetricsCallback: no fit_fingerprints.json
    assert done["run"]["world_changes"] == [{"epoch": None, "from": 4, "to": 2}]


def test_an_earlier_record_that_is_a_symlink_or_corrupt_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_with_attempt(_record(8, "t0"), tmp_path, 1, False)))
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / PROVENANCE_FILE).symlink_to(outside)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and nothing is said about it in the cell's run
        linked = _with_attempt(_record(2, "t1"), cell, 2, True)
    assert _attempts(linked) == [(2, 0, 2, None)]
    (cell / PROVENANCE_FILE).unlink()
    (cell / PROVENANCE_FILE).write_text('{"run": {"attempts": [')
    assert _attempts(_with_attempt(_record(2, "t1"), cell, 2, True)) == [(2, 0, 2, None)]


def test_a_record_from_before_attempts_were_kept_counts_as_one_attempt(tmp_path: Path) -> None:
    old = _record(4, "t0", "slurm")
    old["run"]["elastic"] = {"restarts": 0, "max_restarts": 0, "world_size": 4}
    _write(tmp_path, PROVENANCE_FILE, old)
    now = _with_attempt(_record(2, "t1"), tmp_path, 2, True)
    assert _attempts(now) == [(None, 0, 4, None), (2, 0, 2, None)]
    assert now["run"]["attempts"][0]["launcher"] == "slurm"


def test_torchrun_restarts_and_slurm_requeues_are_counted_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torchrun on SLURM, in a job that SLURM requeued once: the group not restarted yet
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    (row,) = _with_attempt(_record(4, "t1"), tmp_path, 2, True)["run"]["attempts"]
    assert (row["restart"], row["requeue"]) == (0, 1)
