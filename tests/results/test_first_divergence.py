# SPDX-License-Identifier: MIT
"""Two runs whose results differ: diff names the first point where they parted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hydra_zen import builds, make_config

from mushin_box import MetricsCallback, Workflow, seed_everything_per_rank
from mushin_box._core.layout import FINGERPRINTS_FILE
from mushin_box._core.sidecars import read_json
from mushin_box.testing import TinyDataModule, TinyModule


def _config() -> Any:
    import pytorch_lightning as pl

    trainer = builds(
        pl.Trainer,
        accelerator="cpu",
        devices=1,
        max_epochs=2,
        callbacks=[builds(MetricsCallback)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir="${hydra:runtime.output_dir}",
    )
    return make_config(
        seed=5, trainer=trainer, module=builds(TinyModule), datamodule=builds(TinyDataModule)
    )


def seeded_in_its_body(trainer: Any, module: Any, datamodule: Any, seed: int) -> Any:
    """Seeds too late: hydra-zen built the module (its initial weights) before this runs."""
    seed_everything_per_rank(seed)
    trainer.fit(module, datamodule=datamodule)
    return MetricsCallback.final_metrics(trainer)


def fit(trainer: Any, module: Any, datamodule: Any, seed: int) -> Any:
    trainer.fit(module, datamodule=datamodule)
    return MetricsCallback.final_metrics(trainer)


def seed_first(cfg: Any) -> None:
    seed_everything_per_rank(cfg.seed)


def _diff(a: Path, b: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "diff", str(a), str(b)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_a_task_that_seeds_in_its_body_is_told_so(tmp_path: Path) -> None:
    for name in ("a", "b"):
        Workflow(seeded_in_its_body, _config()).run(working_dir=tmp_path / name, progress=False)
    proc = _diff(tmp_path / "a" / "cell", tmp_path / "b" / "cell")
    assert proc.returncode == 1
    first = proc.stdout.splitlines()[0]
    assert first.startswith("same experiment, results differ: ")
    assert first.endswith(
        "first divergence: initial weights differ: the module is built before seeding. "
        "Seed in pre_call (docs/reproducibility.md)"
    )
    prints = read_json(tmp_path / "a" / "cell" / FINGERPRINTS_FILE)
    assert [e["epoch"] for e in prints["epochs"]] == [0, 1] and prints["world_size"] == 1


@pytest.mark.slow
def test_the_same_task_seeded_in_pre_call_is_the_same(tmp_path: Path) -> None:
    for name in ("a", "b"):
        Workflow(fit, _config(), pre_call=seed_first).run(
            working_dir=tmp_path / name, progress=False
        )
    proc = _diff(tmp_path / "a" / "cell", tmp_path / "b" / "cell")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[0] == "same experiment, same results"


@pytest.mark.parametrize("on", [True, False])
def test_fingerprints_can_be_turned_off(tmp_path: Path, on: bool) -> None:
    import pytorch_lightning as pl

    callback = MetricsCallback(save_dir=tmp_path, fingerprints=on)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, callbacks=[callback], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(TinyModule(), datamodule=TinyDataModule())
    assert (tmp_path / FINGERPRINTS_FILE).exists() is on
    assert (callback.state_dict()["fingerprints"]["fit_start"] is not None) is on


#: the cause named when weights differ between fits at other world sizes
PER_RANK = (
    "each rank's batch is per-rank, so the global batch changed; use a world-size-invariant "
    "sampler, e.g. a global batch size"
)


def _cell(root: Path, ranks: int, loss: float, prints: dict[str, Any]) -> Path:
    """A cell of ``ranks`` ranks (its record's run.topology.world_size) with its fit's
    fingerprints: the same start, weights after epoch 0 that ``loss`` tells apart."""
    from sweep_files import provenance, write_cell

    from mushin_box._core.sidecars import write_json_atomic

    cell = write_cell(root, {}, metrics={"loss": loss})
    write_json_atomic(cell / "mushin_provenance.json", provenance({}, ranks=ranks))
    start = {"sha256": "s", "norm": 1.0}
    epoch = {"epoch": 0, "weights": {"sha256": f"w{loss}", "norm": 1.0 + ranks + loss}}
    write_json_atomic(cell / FINGERPRINTS_FILE, {**prints, "fit_start": start, "epochs": [epoch]})
    return cell


@pytest.mark.parametrize("recorded", [True, False])
def test_weights_that_differ_at_another_world_size_name_the_per_rank_batch(
    tmp_path: Path, recorded: bool
) -> None:
    from mushin_box._results.diff import diff_provenance

    # recorded=False: fingerprints without a world size; the records' topology gives it
    two = _cell(tmp_path / "two", 2, 0.5, {"world_size": 2} if recorded else {})
    one = _cell(tmp_path / "one", 1, 0.4, {"world_size": 1} if recorded else {})
    assert diff_provenance(two, one).verdict() == (
        "same experiment, results differ: loss 0.5 vs 0.4; first divergence: weights differ "
        f"at epoch 0 (norm 3.5 vs 2.4; world size 2 vs 1: {PER_RANK})"
    )
    same = _cell(tmp_path / "same", 1, 0.3, {"world_size": 1} if recorded else {})
    assert (
        diff_provenance(same, one).verdict().endswith("weights differ at epoch 0 (norm 2.3 vs 2.4)")
    )
