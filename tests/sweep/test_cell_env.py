# SPDX-License-Identifier: MIT
"""In-process cells do not inherit each other's environment (issue 14 item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra_zen import multirun

from mushin_box import Workflow, seed_everything_per_rank

_SET_BY_A_CELL = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "MUSHIN_SEED_BASE", "OMP_NUM_THREADS")


def _leaky_task(lr: float) -> dict[str, object]:
    """Counts the variables an earlier cell would have left, then sets them as a fit does."""
    found = [k for k in (*_SET_BY_A_CELL, "MUSHIN_TEST_CELL_VAR") if k in os.environ]
    kept = os.environ.get("MUSHIN_TEST_KEPT") == "sweep" and "MUSHIN_TEST_GONE" in os.environ
    seed_everything_per_rank(int(lr * 10))
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MUSHIN_TEST_CELL_VAR"] = str(lr)
    os.environ["MUSHIN_TEST_KEPT"] = "changed by a cell"
    os.environ.pop("MUSHIN_TEST_GONE", None)
    return {"found": len(found), "kept": int(kept), "loss": lr}


def test_each_cell_starts_from_the_sweeps_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in _SET_BY_A_CELL:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MUSHIN_TEST_KEPT", "sweep")
    monkeypatch.setenv("MUSHIN_TEST_GONE", "sweep")
    before = dict(os.environ)
    ds = Workflow(_leaky_task).run(
        working_dir=tmp_path / "w", progress=False, lr=multirun([0.1, 0.2, 0.3])
    )
    assert ds["found"].values.tolist() == [0, 0, 0], "a cell saw what an earlier one set"
    assert ds["kept"].values.tolist() == [1, 1, 1], "a cell saw what an earlier one changed"
    assert dict(os.environ) == before
