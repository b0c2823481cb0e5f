# SPDX-License-Identifier: MIT
"""Finished sweeps written file by file, for the tests of the readers (show, report,
load_experiment): what ``Workflow.run`` leaves in each cell, without running anything."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.sidecars import canonical_dumps, write_json_atomic
from mushin_box._sweepdir.manifest import combo_id

COMMIT = "0123456789abcdef0123456789abcdef01234567"
PACKAGE_SHA = "f" * 64


def provenance(combo: Mapping[str, Any], *, seed: int | None = 1234, ranks: int = 1) -> dict:
    return {
        "schema": 3,
        "reproducibility": {
            "config": dict(combo),
            "image": "no image",
            "code": {"git": {"commit": COMMIT, "dirty": True}, "task_sha256": "e" * 64},
            "package_set": {"sha256": PACKAGE_SHA, "count": 62, "file": "mushin_packages.txt"},
            "seed": {"base": seed, "scheme": "base + global_rank"},
        },
        "run": {
            "host": "node1",
            "pid": 42,
            "topology": {"num_nodes": 1, "world_size": ranks},
        },
    }


def write_cell(
    root: Path,
    combo: Mapping[str, Any],
    *,
    status: str = "completed",
    metrics: Mapping[str, float] | None = None,
    series: Mapping[str, list[float]] | None = None,
    error: str | None = None,
) -> Path:
    """One cell: status, metrics, provenance, and (``series``) its ``fit_metrics.json``."""
    name = ",".join(f"{k}={v}" for k, v in combo.items()) or "cell"
    cell = root / name
    cell.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"attempt": 1, "cell": name, "combo": dict(combo), "status": status}
    if error is not None:
        record["error"] = {"type": "ValueError", "message": error, "file": "mushin_error.txt"}
        (cell / "mushin_error.txt").write_text(f"Traceback (most recent call last):\n{error}\n")
    write_json_atomic(cell / "mushin_status.json", record)
    write_json_atomic(cell / "mushin_provenance.json", provenance(combo))
    if metrics is not None:
        write_json_atomic(cell / "mushin_metrics.json", dict(metrics))
    if series is not None:
        epochs = len(next(iter(series.values())))
        data = {"epoch": list(range(epochs)), **series}
        (cell / "fit_metrics.json").write_bytes(canonical_dumps(data))
    return cell


def write_manifest(root: Path, grid: Mapping[str, list[Any]], cells: list[Path]) -> None:
    import json

    entries = {}
    for cell in cells:
        record = json.loads((cell / "mushin_status.json").read_text())
        entries[combo_id(record["combo"])] = {
            "attempt": 1,
            "combo": record["combo"],
            "dir": cell.name,
            "status": record["status"],
        }
    write_json_atomic(
        root / "mushin_sweep.json",
        {"cells": entries, "grid": dict(grid), "params": list(grid), "schema": 1},
    )


def lr_sweep(root: Path) -> Path:
    """3 cells over ``lr``: two completed with 3-epoch curves, one failed."""
    cells = [
        write_cell(
            root,
            {"lr": 0.01},
            metrics={"val_loss": 0.9, "acc": 0.5},
            series={"train_loss": [2.0, 1.5, 1.2], "val_loss": [1.8, 1.2, 0.9]},
        ),
        write_cell(
            root,
            {"lr": 0.1},
            metrics={"val_loss": 0.2, "acc": 0.8},
            series={"train_loss": [1.5, 0.6, 0.3], "val_loss": [1.0, float("nan"), 0.2]},
        ),
        write_cell(root, {"lr": 1.0}, status="failed", error="lr=1.0 diverged <at> epoch 1"),
    ]
    write_manifest(root, {"lr": [0.01, 0.1, 1.0]}, cells)
    return root


#: a 2 × 2 grid; hidden=16,lr=1.0 diverges (10000×), hidden=64,lr=0.1 is the best
SERIES = {
    (16, 0.1): [1.0, 0.6, 0.5, 0.45],
    (16, 1.0): [10.0, 1000.0, 5000.0, 10000.0],
    (64, 0.1): [1.0, 0.3, 0.1, 0.05],
    (64, 1.0): [2.0, 1.5, 1.2, 1.1],
}


def grid_sweep(root: Path, shift: float = 0.0) -> Path:
    """4 cells over ``hidden`` × ``lr`` that returned only ``done``: their losses live in
    the series, one of them diverging (a log axis), ``shift`` added to val_loss."""
    cells = [
        write_cell(
            root,
            {"hidden": h, "lr": lr},
            metrics={"done": 1.0},
            series={"val_loss": [v + shift for v in ys], "train_loss": [v * 0.9 for v in ys]},
        )
        for (h, lr), ys in SERIES.items()
    ]
    write_manifest(root, {"hidden": [16, 64], "lr": [0.1, 1.0]}, cells)
    return root
