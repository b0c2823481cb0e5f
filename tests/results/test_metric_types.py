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


def sometimes_labelled(n: int = 1, opt: str | None = "a") -> dict[str, object]:
    return {"label": f"n{n}"} if n > 1 else {}


def test_a_string_metric_a_cell_lacks_reads_none_whatever_pandas_infers(tmp_path: Path) -> None:
    # pandas 3 reads a column of strings as its string dtype, whose missing value is NaN
    ds = Workflow(sometimes_labelled).run(working_dir=tmp_path / "w", n=multirun([1, 2]))
    assert ds["label"].values.tolist() == [None, "n2"]
    assert load_experiment(tmp_path / "w")["label"].values.tolist() == [None, "n2"]


def test_a_swept_none_is_a_none_coordinate_whatever_pandas_infers(tmp_path: Path) -> None:
    ds = Workflow(sometimes_labelled).run(working_dir=tmp_path / "w", opt=multirun([None, "b"]))
    assert ds["opt"].values.tolist() == [None, "b"]
    again = load_experiment(tmp_path / "w")
    assert again["opt"].values.tolist() == [None, "b"]
    assert again["cell_dir"].sel(opt=None).item() == "opt=null"
