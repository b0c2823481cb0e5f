# SPDX-License-Identifier: MIT
"""A finished sweep of many cells, written file by file (the report's many-cell tests)."""

from __future__ import annotations

from pathlib import Path

from sweep_files import write_cell

from mushin_box._sweepdir import manifest


def many_cells(root: Path, a: int, b: int) -> Path:
    """An ``a x b`` finished sweep, loss lowest at a=3,b=5, with 4-epoch curves; its
    manifest written by the engine's function, as ``Workflow.run`` ends."""
    for i in range(a):
        for j in range(b):
            loss = float((i - 3) ** 2 + (j - 5) ** 2) + 0.5
            curve = [loss + 3.0 / (e + 1) for e in range(4)]
            write_cell(root, {"a": i, "b": j}, metrics={"loss": loss}, series={"loss": curve})
    records = list(manifest.cell_records(root))
    grid = {"a": list(range(a)), "b": list(range(b))}
    manifest.write_manifest(root, grid=grid, run_id="r", records=records)
    return root
