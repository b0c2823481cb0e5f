# SPDX-License-Identifier: MIT
"""A launch that Hydra refuses writes nothing: no directory, no manifest, no lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import HydraException
from workflow_tasks import grid_task

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.layout import LAUNCH_FILE, MANIFEST_FILE
from mushin_box._launch.record import recorded

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


@pytest.mark.parametrize("before", [b'{"overrides": ["lr=0.1"]}', None])
def test_a_launch_that_fails_before_it_starts_puts_the_launch_record_back(
    tmp_path: Path, before: bytes | None
) -> None:
    """``launch`` writes its record first; a launch refused before any cell starts leaves the
    earlier record byte for byte (or none), so a later ``resume DIR`` replays the launch that
    ran, not the one that never did."""
    path = tmp_path / LAUNCH_FILE
    if before is not None:
        path.write_bytes(before)
    with pytest.raises(RuntimeError), recorded(tmp_path, {"overrides": ["lr=1"]}, lambda: False):
        assert b'"lr=1"' in path.read_bytes()
        raise RuntimeError("refused")
    assert (path.read_bytes() if path.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ([LAUNCH_FILE] if before else [])
    with pytest.raises(RuntimeError), recorded(tmp_path, {"overrides": ["lr=2"]}, lambda: True):
        raise RuntimeError("a cell ran: the record is the launch's")
    assert b'"lr=2"' in path.read_bytes()
