# SPDX-License-Identifier: MIT
"""Reading results without torch: load_experiment from the ``*_metrics.json`` twins, the
``.pt`` fallback, the job config as a mapping, and the series laid on the grid."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sweep_files import lr_sweep, write_cell, write_manifest
from workflow_tasks import lightning_task

from mushin_box import Workflow, load_experiment, multirun
from mushin_box._core.sidecars import canonical_dumps

# importing any of these raises ImportError in the reader's process
GUARD = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "pytorch_lightning", "lightning_fabric"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, _NoTorch())
"""


def test_a_finished_sweep_loads_with_torch_unimportable(tmp_path: Path) -> None:
    Workflow(lightning_task).run(
        working_dir=tmp_path, progress=False, lr=multirun([0.05, 0.1]), max_epochs=2
    )
    code = GUARD + (
        "import json\n"
        "from mushin_box import load_experiment\n"
        "ds = load_experiment(sys.argv[1])\n"
        "print(json.dumps({'val': ds['fit.val_loss'].values.tolist(),\n"
        "                  'dims': list(ds['fit.val_loss'].dims),\n"
        "                  'status': ds['status'].values.tolist()}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["dims"] == ["lr", "epoch"] and out["status"] == ["completed", "completed"]
    for i, cell in enumerate(("lr=0.05", "lr=0.1")):
        written = torch.load(tmp_path / cell / "fit_metrics.pt", weights_only=True)
        assert out["val"][i] == pytest.approx(written["val_loss"])


def _pt_and_json(job: Path, pt_values: list[float], json_values: list[float]) -> None:
    job.mkdir(parents=True, exist_ok=True)
    torch.save({"epoch": [0, 1], "loss": pt_values}, job / "fit_metrics.pt")
    (job / "fit_metrics.json").write_bytes(canonical_dumps({"epoch": [0, 1], "loss": json_values}))


def test_the_json_twin_is_read_unless_the_pt_file_is_newer(tmp_path: Path) -> None:
    _pt_and_json(tmp_path, [1.0, 2.0], [3.0, 4.0])
    stamp = (tmp_path / "fit_metrics.pt").stat().st_mtime_ns
    os.utime(tmp_path / "fit_metrics.json", ns=(stamp, stamp))  # written together
    assert load_experiment(tmp_path)["fit.loss"].values.tolist() == [3.0, 4.0]
    # an older mushin-box resumed the job: it rewrote the .pt file, not the twin
    os.utime(tmp_path / "fit_metrics.pt", ns=(stamp + 10**9, stamp + 10**9))
    assert load_experiment(tmp_path)["fit.loss"].values.tolist() == [1.0, 2.0]


def test_a_job_without_a_json_twin_is_read_from_its_pt_file(tmp_path: Path) -> None:
    torch.save({"epoch": [0, 1], "loss": [1.0, float("nan")]}, tmp_path / "fit_metrics.pt")
    values = load_experiment(tmp_path)["fit.loss"].values
    assert values[0] == 1.0 and math.isnan(values[1])


def test_an_unreadable_twin_without_a_pt_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "fit_metrics.json").write_text('{"epoch": [0, 1], "loss"')
    with pytest.raises(ValueError, match=r"fit_metrics\.json is unreadable"):
        load_experiment(tmp_path)


def test_a_job_config_is_a_mapping_and_its_yaml_text(tmp_path: Path) -> None:
    (tmp_path / ".hydra").mkdir()
    text = "lr: 0.001\ntrainer:\n  devices: 2\nname: ${oc.env:USER}\n"
    (tmp_path / ".hydra" / "config.yaml").write_text(text)
    (tmp_path / "fit_metrics.json").write_bytes(canonical_dumps({"epoch": [0], "loss": [1.0]}))
    ds = load_experiment(tmp_path)
    assert ds.attrs["config"] == {
        "lr": 0.001,
        "trainer": {"devices": 2},
        "name": "${oc.env:USER}",  # interpolations are kept, not resolved
    }
    assert ds.attrs["config_yaml"] == text


def test_series_of_different_lengths_and_vectors_are_laid_on_one_grid(tmp_path: Path) -> None:
    a = write_cell(tmp_path, {"lr": 0.1}, metrics={}, series={"loss": [3.0, 2.0, 1.0]})
    b = write_cell(tmp_path, {"lr": 0.2}, metrics={}, series={"loss": [5.0, 4.0]})
    vector = {"epoch": [0, 1], "acc": [[0.1, 0.2], [0.3, 0.4]]}
    (b / "fit_metrics.json").write_bytes(canonical_dumps({**vector, "loss": [5.0, 4.0]}))
    write_manifest(tmp_path, {"lr": [0.1, 0.2]}, [a, b])
    ds = load_experiment(tmp_path)
    loss = ds["fit.loss"]
    assert loss.dims == ("lr", "epoch") and ds["epoch"].values.tolist() == [0, 1, 2]
    assert loss.sel(lr=0.2).values[:2].tolist() == [5.0, 4.0]
    assert math.isnan(loss.sel(lr=0.2, epoch=2).item())
    assert ds["fit.acc"].dims == ("lr", "epoch", "fit.acc_dim1")
    assert ds["fit.acc"].sel(lr=0.2).values[:2].tolist() == [[0.1, 0.2], [0.3, 0.4]]
    assert np.isnan(ds["fit.acc"].sel(lr=0.2, epoch=2).values).all()
    assert np.isnan(ds["fit.acc"].sel(lr=0.1).values).all()


def test_a_failed_cell_is_nan_and_the_nan_of_a_series_survives(tmp_path: Path) -> None:
    ds = load_experiment(lr_sweep(tmp_path))
    assert ds["status"].values.tolist() == ["completed", "completed", "failed"]
    val = ds["fit.val_loss"]
    assert val.sel(lr=0.01).values.tolist() == [1.8, 1.2, 0.9]
    assert math.isnan(val.sel(lr=0.1, epoch=1).item())
    assert np.isnan(val.sel(lr=1.0).values).all()
