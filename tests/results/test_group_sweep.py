# SPDX-License-Identifier: MIT
"""Sweeps over a Hydra config group: the coordinates are the option names, and each cell
keeps its metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.core.config_store import ConfigStore
from hydra_zen import builds, launch, make_config, zen

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.sidecars import read_json


class Net:
    def __init__(self, width: int) -> None:
        self.width = width


def task(model: Net) -> dict[str, float]:
    return {"width": float(model.width)}


@pytest.fixture
def model_group() -> Iterator[None]:
    store = ConfigStore.instance()
    store.store(group="model", name="small", node=builds(Net, width=8))
    store.store(group="model", name="big", node=builds(Net, width=64))
    yield
    store.repo.pop("model", None)  # other tests' "model" keys are no group


def _check(ds: object, root: Path) -> None:
    import xarray as xr

    assert isinstance(ds, xr.Dataset)
    assert ds["model"].values.tolist() == ["small", "big"]
    assert ds["status"].values.tolist() == ["completed", "completed"]
    assert ds["width"].values.tolist() == [8.0, 64.0]
    small = ds["cell_dir"].sel(model="small").item()
    assert read_json(root / small / "mushin_status.json")["combo"] == {"model": "small"}


def test_a_group_sweep_of_a_field_without_a_default(tmp_path: Path, model_group: None) -> None:
    ds = Workflow(task, make_config(model=None)).run(
        working_dir=tmp_path, progress=False, model=multirun(["small", "big"])
    )
    _check(ds, tmp_path)
    _check(load_experiment(tmp_path), tmp_path)


def test_a_group_sweep_with_a_defaults_list_keeps_its_metrics(
    tmp_path: Path, model_group: None
) -> None:
    config = make_config(hydra_defaults=["_self_", {"model": "small"}], model=None)
    wf = Workflow(task, config)
    ds = wf.run(working_dir=tmp_path, progress=False, model=multirun(["small", "big"]))
    _check(ds, tmp_path)
    # resume matches the cells by their option names: both are reused
    again = wf.run(
        working_dir=tmp_path, progress=False, resume=True, model=multirun(["small", "big"])
    )
    assert again["width"].values.tolist() == [8.0, 64.0]
    big = tmp_path / again["cell_dir"].sel(model="big").item()
    assert read_json(big / "mushin_status.json")["attempt"] == 1  # not run again


def test_a_group_sweep_in_raw_overrides(tmp_path: Path, model_group: None) -> None:
    config = make_config(hydra_defaults=["_self_", {"model": "small"}], model=None)
    ds = Workflow(task, config).run(
        working_dir=tmp_path, progress=False, overrides=["model=small,big"]
    )
    _check(ds, tmp_path)


def test_a_plain_multirun_over_a_group_has_the_option_names(
    tmp_path: Path, model_group: None
) -> None:
    import torch

    def fit(model: Net) -> None:
        from hydra.core.hydra_config import HydraConfig

        job = Path(HydraConfig.get().runtime.output_dir)
        torch.save({"epoch": [0], "width": [float(model.width)]}, job / "fit_metrics.pt")

    launch(
        make_config(model=None),
        zen(fit),
        overrides=[f"hydra.sweep.dir={tmp_path}", "+model=small,big"],
        multirun=True,
        version_base="1.3",
    )
    ds = load_experiment(tmp_path)
    assert ds["model"].values.tolist() == ["small", "big"]
    assert ds["fit.width"].sel(epoch=0).values.tolist() == [8.0, 64.0]
