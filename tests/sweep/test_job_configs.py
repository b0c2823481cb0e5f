# SPDX-License-Identifier: MIT
"""Each job of a sweep runs with the config Hydra composes for it, however it was built.

For a grid of plain values, the launch builds each job's config from the first job's and
the job's swept values instead of composing it (:mod:`mushin_box._sweep.jobconfig`). What a
cell runs with and what it writes down (``.hydra/config.yaml``, ``hydra.yaml``,
``overrides.yaml``) must be the same bytes as with Hydra's own compose of every job, and a
shortcut that would disagree with Hydra is not used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.plugins.sweeper import Sweeper
from hydra_zen import make_config

from mushin_box import Workflow
from mushin_box._core.layout import METRICS_FILE
from mushin_box._sweep import jobconfig

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

CONFIG = make_config(
    lr=0.1,
    name="a",
    opt=make_config(momentum=0.9, betas=[0.9, 0.99]),
    tag="${name}-${opt.momentum}",
    empty=None,
)
OVERRIDES = [
    "lr=0.5",
    "name='a b','c,d'",
    "opt.betas=[0.5,0.6],[0.1]",
    "+extra=1,null",
    "empty=x",
]


def echo(lr: float, name: str, opt: Any, tag: str, empty: Any, extra: Any = None) -> dict:
    """The config values the task received, as metrics (numbers) and a file."""
    return {"lr": lr, "betas": float(sum(opt.betas)), "extra": float(extra or 0)}


def _hydra_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.glob("*/.hydra/*.yaml"))}


def _composes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count Hydra's full composes of a job (``load_sweep_config``)."""
    count = [0]
    real = ConfigLoaderImpl.load_sweep_config

    def counted(self: Any, master_config: Any, sweep_overrides: Any) -> Any:
        count[0] += 1
        return real(self, master_config, sweep_overrides)

    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", counted)
    return count


def _run(root: Path) -> tuple[dict[str, str], Any]:
    shutil.rmtree(root, ignore_errors=True)
    ds = Workflow(echo, CONFIG).run(working_dir=root, progress=False, overrides=OVERRIDES)
    return _hydra_files(root), ds


def test_every_job_runs_with_the_config_hydra_composes_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sweep"
    composes = _composes(monkeypatch)
    quick, quick_ds = _run(root)
    assert len(quick) == 8 * 3  # 8 cells, Hydra's three files each
    assert composes[0] < 8  # the shortcut was taken: not every job composed

    with monkeypatch.context() as m:  # Hydra composes every job (twice: check, then run)
        m.setattr("mushin_box._sweep.workflow.job_configs", lambda *a: None)
        full, full_ds = _run(root)
    assert quick == full  # the same bytes, cell by cell
    assert quick_ds.equals(full_ds)
    betas = {
        p.parent.name: json.loads(p.read_text())["betas"] for p in root.glob(f"*/{METRICS_FILE}")
    }
    assert sorted(set(betas.values())) == [0.1, pytest.approx(1.1)]


def test_a_shortcut_that_disagrees_with_hydra_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sweep"
    full, _ = _run(root)
    # a shortcut that forgets the job's values: every job would run the first job's config
    monkeypatch.setattr(jobconfig.SweptValues, "set_values", lambda self, job, cfg: None)
    composes = _composes(monkeypatch)
    again, _ = _run(root)
    assert again == full
    assert composes[0] >= 8


SCALAR_CONFIG = make_config(
    lr=0.1,
    name="a",
    opt=make_config(momentum=0.9, nesterov=False),
    tag="${name}-${opt.momentum}",
    empty=None,
)
#: every swept value a scalar, of every kind a node can hold (float, int, null, a quoted
#: string, a string of digits, a bool), on a top-level, a nested, an added and a None key,
#: set one job after another
SCALARS = [
    "lr=0.5,1,null",
    "name='a b','1'",
    "opt.momentum=0,0.5",
    "+extra=true,'two'",
    "empty=x,null,3",
]


def scalar_echo(lr: Any, name: str, opt: Any, tag: str, empty: Any, extra: Any = None) -> dict:
    """What the task received, as metrics, so that the results say which values ran."""
    received = {"lr": -1 if lr is None else lr, "name": len(name), "tag": len(tag)}
    received |= {"momentum": opt.momentum, "nesterov": opt.nesterov, "empty": len(str(empty))}
    return {f"got_{k}": float(v) for k, v in received.items()} | {"got_extra": len(str(extra))}


def test_jobs_of_scalar_values_share_one_working_config_and_run_what_hydra_composes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each job's values are set over the last job's (one copy of the config for all of
    them); every cell still runs, and writes, exactly what Hydra's compose of it gives."""
    copies = [0]
    real_copy = jobconfig._copy

    def counted(cfg: Any) -> Any:
        copies[0] += 1
        return real_copy(cfg)

    monkeypatch.setattr(jobconfig, "_copy", counted)
    composes = _composes(monkeypatch)
    root = tmp_path / "sweep"

    def run() -> tuple[dict[str, str], Any]:
        shutil.rmtree(root, ignore_errors=True)
        ds = Workflow(scalar_echo, SCALAR_CONFIG).run(
            working_dir=root, progress=False, overrides=SCALARS
        )
        return _hydra_files(root), ds

    quick, quick_ds = run()
    cells = 3 * 2 * 2 * 2 * 3
    assert len(quick) == cells * 3
    assert composes[0] < cells  # the shortcut was taken: not every job composed
    assert copies[0] <= 3  # not one a job: the jobs share a working copy
    with monkeypatch.context() as m:  # Hydra composes every job, in the launcher only: its
        # check before the launch composes each job once more and writes nothing
        m.setattr("mushin_box._sweep.workflow.job_configs", lambda *a: None)
        m.setattr(Sweeper, "validate_batch_is_legal", lambda self, batch: None)
        full, full_ds = run()
    assert quick == full
    assert quick_ds.equals(full_ds)
    assert sorted(set(quick_ds["got_lr"].values.ravel().tolist())) == [-1.0, 0.5, 1.0]
    assert sorted(set(quick_ds["got_tag"].values.ravel().tolist())) == [3.0, 5.0, 7.0]


def test_a_job_return_keeps_its_outcome_but_not_its_config_copies() -> None:
    """The basic launcher keeps every job's return until the sweep ends: the configs in
    them (a copy of each, ~90 KB a job) are dropped once Hydra's callbacks have seen them."""
    from hydra.core.utils import JobReturn, JobStatus

    from hydra_plugins.mushin_box_launcher.cells_sweeper import _LeanReturns

    seen: list[tuple[Any, Any]] = []

    class Callbacks:
        def on_job_end(self, *, config: Any, job_return: Any, **kwargs: Any) -> None:
            seen.append((job_return.cfg, job_return.hydra_cfg))

        def on_job_start(self, *, config: Any, **kwargs: Any) -> None:
            seen.append(("start", config))

    ret = JobReturn(cfg="task cfg", hydra_cfg="hydra cfg", status=JobStatus.COMPLETED)
    ret.return_value = {"loss": 1.0}
    lean = _LeanReturns(Callbacks())
    lean.on_job_start(config="c")
    lean.on_job_end(config="c", job_return=ret)
    assert seen == [("start", "c"), ("task cfg", "hydra cfg")]  # the callbacks saw them
    assert (ret.cfg, ret.hydra_cfg) == (None, None)
    assert ret.return_value == {"loss": 1.0} and ret.status is JobStatus.COMPLETED


def test_a_workflow_launch_drops_each_jobs_config_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweeper hands Hydra's launcher the lean callbacks: every job's return, once
    Hydra's callbacks have seen it, holds no config (what kept a 10,000-cell driver at
    ~1 GB)."""
    import sys

    # Hydra's plugin scan executes the sweeper's module again: patch the class it runs
    Workflow(scalar_echo, SCALAR_CONFIG).run(working_dir=tmp_path / "warm", progress=False)
    lean = sys.modules["hydra_plugins.mushin_box_launcher.cells_sweeper"]._LeanReturns
    returns: list[Any] = []
    real = lean.on_job_end

    def kept(self: Any, *, config: Any, job_return: Any, **kwargs: Any) -> None:
        real(self, config=config, job_return=job_return, **kwargs)
        returns.append(job_return)

    monkeypatch.setattr(lean, "on_job_end", kept)
    Workflow(scalar_echo, SCALAR_CONFIG).run(
        working_dir=tmp_path / "sweep", progress=False, overrides=["lr=0.5,1"]
    )
    assert len(returns) == 2
    assert all(r.cfg is None and r.hydra_cfg is None for r in returns)
