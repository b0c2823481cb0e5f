# SPDX-License-Identifier: MIT
"""A dict as a sweep value (issue 42, case 11): a fixed one (``x={"a": 1}``) is one value,
the same in every cell; one inside ``multirun([...])`` is refused, and the refusal says both
what to sweep instead and that the fixed form is accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun


def task(x: Any = None, y: int = 1) -> dict:
    return {"v": float(x["a"] + y)}


def test_a_fixed_dict_is_one_value_in_every_cell(tmp_path: Path) -> None:
    ds = Workflow(task).run(
        working_dir=tmp_path / "s", progress=False, x={"a": 1}, y=multirun([1, 2])
    )
    assert ds["v"].values.tolist() == [2.0, 3.0]
    cells = [p.name for p in (tmp_path / "s").iterdir() if p.is_dir()]
    # .mushin/ holds the uncommitted code of a launch from a dirty checkout: not a cell
    assert sorted(c for c in cells if not c.startswith(".")) == ["y=1", "y=2"]


def test_a_dict_in_a_sweep_is_refused_naming_both_ways(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as refused:
        Workflow(task).run(working_dir=tmp_path / "s", x=multirun([{"a": 1}, {"a": 2}]))
    message = str(refused.value)
    assert "sweep its keys instead, e.g. x.KEY=multirun([...])" in message
    assert "a dict outside multirun (x={...}) is one value for every cell" in message
    assert not (tmp_path / "s").exists()
