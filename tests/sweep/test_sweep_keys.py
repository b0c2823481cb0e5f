# SPDX-License-Identifier: MIT
"""Sweep and override keys: refused before anything runs unless the task or its config
takes them; **kwargs tasks take any; raw sweeps refuse duplicates (issue 17, items 3-5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra_zen import builds, make_config
from workflow_tasks import grid_task

from mushin_box import Workflow, hydra_list, multirun

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)


class Net:
    """A model whose config is ``builds(Net)``: its nested keys are its parameters."""

    def __init__(self, width: int = 4, lr: float = 0.1) -> None:
        self.width, self.lr = width, lr


class OpenNet:
    def __init__(self, width: int = 4, **kwargs: Any) -> None:
        self.width, self.extra = width, kwargs


def net_task(net: Net, seed: int = 0) -> dict[str, float]:
    return {"lr": net.lr, "width": float(net.width), "seed": float(seed)}


def open_task(net: OpenNet) -> dict[str, float]:
    return {"depth": float(net.extra.get("depth", -1))}


def kwargs_task(**kwargs: Any) -> dict[str, float]:
    return {"x": float(kwargs.get("x", -1)), "n": float(len(kwargs))}


def no_param_task() -> dict[str, float]:
    return {"ok": 1.0}


def _nothing_written(root: Path) -> bool:
    return not root.exists() or not any(root.iterdir())


@pytest.mark.parametrize(
    ("task", "config", "params", "match"),
    [
        # the case: a near miss of a task parameter, no config given
        (grid_task, None, {"lrate": multirun([1.0, 2.0])}, r"'lrate'.*did you mean 'lr'"),
        # no near miss: the valid names are listed
        (
            grid_task,
            None,
            {"momentum": multirun([0.9])},
            r"'momentum' is neither.*valid names: fail_at, lr, seed\)",
        ),
        # a scalar, a single list value: every key is checked, not only sweeps
        (grid_task, None, {"lr": 0.1, "sed": 3}, r"did you mean 'seed'"),
        (grid_task, None, {"lr": 0.1, "layers": hydra_list([1])}, r"'layers' is neither"),
        # a nested key under a builds() node: its target's parameters
        (
            net_task,
            make_config(net=builds(Net, populate_full_signature=False)),
            {"net.lrr": multirun([0.1, 0.2])},
            r"'lrr' is not a parameter of net's target .*Net; did you mean 'lr'",
        ),
        # a nested key under a structured node without a target
        (
            net_task,
            make_config(net=make_config(width=4)),
            {"net.widht": 8},
            r"net has no field 'widht'; did you mean 'width'",
        ),
        # item 4: a task with no parameters has no name to sweep
        (no_param_task, None, {"x": multirun([1, 2])}, r"valid names: none.*takes no parameters"),
    ],
)
def test_a_key_the_task_cannot_take_is_refused_before_anything_runs(
    tmp_path: Path, task: Any, config: Any, params: dict[str, Any], match: str
) -> None:
    root = tmp_path / "sweep"
    with pytest.raises(ValueError, match=match):
        Workflow(task, config).run(working_dir=root, progress=False, **params)
    assert _nothing_written(root)


def test_a_raw_override_naming_nothing_is_refused_with_the_suggestion(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    with pytest.raises(ValueError, match=r"override 'lrate=0.1,0.2'.*did you mean 'lr'.*'\+lrate"):
        Workflow(grid_task).run(working_dir=root, progress=False, overrides=["lrate=0.1,0.2"])
    assert _nothing_written(root)


def test_keys_the_task_or_config_take_still_run(tmp_path: Path) -> None:
    config = make_config(net=builds(Net, populate_full_signature=False))
    ds = Workflow(net_task, config).run(
        working_dir=tmp_path / "a",
        progress=False,
        # a target parameter the node leaves out, a task parameter the config leaves out
        **{"net.lr": multirun([0.1, 0.2]), "net.width": 8, "seed": multirun([1])},
    )
    assert ds["lr"].values.ravel().tolist() == [0.1, 0.2]
    assert set(ds["width"].values.ravel().tolist()) == {8.0}
    # a **kwargs target takes any name; raw '+key' is Hydra's "add it on purpose"
    config = make_config(net=builds(OpenNet, populate_full_signature=False))
    sweep: dict[str, Any] = {"net.depth": multirun([2, 3])}
    ds = Workflow(open_task, config).run(working_dir=tmp_path / "b", progress=False, **sweep)
    assert ds["depth"].values.tolist() == [2.0, 3.0]
    ds = Workflow(grid_task).run(
        working_dir=tmp_path / "c", progress=False, overrides=["lr=0.1", "+note='x'"]
    )
    assert ds["loss"].item() == pytest.approx(0.1)


def test_a_kwargs_task_takes_any_name(tmp_path: Path) -> None:
    """Item 4: `task(**kwargs)` failed with Hydra's "Could not override 'x'"."""
    ds = Workflow(kwargs_task).run(working_dir=tmp_path, progress=False, x=multirun([1, 2]), y="a")
    assert ds["x"].values.tolist() == [1.0, 2.0]
    assert ds["n"].values.tolist() == [2.0, 2.0]  # x and y, nothing else


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("lr=1.0,1.0", r"'lr': 1.0 \(2x\)"),
        ("lr=0.5,0.50", r"'lr': 0.5 \(2x\)"),  # the same float, written twice
        ("lr=choice(0.2,0.2)", r"'lr': 0.2 \(2x\)"),
        ("+tag=x,'x'", r"'tag': 'x' \(2x\)"),  # quoted or not, the same string
    ],
)
def test_duplicate_values_in_a_raw_sweep_are_refused(
    tmp_path: Path, override: str, match: str
) -> None:
    """Item 5: `overrides=["a=1.0,1.0"]` ran twice into one cell."""
    root = tmp_path / "sweep"
    with pytest.raises(ValueError, match=r"duplicate values in the sweep over " + match):
        Workflow(grid_task).run(working_dir=root, progress=False, overrides=[override])
    assert _nothing_written(root)


def test_raw_sweep_values_are_distinct_as_multirun_ones() -> None:
    from mushin_box._sweep.validate import user_sweeps

    # 1 and 1.0 are distinct values (an int and a float job), as in multirun([1, 1.0])
    assert user_sweeps(["a=1,1.0", "s=x,'y'", "n=range(2)", "hydra.job.name=a,b"]) == {
        "a": [1, 1.0],
        "s": ["x", "y"],
        "n": [0, 1],
    }


def test_keys_hydra_groups_and_whole_config_tasks_are_accepted() -> None:
    from hydra.core.config_store import ConfigStore

    from mushin_box._sweep.validate import SweepKeys

    ConfigStore.instance().store(group="mushin_test_arch", name="small", node={"width": 2})

    def whole(zen_cfg: Any) -> None: ...

    def fixed(net: Any) -> None: ...

    chosen = make_config(
        hydra_defaults=["_self_", {"mushin_test_arch": "small"}],
        net=builds(Net, populate_full_signature=False, width="${oc.env:NO_SUCH_VAR}"),
    )
    keys = SweepKeys(fixed, chosen)
    assert keys.fields == {"net"}  # the defaults list is no field
    assert keys.needs_add("hydra.job.chdir") is False  # Hydra's own
    assert keys.needs_add("mushin_test_arch") is False  # chosen in the defaults list
    assert keys.needs_add("net.width") is False  # present (an interpolation, not resolved)
    assert keys.needs_add("net.lr") is True  # Net takes it: added with '+'
    assert SweepKeys(fixed, make_config(net=None)).needs_add("mushin_test_arch") is True
    assert SweepKeys(whole, make_config()).needs_add("anything") is True
    with pytest.raises(ValueError, match="did you mean 'net'"):
        keys.needs_add("nett.width")
    keys.check_raw(["+extra=1", "++net.x=2", "~net", "net=null", "hydra/launcher=basic"])
