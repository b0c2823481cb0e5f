# SPDX-License-Identifier: MIT
"""Hydra's private names the kit relies on (``mushin_box._upstream.hydra``), one test each.

A failure names the Hydra name whose behaviour changed: fix the seam, not its callers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra.core.utils as hydra_utils
import pytest
from hydra import initialize
from hydra.core.global_hydra import GlobalHydra
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException
from hydra_zen import launch, make_config
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from hydra_plugins.mushin_box_launcher import cells_sweeper
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._sweep.compose import check_composes
from mushin_box._upstream.hydra import (
    apply_overrides,
    basic_sweeper,
    batches,
    global_hydra_kept,
    job_return_value,
    overrides_dirname,
    replace_save_config,
    runs_jobs_in_process,
    sweep_jobs,
)


@dataclass
class _Sub:
    width: int = 4


@dataclass
class _Config:
    n: int = 1
    sub: _Sub = field(default_factory=_Sub)


def _structured() -> Any:
    cfg = OmegaConf.structured(_Config)
    OmegaConf.set_struct(cfg, True)
    return cfg


def test_hydra_ConfigLoaderImpl_apply_overrides_to_config_sets_a_value_with_hydras_validation() -> (
    None
):
    cfg = _structured()
    apply_overrides(parse_overrides(["n=3", "sub.width=8", "++n=5"]), cfg)
    assert (cfg.n, cfg.sub.width) == (5, 8)
    apply_overrides(parse_overrides(["+extra=x"]), cfg)  # '+' adds a key, struct or not
    assert cfg.extra == "x"
    with pytest.raises(ConfigCompositionException):  # the typed field refuses it
        apply_overrides(parse_overrides(["n=abc"]), cfg)
    assert cfg.n == 5


@pytest.mark.parametrize(("override", "lacking"), [("m=1", "m"), ("sub.depth=2", "sub.depth")])
def test_hydra_ConfigLoaderImpl_apply_overrides_to_config_raises_from_omegaconfs_missing_key_error(
    override: str, lacking: str
) -> None:
    # the launch's fix for an unknown key ('write +key=...') is decided from this cause
    with pytest.raises(ConfigCompositionException) as info:
        apply_overrides(parse_overrides([override]), _structured())
    cause = info.value.__cause__
    assert isinstance(cause, ConfigAttributeError | ConfigKeyError)
    assert cause.full_key == lacking


def test_hydra_get_overrides_dirname_writes_override_dirname_as_a_compose_does() -> None:
    overrides = ["b='x y'", "a=1", "c=[1,2]", "hydra.job.config.override_dirname.exclude_keys=[c]"]
    composed = check_composes(make_config(a=0, b="", c=[]), overrides)
    naming = composed.hydra.job.config.override_dirname
    task = [o for o in parse_overrides(overrides) if not o.is_hydra_override()]
    written = overrides_dirname(
        task, list(naming.exclude_keys), str(naming.item_sep), str(naming.kv_sep)
    )
    assert written == composed.hydra.job.override_dirname == "a=1,b='x y'"


def test_hydra_BasicSweeper_split_arguments_lists_every_job_in_the_grids_order() -> None:
    jobs = sweep_jobs(parse_overrides(["a=1,2", "+b=x,'y z'", "c=0"]))
    assert jobs == [
        ["a=1", "+b=x", "c=0"],
        ["a=1", "+b='y z'", "c=0"],
        ["a=2", "+b=x", "c=0"],
        ["a=2", "+b='y z'", "c=0"],
    ]


def test_hydra_BasicSweeper_split_overrides_to_chunks_cuts_jobs_into_ordered_batches() -> None:
    jobs = [[f"a={i}"] for i in range(5)]
    assert batches(jobs, 2) == [jobs[0:2], jobs[2:4], jobs[4:5]]


def _task(cfg: Any) -> int:
    return os.getpid()


def test_hydra_BasicSweeper_calls_a_subclasss_split_arguments_and_validate_batch_is_legal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    sweeper = cells_sweeper.CellSweeper
    split, validate = sweeper.split_arguments, sweeper.validate_batch_is_legal

    def recorded_split(self: Any, overrides: Any, max_batch_size: int | None) -> Any:
        calls.append(f"split:{self.hydra_context is not None and self.config is not None}")
        return split(self, overrides, max_batch_size)

    def recorded_validate(self: Any, batch: Any) -> None:
        calls.append(f"validate:{len(batch)}")
        validate(self, batch)

    monkeypatch.setattr(sweeper, "split_arguments", recorded_split)
    monkeypatch.setattr(sweeper, "validate_batch_is_legal", recorded_validate)
    assert issubclass(sweeper, basic_sweeper())
    _multirun(tmp_path, ["x=1,2,3", "hydra.sweeper.max_batch_size=2"])
    assert calls == ["split:True", "validate:2", "validate:1"]


def test_hydra_BasicLauncher_runs_each_job_in_this_process_through_its_hydra_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the kit's sweeper hands the basic launcher a config loader and callbacks of its own
    seen: dict[str, Any] = {"loads": 0, "ends": 0}
    loader, lean = cells_sweeper._Loader, cells_sweeper._LeanReturns
    load, end = loader.load_sweep_config, lean.on_job_end
    setup = cells_sweeper.CellSweeper.setup

    def recorded_setup(self: Any, **kwargs: Any) -> None:
        setup(self, **kwargs)
        seen["in_process"] = runs_jobs_in_process(self.launcher)

    def counted_load(self: Any, *args: Any) -> Any:
        seen["loads"] += 1
        return load(self, *args)

    def counted_end(self: Any, **kwargs: Any) -> None:
        seen["ends"] += 1
        end(self, **kwargs)

    monkeypatch.setattr(cells_sweeper.CellSweeper, "setup", recorded_setup)
    monkeypatch.setattr(loader, "load_sweep_config", counted_load)
    monkeypatch.setattr(lean, "on_job_end", counted_end)
    (returns,) = _multirun(tmp_path, ["x=1,2"])
    assert [r.return_value for r in returns] == [os.getpid()] * 2
    assert seen == {"in_process": True, "loads": 2, "ends": 2}
    assert not runs_jobs_in_process(type("Other", (basic_sweeper(),), {})(max_batch_size=None))


def _multirun(tmp_path: Path, overrides: list[str]) -> Any:
    target = f"{cells_sweeper.__name__}.CellSweeper"
    return launch(
        make_config(x=0),
        _task,
        overrides=[*overrides, f"hydra.sweeper._target_={target}", f"hydra.sweep.dir={tmp_path}"],
        multirun=True,
        version_base="1.3",
    )


def test_hydra_core_utils_save_config_writes_each_of_a_jobs_hydra_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hydra_utils, "_save_config", hydra_utils._save_config)  # put back after
    original = hydra_utils._save_config
    written: list[str] = []

    def writer(cfg: Any, filename: str, output_dir: Any) -> None:
        written.append(filename)
        original(cfg, filename, output_dir)

    assert replace_save_config(writer)
    assert replace_save_config(writer)  # once replaced, it stays so
    launch(make_config(x=0), _task, overrides=[f"hydra.run.dir={tmp_path}"], version_base="1.3")
    assert written == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert (tmp_path / ".hydra" / "config.yaml").read_text() == "x: 0\n"
    monkeypatch.setattr(hydra_utils, "_save_config", lambda cfg, filename: None)
    assert not replace_save_config(writer)  # another writer: left as it is


def test_hydra_Singleton_instances_tells_no_GlobalHydra_from_an_uninitialized_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Singleton, "_instances", dict(Singleton._instances))
    Singleton._instances.pop(GlobalHydra, None)
    with global_hydra_kept():
        GlobalHydra.instance()  # asking for it makes one
    assert GlobalHydra not in Singleton._instances
    with initialize(version_base="1.3", config_path=None):
        with global_hydra_kept():
            GlobalHydra.instance().clear()
        assert GlobalHydra.instance().is_initialized()


def test_hydra_JobReturn_return_value_holds_a_failed_jobs_exception_unraised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = ValueError("boom")
    failed = JobReturn(overrides=["x=1"], status=JobStatus.FAILED)
    failed.return_value = error
    done = JobReturn(overrides=["x=2"], status=JobStatus.COMPLETED)
    done.return_value = 7
    assert job_return_value(failed) is error and job_return_value(done) == 7
    assert capsys.readouterr().err == ""
