# SPDX-License-Identifier: MIT
"""Resume decides finished cells before Hydra launches anything, as strictly as the runner.

A finished sweep resumed launches nothing and touches no cell; every cell the runner would
run again (failed, cancelled, skipped, a corrupt sidecar, a changed config or code) still
goes through the launcher; and the shortcut that computes a job's config without composing
it gives the same directory and fingerprint as Hydra's full compose.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import hydra_zen
import pytest
from hydra_zen import make_config
from workflow_tasks import marker_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE, STATUS_FILE
from mushin_box._sweep import prefilter as pf
from mushin_box._sweep.cells import CellPlan, config_fingerprint
from mushin_box._sweep.compose import hydra_state_kept


def _sweep(root: Path, markers: Path, resume: bool = False, **extra: Any) -> Any:
    return Workflow(marker_task).run(
        working_dir=root,
        resume=resume,
        progress=False,
        x=multirun([1, 2, 3, 4, 5, 6]),
        markers=str(markers),
        **extra,
    )


def _ran(markers: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in markers.iterdir()) if markers.is_dir() else []


def _snapshot(root: Path, *, cells_only: bool = True) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime: a file rewritten, even with the same bytes, shows."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        # the sweep's own files (manifest, multirun.yaml) are rewritten by every run
        if p.is_file() and not (cells_only and p.parent == root)
    }


def test_a_finished_sweep_resumed_launches_nothing_and_touches_no_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    before = _snapshot(root)  # statuses, metrics, provenance, .hydra/*.yaml of every cell

    def no_launch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Hydra launched a job of a finished sweep")

    monkeypatch.setattr(hydra_zen, "launch", no_launch)
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert _snapshot(root) == before
    assert _ran(markers) == [f"x={x}" for x in range(1, 7)]  # the first run only


def test_every_cell_the_runner_would_run_again_still_runs(tmp_path: Path) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)

    def edit_status(cell: str, **fields: Any) -> None:
        path = root / cell / STATUS_FILE
        path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))

    edit_status("x=1", status="failed")
    edit_status("x=2", status="cancelled")
    edit_status("x=3", status="skipped")
    (root / "x=4" / METRICS_FILE).write_text("{")  # a corrupt metrics sidecar
    (root / "x=5" / PROVENANCE_FILE).write_text('{"run": ')  # a corrupt provenance record
    kept = _snapshot(root / "x=6", cells_only=False)  # its sidecars and .hydra/*.yaml: not launched
    with pytest.warns(UserWarning, match="unreadable"):
        ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert _ran(markers) == sorted(
        [f"x={x}" for x in range(1, 7)] + [f"x={x}" for x in range(1, 6)]
    )
    assert _snapshot(root / "x=6", cells_only=False) == kept  # reused, untouched
    for x in range(1, 6):
        assert json.loads((root / f"x={x}" / STATUS_FILE).read_text())["status"] == "completed"


def test_a_changed_config_runs_every_cell_again(tmp_path: Path) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    with pytest.warns(UserWarning, match="config fingerprint changed"):
        _sweep(root, markers, resume=True, sleep_s=0.001)  # a constant changed
    assert _ran(markers) == sorted(2 * [f"x={x}" for x in range(1, 7)])
    status = json.loads((root / "x=3" / STATUS_FILE).read_text())
    assert status["rerun_reason"] == "config fingerprint changed"


def _plan(root: Path, **fields: Any) -> CellPlan:
    return CellPlan(
        **{"working_dir": str(root), "swept": ("x",), "resume": True, "run_id": "new", **fields}
    )


def _overrides(root: Path, markers: Path) -> list[str]:
    return [
        f"hydra.sweep.dir={root}",
        "hydra.sweep.subdir='${mushin_cell:}'",
        "hydra.job.config.override_dirname.exclude_keys=[markers]",
        "x=1,2,3,4,5,6",
        f"markers={markers}",
    ]


def test_a_changed_code_fingerprint_or_a_stale_code_reuse_goes_through_the_runner(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    status = json.loads((root / "x=1" / STATUS_FILE).read_text())
    code = status["fingerprints"]["code"]
    config = Workflow(marker_task).config
    args = dict(launcher=None, launcher_config=None)

    def reused(plan: CellPlan) -> int:
        with hydra_state_kept():
            return len(pf.prefilter(config, _overrides(root, markers), plan, **args).reused)

    assert reused(_plan(root, code_fingerprint=code)) == 6
    assert reused(_plan(root, code_fingerprint="other")) == 0
    # reused despite the change: the runner writes that down, so it goes through it
    assert reused(_plan(root, code_fingerprint="other", reuse_stale_code=True)) == 0
    assert reused(_plan(root, code_fingerprint=code, resume=False)) == 0


def _through_compose(config: Any, overrides: list[str]) -> list[tuple[Path, str]]:
    """Every job's directory and config fingerprint: by the shortcut, and by a full compose."""
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore

    jobs = pf._jobs(overrides)
    assert jobs
    ConfigStore.instance().store(name="prefilter_test", node=config)
    out = []
    with hydra_state_kept(), initialize(version_base="1.3", config_path=None):
        first = compose("prefilter_test", overrides=list(jobs[0]), return_hydra_config=True)
        fast = pf._SweptValues(first, jobs)
        for job in jobs:
            full = pf._cell_of(
                compose("prefilter_test", overrides=list(job), return_hydra_config=True)
            )
            quick = fast.cell(job)
            assert quick[0] == full[0], job
            assert config_fingerprint(quick[1]) == config_fingerprint(full[1]), job
            out.append((quick[0], config_fingerprint(quick[1])))
    return out


def test_the_shortcut_composes_every_job_as_hydra_does(tmp_path: Path) -> None:
    config = make_config(
        lr=0.1,
        name="a",
        opt=make_config(momentum=0.9, betas=[0.9, 0.99]),
        tag="${name}-${opt.momentum}",
        empty=None,
    )
    overrides = [
        f"hydra.sweep.dir={tmp_path}",
        "hydra.sweep.subdir='${mushin_cell:}'",
        "hydra.job.config.override_dirname.exclude_keys=[lr]",
        "lr=0.5",
        "name='a b','c,d',\"e'f\"",
        "opt.momentum=0.1,0.2",
        "opt.betas=[0.5,0.6],[0.1]",
        "+extra=1,null,true",
        "empty=3,x",
    ]
    cells = _through_compose(config, overrides)
    assert len(cells) == 3 * 2 * 2 * 3 * 2
    assert len({d for d, _ in cells}) == len(cells)  # distinct directories and configs
    assert len({fp for _, fp in cells}) == len(cells)


def test_the_shortcut_is_refused_where_a_job_differs_by_more_than_its_values() -> None:
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore

    config = make_config(opt=make_config(momentum=0.9), lr=0.1)
    ConfigStore.instance().store(name="prefilter_refused", node=config)
    for overrides in (
        ["opt={momentum:0.1},{momentum:0.2}"],  # a mapping value merges
        ["opt.momentum=0.1,0.2", "opt={momentum:0.3}"],  # a key nested in another's
        ["hydra.job.name=a,b"],  # Hydra's own
    ):
        jobs = pf._jobs(
            ["hydra.sweep.dir=/tmp/x", "hydra.sweep.subdir='${mushin_cell:}'", *overrides]
        )
        assert jobs
        with hydra_state_kept(), initialize(version_base="1.3", config_path=None):
            first = compose("prefilter_refused", overrides=list(jobs[0]), return_hydra_config=True)
            with pytest.raises(ValueError):
                pf._SweptValues(first, jobs)


def test_a_config_whose_value_depends_on_the_job_is_decided_by_the_runner(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    config = make_config(x=0, markers="", sleep_s="${oc.select:nothing,0.0}", when="${now:%H}")
    status = json.loads((root / "x=1" / STATUS_FILE).read_text())
    plan = _plan(root, code_fingerprint=status["fingerprints"]["code"])
    with hydra_state_kept():
        done = pf.prefilter(
            config, _overrides(root, markers), plan, launcher=None, launcher_config=None
        )
    assert done.jobs == 6 and not done.reused


@dataclasses.dataclass
class _Typed:
    x: int = 0
    markers: str = ""
    sleep_s: float = 0.0


def test_a_bad_value_in_a_later_job_is_still_refused_before_any_cell_runs(
    tmp_path: Path,
) -> None:
    from hydra.errors import ConfigCompositionException

    root, markers = tmp_path / "sweep", tmp_path / "markers"
    with pytest.raises(ConfigCompositionException, match="abc"):
        Workflow(marker_task, config=_Typed).run(
            working_dir=root, progress=False, x=multirun([1, 2, "abc"]), markers=str(markers)
        )
    assert _ran(markers) == []
