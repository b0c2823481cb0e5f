# SPDX-License-Identifier: MIT
"""Metrics keep their type in load_experiment's Dataset; a dict is no sweep value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mushin_box import Workflow, load_experiment, multirun


def typed_task(n: int = 1) -> dict[str, object]:
    return {"steps": 10 * n, "optimizer": f"adam-{n}", "loss": 0.5 / n, "converged": n > 1}


def test_integer_and_string_metrics_keep_their_type(tmp_path: Path) -> None:
    ds = Workflow(typed_task).run(working_dir=tmp_path / "w", n=multirun([1, 2]))
    assert ds["steps"].dtype.kind == "i" and ds["steps"].values.tolist() == [10, 20]
    assert ds["optimizer"].values.tolist() == ["adam-1", "adam-2"]  # was dropped
    assert ds["loss"].dtype == np.float64
    again = load_experiment(tmp_path / "w")  # the same from the directory alone
    assert again["steps"].values.tolist() == [10, 20]
    assert again["optimizer"].values.tolist() == ["adam-1", "adam-2"]


def test_a_dict_is_refused_as_one_value_of_a_sweep_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"sweep its keys instead, e\.g\. n\.KEY=multirun"):
        Workflow(typed_task).run(working_dir=tmp_path / "w", n=multirun([{"a": 1}, {"a": 2}]))
    assert not (tmp_path / "w").exists()  # refused before anything was written
