#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""Resume of a big finished sweep, in one process: ``python bigresume.py A B REPEAT``.

The sweep is ``bigsweep.py``'s (a real sweep's files replicated into an ``A x B`` grid,
each cell with the config fingerprint the runner computes, so the re-run of the same
script reuses every cell: checked here, a cell rewritten is an error). A warm-up resume of
a 2 x 2 sweep imports everything first. Then, ``REPEAT`` times each, taking turns:

* ``resume``: ``bigsweep.resume`` of the finished sweep (``Workflow(task).run(...,
  resume=True)`` of the same grid);
* ``load``: ``load_experiment`` of it (the results a resume returns, read without it);
* ``left``: the resume with 10 cells deleted (they run again);
* ``fresh``: a fresh sweep of 10 cells (5 x 2) of the same task;
* ``floor``: a plain loop reading every cell's ``mushin_status.json`` and
  ``mushin_metrics.json``.

Prints one JSON line with the seconds of each, ``cells``, and ``rss_mb``: this process's
peak resident memory (MB), the driver's, after all of it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bigsweep  # noqa: E402  (beside this script)
from readers import floor  # noqa: E402

LEFT = 10


def _statuses(root: Path) -> dict[str, int]:
    return {
        p.name: (p / "mushin_status.json").stat().st_mtime_ns
        for p in root.iterdir()
        if (p / "mushin_status.json").is_file()
    }


def main() -> int:
    a, b, repeat = (int(x) for x in sys.argv[1:4])
    work = Path(tempfile.mkdtemp(prefix="mushin-bench-bigresume-"))
    out: dict[str, list[float]] = {k: [] for k in ("resume", "load", "left", "fresh", "floor")}
    try:
        warm = bigsweep.build(work / "warm", 2, 2)
        bigsweep.resume(warm, 2, 2)  # imports and caches
        sweep = bigsweep.build(work / "sweep", a, b)
        before = _statuses(sweep)
        from mushin_box import load_experiment

        def timed(fn: object, *args: object) -> float:
            t0 = time.perf_counter()
            fn(*args)  # type: ignore[operator]
            return time.perf_counter() - t0

        for r in range(repeat):
            out["resume"].append(timed(bigsweep.resume, sweep, a, b))
            out["load"].append(timed(load_experiment, sweep))
            out["floor"].append(timed(floor, str(sweep)))
            if r == 0 and _statuses(sweep) != before:
                raise RuntimeError("a resume of the finished sweep ran cells again")
        for r in range(repeat):
            gone = sorted(p for p in sweep.iterdir() if p.name.startswith("a="))[r * LEFT :]
            for cell in gone[:LEFT]:
                shutil.rmtree(cell)
            out["left"].append(timed(bigsweep.resume, sweep, a, b))
            out["fresh"].append(timed(bigsweep.resume, work / f"fresh{r}", LEFT // 2, 2))
        result = {**out, "cells": a * b}
        result["rss_mb"] = bigsweep.own_peak_mb()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
