#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""The readers of a big finished sweep against the floor, in fresh processes, interleaved:
``python readers.py CELLS REPEAT [SWEEP]``.

The sweep (``bigsweep.py``: a real sweep's files replicated into a grid of ``CELLS`` cells
with 10-epoch series) is built once, unless ``SWEEP`` names one already built. Each round
runs, one after the other, so that a busy spell hits them all:

* ``floor``: a plain Python loop reading every cell's ``mushin_status.json`` and
  ``mushin_metrics.json`` (what any reader of the sweep must at least read);
* ``status``, ``show``, ``best`` (``show --best loss``), ``report`` (``-o`` a temporary
  file): the ``mushin-box`` commands, output to ``/dev/null``;
* ``load``: ``load_experiment(SWEEP)`` in a fresh Python;
* ``open`` and ``blank``: headless Chromium (``--dump-dom``) opening the report, and a blank
  page (Chromium's own start), when Chromium is installed.

Prints one JSON line: ``{"floor": [s, ...], "show": [...], ..., "cells": N, "page_mb": x,
"rss_mb": {"status": [MB, ...], ...}}``, ``rss_mb`` each process's peak resident memory.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def floor(root: str) -> None:
    """Read every cell's status and metrics: what any reader of the sweep must read."""
    for name in os.listdir(root):
        for f in ("mushin_status.json", "mushin_metrics.json"):
            try:
                with open(os.path.join(root, name, f), "rb") as fh:
                    json.loads(fh.read())
            except (FileNotFoundError, NotADirectoryError):
                pass


FLOOR = f"import json, os, sys\n{inspect.getsource(floor)}\nfloor(sys.argv[1])\n"
LOAD = "import sys; from mushin_box import load_experiment; load_experiment(sys.argv[1])"


#: runs ``argv`` and writes its seconds and peak resident memory (KB) to ``out``: a small
#: process forks it, as GNU time does (a child forked from this one would count this
#: process's memory, copied at the fork, as its own peak)
MEASURED = """
import os, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
took = time.perf_counter() - t0
with open(out, "w") as fh:
    fh.write(f"{took} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _timed(argv: list[str]) -> tuple[float, float]:
    """Seconds and peak resident memory (MB) of ``argv``, a fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        measured = [sys.executable, "-c", MEASURED, out.name, *argv]
        done = subprocess.run(measured, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[:3]}: {done.stderr.decode()[-500:]}")
        took, peak = Path(out.name).read_text().split()
    return float(took), int(peak) / 1024  # KB on Linux


def _chromium(page: Path, profile: Path) -> list[str] | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        return None
    return [
        found,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]


def main() -> int:
    cells, repeat = int(sys.argv[1]), int(sys.argv[2])
    py = sys.executable
    box = str(Path(py).parent / "mushin-box")
    work = Path(tempfile.mkdtemp(prefix="mushin-bench-readers-"))
    try:
        if len(sys.argv) > 3:
            sweep = Path(sys.argv[3])
        else:
            sys.path.insert(0, str(HERE))
            import bigsweep

            side = next(d for d in range(int(cells**0.5), 0, -1) if cells % d == 0)
            sweep = bigsweep.build(work / "sweep", side, cells // side, epochs=10)
        page, blank = work / "report.html", work / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body><p>blank</p></body></html>")
        runs = {
            "floor": [py, "-c", FLOOR, str(sweep)],
            "status": [box, "status", str(sweep)],
            "show": [box, "show", str(sweep)],
            "best": [box, "show", str(sweep), "--best", "loss"],
            "load": [py, "-c", LOAD, str(sweep)],
            "report": [box, "report", str(sweep), "-o", str(page), "--force"],
        }
        out: dict[str, list[float]] = {name: [] for name in (*runs, "open", "blank")}
        rss: dict[str, list[float]] = {name: [] for name in runs}
        _timed(runs["report"])  # warms the bytecode and the page cache
        for _ in range(repeat):
            for name, argv in runs.items():
                took, peak = _timed(argv)
                out[name].append(took)
                rss[name].append(peak)
            for name, target in (("open", page), ("blank", blank)):
                argv = _chromium(target, work / "profile")
                if argv is not None:
                    out[name].append(_timed(argv)[0])
        cells = len(list(sweep.glob("*/mushin_status.json")))
        result: dict[str, object] = {**out, "cells": cells, "rss_mb": rss}
        result["page_mb"] = round(page.stat().st_size / 1e6, 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
