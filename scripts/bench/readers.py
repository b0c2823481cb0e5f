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
* ``running``: ``mushin-box status`` of a second sweep of ``CELLS`` cells, detached to
  SLURM and half done (:func:`running`): the rest queued as arrays of 1,000 tasks, 4 of
  them running, squeue and sacct stand-ins (``cat`` of their answer) on ``PATH``;
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


def running(root: Path, bin_dir: Path, arrays_of: int = 1000) -> None:
    """Turn the finished sweep at ``root`` into a detached SLURM launch half done: the
    first half of the grid completed in array tasks, the next 4 cells running, the rest
    queued without a directory; the manifest and submission as the launch wrote them
    (every cell pending, older than the status files); ``squeue`` and ``sacct`` in
    ``bin_dir`` answer for the tasks."""
    import itertools

    from mushin_box._core.sidecars import canonical_dumps, loads, timestamp

    manifest = loads((root / "mushin_sweep.json").read_bytes())
    where = {json.dumps(e["combo"], sort_keys=True): e["dir"] for e in manifest["cells"].values()}
    grid = manifest["grid"]
    combos = [dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())]
    done, now = len(combos) // 2, timestamp()
    jobs, squeue, sacct = [], [], []
    for i, combo in enumerate(combos):
        job = f"{7000 + i // arrays_of}_{i % arrays_of}"
        jobs.append({"job_id": job, "overrides": [f"{k}={v}" for k, v in combo.items()]})
        cell = root / where[json.dumps(combo, sort_keys=True)]
        if i >= done + 4:
            shutil.rmtree(cell)
            squeue.append(f"{job}|PENDING|JobArrayTaskLimit")
            continue
        record = loads((cell / "mushin_status.json").read_bytes())
        record["slurm_job_id"] = job
        if i >= done:
            record.update(status="running", started=now, ended=None, duration_s=None)
            record.update(host="node1", pid=12345, pid_start=None)
            (cell / "mushin_metrics.json").unlink()
        (squeue if i >= done else sacct).append(f"{job}|{record['status'].upper()}|None")
        (cell / "mushin_status.json").write_bytes(canonical_dumps(record))
    for entry in manifest["cells"].values():
        entry.update(status="pending", dir=None, attempt=0)
    submission = {"cluster": "slurm", "submitted": now, "detached": True, "jobs": jobs}
    for name, data in (("mushin_sweep.json", manifest), ("mushin_jobs.json", submission)):
        (root / name).write_bytes(canonical_dumps(data))
        os.utime(root / name, (1e9, 1e9))  # written at the launch, before any cell
    bin_dir.mkdir()
    for tool, lines in (("squeue", squeue), ("sacct", sacct)):
        (bin_dir / f"{tool}.out").write_text("".join(f"{line}\n" for line in lines))
        (bin_dir / tool).write_text(f"#!/bin/sh\nexec cat '{bin_dir / tool}.out'\n")
        (bin_dir / tool).chmod(0o755)


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


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Seconds and peak resident memory (MB) of ``argv``, a fresh process."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        measured = [sys.executable, "-c", MEASURED, out.name, *argv]
        done = subprocess.run(measured, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        if done.returncode not in (0, 3) or not Path(out.name).read_text():  # 3: cells run
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
        sys.path.insert(0, str(HERE))
        import bigsweep

        side = next(d for d in range(int(cells**0.5), 0, -1) if cells % d == 0)
        if len(sys.argv) > 3:
            sweep = Path(sys.argv[3])
        else:
            sweep = bigsweep.build(work / "sweep", side, cells // side, epochs=10)
        live = bigsweep.build(work / "running", side, cells // side, epochs=10)
        running(live, work / "bin")
        slurm_env = {**os.environ, "PATH": f"{work / 'bin'}{os.pathsep}{os.environ['PATH']}"}
        slurm_env.pop("SLURM_CONF", None)
        page, blank = work / "report.html", work / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body><p>blank</p></body></html>")
        runs = {
            "floor": [py, "-c", FLOOR, str(sweep)],
            "status": [box, "status", str(sweep)],
            "running": [box, "status", str(live)],
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
                took, peak = _timed(argv, slurm_env if name == "running" else None)
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
