# SPDX-License-Identifier: MIT
"""A progress bar over sweep cells, fed by the cell sidecars (works for any launcher
whose cells write to this filesystem, in this process or others)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from mushin_box._core.layout import DONE_CELL_STATES as _DONE

__all__ = ["CellProgress"]


class CellProgress:
    def __init__(self, root: Path, *, total: int, run_id: str, period_s: float = 0.5) -> None:
        self.root = root
        self.total = total
        self.run_id = run_id
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="mushin-progress")
        self._progress: Any = None
        self._task: Any = None

    def _counts(self) -> dict[str, int]:
        from mushin_box._sweep.manifest import cell_records

        counts: dict[str, int] = {}
        for _, record in cell_records(self.root):
            status = str(record.get("status"))
            reused = status == "completed" and record.get("run_id") != self.run_id
            key = "reused" if reused else status
            counts[key] = counts.get(key, 0) + 1
        return counts

    def _update(self) -> None:
        counts = self._counts()
        done = sum(counts.get(s, 0) for s in (*_DONE, "reused"))
        detail = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        self._progress.update(self._task, completed=min(done, self.total), detail=detail)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._update()

    def start(self) -> CellProgress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("[bold]cells"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
        )
        self._task = self._progress.add_task("cells", total=self.total, detail="")
        self._progress.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._update()
        self._progress.stop()
