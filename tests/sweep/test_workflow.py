# SPDX-License-Identifier: MIT
"""Workflow.run: grid sweeps, per-cell sidecars, on_error, resume, time budget."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from hydra_zen import make_config
from workflow_tasks import grid_task, marker_task, resume_task

from mushin_box import Workflow, hydra_list, load_experiment, multirun
from mushin_box._core.sidecars import SidecarWarning, read_json

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

GRID = {"lr": multirun([0.1, 0.2, 0.3]), "seed": multirun([0, 1])}


def _statuses(root: Path) -> dict[str, str]:
    return {
        p.parent.name: json.loads(p.read_text())["status"]
        for p in root.glob("*/mushin_status.json")
    }


def test_grid_with_failing_cell_on_error_nan(tmp_path: Path) -> None:
    ds = Workflow(grid_task).run(
        working_dir=tmp_path, on_error="nan", progress=False, fail_at=0.2, **GRID
    )
    assert dict(ds.sizes) == {"lr": 3, "seed": 2}
    loss = ds["loss"]
    assert math.isnan(loss.sel(lr=0.2, seed=1).item())
    assert loss.sel(lr=0.3, seed=1).item() == pytest.approx(0.6)
    assert int(loss.notnull().sum()) == 5
    failures = json.loads(ds.attrs["failures"])
    assert failures[0]["combo"] == {"lr": 0.2, "seed": 1}
    assert failures[0]["error"]["type"] == "ValueError"
    cell = tmp_path / ds["cell_dir"].sel(lr=0.2, seed=1).item()
    assert "planned failure" in (cell / "mushin_error.txt").read_text()
    assert sorted(_statuses(tmp_path).values()) == ["completed"] * 5 + ["failed"]
    manifest = read_json(tmp_path / "mushin_sweep.json")
    assert manifest["params"] == ["lr", "seed"] and len(manifest["cells"]) == 6


def _hydration_task(lr: float, hydration: int = 0) -> dict[str, float]:
    return {"loss": lr * hydration}


def test_a_constant_key_that_starts_with_hydra_is_left_out_of_the_cell_names(
    tmp_path: Path,
) -> None:
    # only Hydra's own keys (hydra.*, hydra/...) are not the task's; `hydration` is
    ds = Workflow(_hydration_task).run(
        working_dir=tmp_path, progress=False, hydration=2, lr=multirun([0.1, 0.2])
    )
    assert sorted(_statuses(tmp_path)) == ["lr=0.1", "lr=0.2"]
    assert ds["loss"].sel(lr=0.2).item() == pytest.approx(0.4)


def test_grid_with_failing_cell_on_error_raise(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="planned failure at lr=0.2, seed=1"):
        Workflow(grid_task).run(working_dir=tmp_path, progress=False, fail_at=0.2, **GRID)
    statuses = _statuses(tmp_path)
    # cells run in grid order: 3 before the failure completed, the rest skipped (aborted)
    assert sorted(statuses.values()) == ["completed"] * 3 + ["failed"] + ["skipped"] * 2
    ds = load_experiment(tmp_path)
    assert int(ds["loss"].notnull().sum()) == 3
    skipped = json.loads(ds.attrs["skipped"])
    assert {tuple(s["combo"].values()) for s in skipped} == {(0.3, 0), (0.3, 1)}


def test_cell_dirs_are_keyed_by_values_and_stable(tmp_path: Path) -> None:
    wf = Workflow(grid_task)
    first = wf.run(working_dir=tmp_path, progress=False, **GRID)
    second = wf.run(working_dir=tmp_path, progress=False, **GRID)
    assert first["cell_dir"].values.tolist() == second["cell_dir"].values.tolist()
    assert "lr=0.1,seed=0" in first["cell_dir"].values.ravel().tolist()
    assert len(list(tmp_path.glob("*/mushin_status.json"))) == 6


def test_tricky_values_reach_the_task_exactly(tmp_path: Path) -> None:
    values = ["a,b", "it's", 'say "hi"', "x=y", " pad ", "ünï ☃", "${oops}", None, True, 1.5]
    seen = tmp_path / "seen"

    def task(s: object) -> dict[str, float]:
        seen.mkdir(exist_ok=True)
        (seen / f"{len(list(seen.iterdir()))}.json").write_text(json.dumps(s))
        return {"ok": 1.0}

    ds = Workflow(task, make_config(s=None)).run(
        working_dir=tmp_path / "w", progress=False, s=multirun(values)
    )
    got = sorted((json.loads(p.read_text()) for p in seen.iterdir()), key=repr)
    assert got == sorted(values, key=repr)
    assert int(ds["ok"].notnull().sum()) == len(values)
    assert len(set(ds["cell_dir"].values.tolist())) == len(values)


def test_hydra_list_is_one_value_not_a_sweep(tmp_path: Path) -> None:
    def task(layers: list[int]) -> dict[str, float]:
        return {"n": float(len(layers))}

    ds = Workflow(task, make_config(layers=[1])).run(
        working_dir=tmp_path, progress=False, layers=hydra_list([64, 64, 32])
    )
    assert ds["n"].item() == 3.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"launcher_config": {"nodes": 1}}, ValueError, "without launcher"),
        ({"resume": True}, ValueError, "needs the working_dir"),
        ({"on_error": "ignore"}, ValueError, "'raise' or 'nan'"),
        ({"lr": [0.1, 0.2]}, TypeError, "multirun"),
        ({"lrr": multirun([0.1])}, ValueError, "did you mean 'lr'"),
        ({"max_total_seconds": 0}, ValueError, "max_total_seconds"),
    ],
)
def test_bad_input_is_rejected_before_anything_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, object],
    error: type[Exception],
    match: str,
) -> None:
    # without working_dir a run writes to multirun/<timestamp> under the current directory:
    # run from tmp_path, so that "nothing was written" looks where the run would write (and
    # the checkout stays clean)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        Workflow(grid_task).run(progress=False, **kwargs)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_resume_reuses_completed_cells_and_reruns_failed(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    wf = Workflow(marker_task)
    params = {"x": multirun([1, 2, 3]), "markers": str(markers)}
    wf.run(working_dir=tmp_path / "w", progress=False, **params)
    assert len(list(markers.iterdir())) == 3
    cell = tmp_path / "w" / "x=2"
    status = read_json(cell / "mushin_status.json")
    status["status"] = "failed"
    (cell / "mushin_status.json").write_text(json.dumps(status))
    ds = wf.run(working_dir=tmp_path / "w", progress=False, resume=True, **params)
    names = sorted(p.name.split(".")[0] for p in markers.iterdir())
    assert names == ["x=1", "x=2", "x=2", "x=3"]  # only the failed cell ran again
    assert ds["x2"].values.tolist() == [2, 4, 6]
    assert read_json(cell / "mushin_status.json")["attempt"] == 2


def test_resume_with_changed_config_reruns_with_a_warning(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    params = {"x": multirun([1, 2]), "markers": str(markers)}
    Workflow(marker_task).run(working_dir=tmp_path / "w", progress=False, **params)
    with pytest.warns(UserWarning, match="config fingerprint changed"):
        Workflow(marker_task).run(
            working_dir=tmp_path / "w", progress=False, resume=True, sleep_s=0.001, **params
        )
    assert len(list(markers.iterdir())) == 4


def test_resume_reports_a_changed_grid(tmp_path: Path) -> None:
    wf = Workflow(grid_task)
    wf.run(working_dir=tmp_path, progress=False, lr=multirun([0.1, 0.2]))
    with pytest.warns(UserWarning, match="1 new cell"):
        ds = wf.run(working_dir=tmp_path, progress=False, resume=True, lr=multirun([0.1, 0.2, 0.3]))
    assert ds["loss"].values.tolist() == pytest.approx([0.1, 0.2, 0.3])


def test_truncated_sidecar_is_missing_with_a_warning(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    params = {"x": multirun([1, 2]), "markers": str(markers)}
    Workflow(marker_task).run(working_dir=tmp_path / "w", progress=False, **params)
    status = tmp_path / "w" / "x=1" / "mushin_status.json"
    status.write_bytes(status.read_bytes()[:17])
    with pytest.warns(SidecarWarning):
        ds = Workflow(marker_task).run(
            working_dir=tmp_path / "w", progress=False, resume=True, **params
        )
    assert ds["x2"].values.tolist() == [2, 4]
    assert sorted(p.name.split(".")[0] for p in markers.iterdir()) == ["x=1", "x=1", "x=2"]


def test_mushin_resume_context_counts_attempts(tmp_path: Path) -> None:
    wf = Workflow(resume_task)
    wf.run(working_dir=tmp_path, progress=False, x=multirun([1]))
    ds = wf.run(working_dir=tmp_path, progress=False, x=multirun([1]))
    assert ds["attempt"].values.tolist() == [2.0]


class _BudgetSpentAfterFirstCell:
    """The cell runner's clock (its ``time`` module): real until the first cell has left its
    marker, then a day later. No sleep and no assumption about how fast the machine is: the
    first cell starts within the budget, every later one after it."""

    def __init__(self, markers: Path) -> None:
        self.markers = markers

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def time(self) -> float:
        return time.time() + (86400.0 if any(self.markers.glob("*.done")) else 0.0)


def test_time_budget_skips_unstarted_cells_and_resume_finishes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box._sweep import cells

    markers = tmp_path / "markers"
    params = {"x": multirun([1, 2, 3, 4]), "markers": str(markers)}
    wf = Workflow(marker_task)
    monkeypatch.setattr(cells, "time", _BudgetSpentAfterFirstCell(markers))
    ds = wf.run(working_dir=tmp_path / "w", progress=False, max_total_seconds=3600.0, **params)
    assert ds["x2"].values.tolist()[0] == 2 and int(ds["x2"].notnull().sum()) == 1
    skipped = json.loads(ds.attrs["skipped"])
    assert len(skipped) == 3 and all(s["reason"] == "max_total_seconds" for s in skipped)
    monkeypatch.setattr(cells, "time", time)
    ds = wf.run(working_dir=tmp_path / "w", progress=False, resume=True, **params)
    assert ds["x2"].values.tolist() == [2, 4, 6, 8]
    assert len(list(markers.iterdir())) == 4  # each cell computed exactly once overall


@pytest.mark.slow
def test_multi_rank_launch_disables_the_budget_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), str(REPO)]))
    with pytest.warns(UserWarning, match="timeout_min"):
        ds = Workflow(grid_task).run(
            working_dir=tmp_path,
            launcher="submitit_local",
            launcher_config={"tasks_per_node": 2, "timeout_min": 5},
            max_total_seconds=1e-6,  # would skip everything if it were enforced
            progress=False,
            lr=multirun([0.1, 0.2]),
        )
    assert ds["loss"].values.tolist() == pytest.approx([0.1, 0.2])


def test_multi_rank_detection() -> None:
    from mushin_box._sweep.cells import is_multi_rank
    from mushin_box._sweep.workflow import _deadline

    step = {"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0"}
    assert is_multi_rank(step) and is_multi_rank({"WORLD_SIZE": "2", "RANK": "1"})
    assert not is_multi_rank({"SLURM_NTASKS": "1"}) and not is_multi_rank({})
    with pytest.warns(UserWarning, match="disabled for multi-rank"):
        assert _deadline(1, {"nodes": 2, "tasks_per_node": 1}) is None
    assert _deadline(1, {"nodes": 1, "tasks_per_node": 1, "timeout_min": 9}) is not None


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from mushin_box import Workflow, multirun
    from workflow_tasks import marker_task
    Workflow(marker_task).run(working_dir=sys.argv[1], progress=False, resume=True,
                              x=multirun([1, 2, 3, 4]), markers=sys.argv[2], sleep_s=1.5)
    """
)


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_computes_every_cell_once(tmp_path: Path) -> None:
    script = tmp_path / "sweep.py"
    script.write_text(KILL_SCRIPT)
    work, markers = tmp_path / "w", tmp_path / "markers"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    proc = subprocess.Popen([sys.executable, str(script), str(work), str(markers)], env=env)
    try:
        deadline = time.monotonic() + 120

        # two cells done and the third running: wait for its status to say so (a loaded
        # machine may take a while between one cell's end and the next one's start). The
        # running cell must be one without a marker: the second cell still reads
        # "running" between its task's end (its marker) and its "completed", and killing
        # it there would run it twice
        def third_running() -> bool:
            done = {p.name.split(".")[0] for p in markers.glob("*.done")}
            running = {c for c, s in _statuses(work).items() if s == "running"}
            return len(done) >= 2 and bool(running - done)

        while not third_running():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "running" in _statuses(work).values()  # the killed cell was mid-run
    rerun = subprocess.run(
        [sys.executable, str(script), str(work), str(markers)],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    counts: dict[str, int] = {}
    for p in markers.glob("*.done"):
        key = p.name.split(".")[0]
        counts[key] = counts.get(key, 0) + 1
    assert counts == {"x=1": 1, "x=2": 1, "x=3": 1, "x=4": 1}
    ds = load_experiment(work)
    assert ds["x2"].values.tolist() == [2, 4, 6, 8]


@pytest.mark.slow
def test_same_sweep_under_submitit_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the workers unpickle grid_task by reference: they must import tests/workflow_tasks
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "tests"), str(REPO)]))
    ds = Workflow(grid_task).run(
        working_dir=tmp_path,
        launcher="submitit_local",
        launcher_config={"timeout_min": 5},
        on_error="nan",
        progress=False,
        fail_at=0.2,
        **GRID,
    )
    assert int(ds["loss"].notnull().sum()) == 5
    assert math.isnan(ds["loss"].sel(lr=0.2, seed=1).item())
    pids = {read_json(p)["pid"] for p in tmp_path.glob("*/mushin_status.json")}
    assert os.getpid() not in pids  # cells ran in other processes


def test_load_experiment_on_half_finished_sweep(tmp_path: Path) -> None:
    Workflow(grid_task).run(working_dir=tmp_path, progress=False, **GRID)
    for cell in ("lr=0.3,seed=0", "lr=0.3,seed=1"):
        for f in (tmp_path / cell).iterdir():
            if f.is_file():
                f.unlink()
    ds = load_experiment(tmp_path)
    assert np.isnan(ds["loss"].sel(lr=0.3).values).all()
    assert ds["status"].sel(lr=0.3).values.tolist() == ["pending", "pending"]
    assert ds["loss"].sel(lr=0.1, seed=1).item() == pytest.approx(0.2)


def test_progress_bar_counts_cells_and_quiet_switch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Workflow(grid_task).run(working_dir=tmp_path / "a", on_error="nan", fail_at=0.2, **GRID)
    out = capsys.readouterr().out
    assert "6/6" in out and "completed=5" in out and "failed=1" in out
    Workflow(grid_task).run(working_dir=tmp_path / "b", progress=False, **GRID)
    assert "6/6" not in capsys.readouterr().out


def test_provenance_sidecar_redacts_secrets(tmp_path: Path) -> None:
    def task(lr: float, api_key: str, db: dict[str, str]) -> dict[str, float]:
        return {"lr": lr}

    config = make_config(lr=0.1, api_key="sk-PLANTED-1", db={"host": "h", "password": "PLANTED-2"})
    Workflow(task, config).run(working_dir=tmp_path, progress=False, lr=multirun([0.1, 0.2]))
    for cell in ("lr=0.1", "lr=0.2"):
        prov = read_json(tmp_path / cell / "mushin_provenance.json")
        repro = prov["reproducibility"]
        assert repro["config"]["api_key"] == "<redacted>"
        assert repro["config"]["db"] == {"host": "h", "password": "<redacted>"}
        assert (  # the fingerprint of the whole config (world size included) is a run fact
            prov["run"]["fingerprints"]["config"]
            == read_json(tmp_path / cell / "mushin_status.json")["fingerprints"]["config"]
        )
        assert repro["packages"]["torch"] and repro["python"].startswith("3.")
    for f in tmp_path.rglob("*.json"):
        assert "PLANTED" not in f.read_text(encoding="utf-8"), f


def test_lightning_task_series_in_sweep_results(tmp_path: Path) -> None:
    from workflow_tasks import lightning_task

    ds = Workflow(lightning_task).run(
        working_dir=tmp_path, progress=False, lr=multirun([0.01, 0.1]), max_epochs=2
    )
    assert ds["fit.val_loss"].dims == ("lr", "epoch")
    assert ds["fit.val_loss"].shape == (2, 2) and bool(ds["fit.val_loss"].notnull().all())
    assert ds["final_val_loss"].values.tolist() == pytest.approx(
        ds["fit.val_loss"].isel(epoch=-1).values.tolist()
    )


def test_image_digest_joins_the_cell_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    markers = tmp_path / "markers"
    params = {"x": multirun([1]), "markers": str(markers)}
    monkeypatch.setenv("MUSHIN_SIF_SHA256", "a" * 64)
    Workflow(marker_task).run(working_dir=tmp_path / "w", progress=False, **params)
    status = read_json(tmp_path / "w" / "x=1" / "mushin_status.json")
    assert status["fingerprints"]["image"] == "a" * 64
    Workflow(marker_task).run(working_dir=tmp_path / "w", progress=False, resume=True, **params)
    assert len(list(markers.iterdir())) == 1  # same image: reused
    monkeypatch.setenv("MUSHIN_SIF_SHA256", "b" * 64)
    with pytest.warns(UserWarning, match="image fingerprint changed"):
        Workflow(marker_task).run(working_dir=tmp_path / "w", progress=False, resume=True, **params)
    assert len(list(markers.iterdir())) == 2


def _seed_from_config(cfg: object) -> None:
    from mushin_box import seed_everything_per_rank

    seed_everything_per_rank(cfg.seed)  # type: ignore[attr-defined]


def test_pre_call_seeding_makes_model_init_reproducible(tmp_path: Path) -> None:
    import pytorch_lightning as pl
    from hydra_zen import builds

    from mushin_box.testing import TinyDataModule, TinyModule

    def task(seed: int, module: TinyModule, datamodule: TinyDataModule) -> dict[str, float]:
        trainer = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_epochs=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        first = float(module.layer.weight.detach().flatten()[0])
        trainer.fit(module, datamodule=datamodule)
        return {"w0": first, "val_loss": float(trainer.callback_metrics["val_loss"])}

    config = make_config(seed=3, module=builds(TinyModule), datamodule=builds(TinyDataModule))
    runs = [
        Workflow(task, config, pre_call=_seed_from_config).run(
            working_dir=tmp_path / str(i), progress=False, seed=multirun([3, 4])
        )
        for i in range(2)
    ]
    assert runs[0]["w0"].values.tolist() == runs[1]["w0"].values.tolist()
    assert runs[0]["val_loss"].values.tolist() == runs[1]["val_loss"].values.tolist()
    assert runs[0]["w0"].sel(seed=3).item() != runs[0]["w0"].sel(seed=4).item()


@pytest.mark.slow
def test_only_a_resume_continues_from_a_cells_checkpoints(tmp_path: Path, rank_log: Path) -> None:
    """Running a sweep again *without* resume starts each cell afresh: an earlier run's
    checkpoints (maybe of another config) are set aside, not loaded; resume=True after an
    interrupted attempt with the same fingerprints continues from last.ckpt."""
    from conftest import read_rank_logs
    from workflow_tasks import checkpointed_task

    wf = Workflow(checkpointed_task)
    first = wf.run(working_dir=tmp_path / "w", progress=False, max_epochs=2)
    assert float(first["resumed"]) == 0.0
    cell = tmp_path / "w" / "cell"
    assert (cell / "ckpt" / "last.ckpt").is_file()

    again = wf.run(working_dir=tmp_path / "w", progress=False, max_epochs=3)
    assert float(again["resumed"]) == 0.0  # trained from epoch 0, not from the old run
    epochs = [int(r["epoch"]) for r in read_rank_logs(rank_log)[0]]
    assert epochs == [0, 1, 0, 1, 2]
    stale = list((cell / ".mushin" / "stale-checkpoints").rglob("last.ckpt"))
    assert len(stale) == 1  # kept, out of the way of find_last_checkpoint

    # an attempt that died mid-way (status left "running") is continued by resume=True
    status = read_json(cell / "mushin_status.json")
    (cell / "mushin_status.json").write_text(json.dumps({**status, "status": "running"}))
    resumed = wf.run(working_dir=tmp_path / "w", progress=False, max_epochs=4, resume=True)
    assert float(resumed["resumed"]) == 0.0  # max_epochs changed: another config, afresh
    status = read_json(cell / "mushin_status.json")
    (cell / "mushin_status.json").write_text(json.dumps({**status, "status": "running"}))
    resumed = wf.run(working_dir=tmp_path / "w", progress=False, max_epochs=4, resume=True)
    assert float(resumed["resumed"]) == 1.0


def test_multi_rank_cells_decide_alike_whether_to_continue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank of a multi-rank cell decides alone (here: WORLD_SIZE=2 makes this process
    look like one of them); a changed config never continues from the old checkpoint, even
    when another rank already rewrote the status."""
    import torch
    from workflow_tasks import ckpt_probe_task

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    wf = Workflow(ckpt_probe_task)
    wf.run(working_dir=tmp_path, progress=False, x=1)
    cell = tmp_path / "cell"
    torch.save({"v": "old"}, cell / "last.ckpt")  # loadable, as find_last_checkpoint checks
    changed = wf.run(working_dir=tmp_path, progress=False, x=2, resume=True)
    assert float(changed["resumed"]) == 0.0
    # as a second rank would see it: the status rank 0 of this attempt just wrote
    status = read_json(cell / "mushin_status.json")
    assert status["previous_fingerprints"] != status["fingerprints"]
    torch.save({"v": "new"}, cell / "last.ckpt")
    (cell / "mushin_status.json").write_text(json.dumps({**status, "status": "running"}))
    same = wf.run(working_dir=tmp_path, progress=False, x=2, resume=True)
    assert float(same["resumed"]) == 1.0  # an interrupted attempt of the same config
