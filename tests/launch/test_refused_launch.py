# SPDX-License-Identifier: MIT
"""A launch that Hydra refuses writes nothing: no directory, no manifest, no lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import HydraException
from workflow_tasks import grid_task

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.layout import MANIFEST_FILE

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

REFUSED = [
    pytest.param({"launcher": "bogus"}, "bogus", id="unknown-launcher"),
    pytest.param(
        {"launcher": "submitit_local", "launcher_config": {"no_such_key": 1}},
        "no_such_key",
        id="unknown-launcher-key",
    ),
    pytest.param({"overrides": ["+seed=1", "seed=2"]}, "seed", id="bad-override"),
    pytest.param({"overrides": ["lr=["]}, "lr", id="unparsable-override"),
]


@pytest.mark.parametrize(("kwargs", "named"), REFUSED)
def test_a_refused_launch_creates_no_sweep_directory(
    tmp_path: Path, kwargs: dict, named: str
) -> None:
    root = tmp_path / "sweep"
    with pytest.raises(HydraException, match=named):
        Workflow(grid_task).run(working_dir=root, progress=False, lr=multirun([0.1, 0.2]), **kwargs)
    assert not root.exists()


@pytest.mark.parametrize(("kwargs", "named"), REFUSED)
def test_a_refused_launch_leaves_an_existing_sweep_as_it_was(
    tmp_path: Path, kwargs: dict, named: str
) -> None:
    root = tmp_path / "sweep"
    Workflow(grid_task).run(working_dir=root, progress=False, lr=multirun([0.1, 0.2]))
    before = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(HydraException, match=named):
        Workflow(grid_task).run(
            working_dir=root,
            resume=True,
            progress=False,
            lr=multirun([0.3]),  # another grid: the manifest must not take it
            **kwargs,
        )
    after = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before
    ds = load_experiment(root)
    assert list(ds["status"].values) == ["completed", "completed"]
    assert (root / MANIFEST_FILE).read_bytes() == before[Path(MANIFEST_FILE)]
