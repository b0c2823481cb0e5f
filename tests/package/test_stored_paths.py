# SPDX-License-Identifier: MIT
"""The kit's own tasks are pickled and recorded under their stable names."""

from __future__ import annotations

import pickle

import mushin_box


def test_a_job_pickled_now_names_the_stable_path() -> None:
    import cloudpickle

    from mushin_box._sweep.cells import CellPlan, CellRunner

    runner = CellRunner(
        mushin_box.fit_task,  # type: ignore[attr-defined]
        CellPlan(working_dir="/w", swept=()),
        pre_call=mushin_box.seed_pre_call,  # type: ignore[attr-defined]
    )
    data = cloudpickle.dumps(runner)
    # by reference (no code inside), under the name no later move changes
    assert b"mushin_box\x94\x8c\x08fit_task" in data and b"_train" not in data
    assert b"co_code" not in data and pickle.loads(data).task is runner.task


def test_the_stable_names_are_not_api() -> None:
    assert "fit_task" not in mushin_box.__all__ and "seed_pre_call" not in mushin_box.__all__
