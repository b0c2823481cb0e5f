# SPDX-License-Identifier: MIT
"""The process that runs a sweep: usable after any launcher (issue 17, item 6), and one
process, with its deadline, inside a multi-task allocation (item 10)."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import open_dict
from workflow_tasks import grid_task

from mushin_box import Workflow, job_dir, multirun

INPROCESS = "mushin_test_inprocess"


class InProcessLauncher(Launcher):
    """Runs each job in this process as hydra-joblib-launcher does with ``n_jobs=1``
    (its ``execute_job``: restore the singletons, set ``HydraConfig`` to the job's sweep
    config, ``run_job``)."""

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        setup_globals()
        state = Singleton.get_state()
        runs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            Singleton.set_state(state)
            loader = self.hydra_context.config_loader
            sweep_config = loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
                sweep_config.hydra.job.num = idx
            HydraConfig.instance().set_config(sweep_config)
            runs.append(
                run_job(
                    hydra_context=self.hydra_context,
                    config=sweep_config,
                    task_function=self.task_function,
                    job_dir_key="hydra.sweep.dir",
                    job_subdir_key="hydra.sweep.subdir",
                )
            )
        return runs


@pytest.fixture
def inprocess_launcher(monkeypatch: pytest.MonkeyPatch) -> str:
    """The in-process launcher's name for ``launcher=`` (Hydra instantiates launchers
    only from the ``hydra_plugins`` namespace: it is registered there)."""
    module = types.ModuleType(f"hydra_plugins.{INPROCESS}")
    module.InProcessLauncher = InProcessLauncher  # type: ignore[attr-defined]
    monkeypatch.setattr(InProcessLauncher, "__module__", module.__name__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    Plugins.instance().register(InProcessLauncher)
    target = f"{module.__name__}.InProcessLauncher"
    ConfigStore.instance().store(group="hydra/launcher", name=INPROCESS, node={"_target_": target})
    return INPROCESS


@pytest.mark.parametrize("fail", [False, True], ids=["completed", "raised"])
def test_the_process_is_usable_after_an_in_process_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inprocess_launcher: str, fail: bool
) -> None:
    """Item 6: the joblib launcher left HydraConfig set, with a MISSING output dir, so
    job_dir(), MetricsCallback() and seed_everything_per_rank raised from then on."""
    from hydra.core.global_hydra import GlobalHydra

    from mushin_box import seed_everything_per_rank

    params: dict[str, Any] = {"lr": multirun([0.1, 0.2])}
    if fail:
        params.update(fail_at=0.2, seed=1)

    def run() -> Any:
        return Workflow(grid_task).run(
            working_dir=tmp_path / "s", launcher=inprocess_launcher, progress=False, **params
        )

    if fail:
        with pytest.raises(ValueError):
            run()
    else:
        ds = run()
        assert ds["status"].values.tolist() == ["completed", "completed"]
    assert not HydraConfig.initialized()
    assert not GlobalHydra.instance().is_initialized()
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path / "job"))
    assert job_dir() == tmp_path / "job"
    assert seed_everything_per_rank(7) == 7
    assert (tmp_path / "job" / ".mushin" / "seeds").is_dir()


def test_is_multi_rank_needs_a_per_rank_variable() -> None:
    from mushin_box._sweep.cells import is_multi_rank

    # sweep drivers: salloc -n 4 (no SLURM_PROCID); an sbatch -n 4 batch script (its
    # SLURM_PROCID is no step's); a world size without a rank
    assert not is_multi_rank({"SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_JOB_ID": "9"})
    assert not is_multi_rank({"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"})
    assert not is_multi_rank({"WORLD_SIZE": "2"})
    # ranks: srun tasks of a step, torchrun, Lightning's ddp launcher, HydraDDP's children
    step = {"SLURM_NTASKS": "4", "SLURM_STEP_ID": "0"}
    assert is_multi_rank({**step, "SLURM_PROCID": "0"}) and is_multi_rank(
        {**step, "SLURM_PROCID": "3"}
    )
    assert not is_multi_rank({"SLURM_NTASKS": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0"})
    assert is_multi_rank({"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0"})
    assert is_multi_rank({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "NODE_RANK": "0"})
    assert is_multi_rank({"WORLD_SIZE": "2", "MUSHIN_GLOBAL_RANK": "1"})
    assert not is_multi_rank({"WORLD_SIZE": "1", "RANK": "0"})


def test_a_driver_in_a_multi_task_allocation_keeps_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 10: under `salloc -n 4` a sequential sweep was taken for a multi-rank launch,
    and max_total_seconds was switched off (every cell ran, with a warning)."""
    import warnings

    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_NPROCS", "4")
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = Workflow(grid_task).run(
            working_dir=tmp_path,
            progress=False,
            max_total_seconds=1e-9,  # over before the first cell decides
            lr=multirun([0.1, 0.2]),
        )
    assert ds["status"].values.tolist() == ["skipped", "skipped"]
    assert not [w for w in caught if "multi-rank" in str(w.message)]
    for cell in ("lr=0.1", "lr=0.2"):
        status = json.loads((tmp_path / cell / "mushin_status.json").read_text())
        assert status["status"] == "skipped"
